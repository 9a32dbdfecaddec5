/**
 * `npm run deploy`: deploys the contracts to a JSON-RPC endpoint (default: the devnet started by
 * `npm run chain` at http://127.0.0.1:8545) and writes deployments/<chainId>.json.
 *
 *   npm run deploy -- [--rpc-url URL] [--private-key 0x...] [--out DIR] [--account-abstraction]
 *   npm run deploy -- --params production --token 0x... --proposer 0x... [--proposer ...] [--executor 0x...|anyone]
 *                     [--canceller 0x...] [--timelock-delay SECONDS] [--treasury 0x...] [--attestor 0x...] ...
 *   npm run deploy -- --replace-staking [--predecessor 0x...] [--attach] [--rpc-url URL] [--private-key 0x...] [--out DIR]
 *
 * Without --private-key on chain 31337 it uses the devnet's first account, deploys the devnet's TestToken and keeps
 * the deployer as governance. A real deployment (docs/contracts.md, "Deploying for real") settles in an existing
 * ERC-20 (`--token`, checked: 6 decimals, EIP-2612 detected, no fee on transfer), takes the production parameters
 * by name (`--params production`) and hands every admin power to a new TimelockController whose proposers,
 * executors and cancellers the flags name. `--replace-staking` deploys only a new AttestorStaking for the manifest's
 * registry and market (in --out), replacing --predecessor (default: the registry's current attestorStaking()) with
 * its parameters; with --attach it also attaches it when the key is governance's, which should wait until
 * attestors have staked in it (docs/contracts.md, "Replacing the staking").
 */
import { isAddress, zeroAddress, type Address } from "viem";
import { providerRegistryAbi } from "../../common/abi.js";
import type { Deployment } from "../../common/deployment.js";
import { DEVNET_CHAIN_ID, devnetAccount } from "../../common/devnet.js";
import { SuanliError } from "../../common/errors.js";
import { connectChain } from "./clients.js";
import { deployAttestorStaking, deployContracts } from "./deploy.js";
import { parseDeployFlags } from "./deploy-flags.js";
import { readDeployment, writeDeployment } from "./manifest.js";
import { ANYONE } from "./timelock.js";

async function main(): Promise<void> {
  // Every flag is checked before the chain is even asked.
  const plan = parseDeployFlags(process.argv.slice(2));
  const probe = await connectChain({ rpcUrl: plan.rpcUrl });
  const chainId = probe.chain.id;
  if (!plan.privateKey && chainId !== DEVNET_CHAIN_ID) {
    throw new SuanliError(`Chain ${chainId} is not the devnet: pass --private-key of a funded deployer`);
  }
  const clients = await connectChain({ rpcUrl: plan.rpcUrl, chainId, account: plan.privateKey ?? devnetAccount(0) });
  if (plan.replaceStaking) return replaceStaking(plan.out, chainId, clients, plan.replaceStaking.predecessor, plan.replaceStaking.attach);
  const deployment = await deployContracts({ publicClient: clients.publicClient, walletClient: clients.walletClient!, ...plan.deploy });
  const file = await writeDeployment(plan.out, deployment);
  console.log(describeDeployment(deployment));
  console.log(`Manifest: ${file}`);
}

async function replaceStaking(out: string, chainId: number, clients: Awaited<ReturnType<typeof connectChain>>, predecessorFlag: Address | undefined, attach: boolean) {
  const manifest = await readDeployment(out, chainId);
  const registry = manifest.contracts.registry;
  const market = manifest.contracts.market;
  if (!registry || !market) throw new SuanliError(`The manifest for chain ${chainId} in ${out} names no registry or market: deploy the contracts first`);
  let predecessor: Address;
  if (predecessorFlag !== undefined) {
    if (!isAddress(predecessorFlag)) throw new SuanliError(`--predecessor must be an address (0x followed by 40 hex digits), got ${predecessorFlag}`);
    predecessor = predecessorFlag;
  } else {
    predecessor = await clients.publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
    if (predecessor === zeroAddress) throw new SuanliError("The registry names no AttestorStaking to replace: pass --predecessor 0x...");
  }
  const staking = await deployAttestorStaking({ publicClient: clients.publicClient, walletClient: clients.walletClient!, registry, market, predecessor, attach });
  console.log(`Deployed AttestorStaking ${staking.address} at block ${staking.blockNumber}, replacing ${staking.predecessor}`);
  if (staking.attached) {
    await writeDeployment(out, { ...manifest, contracts: { ...manifest.contracts, attestorStaking: staking.address } });
  }
  console.log(
    staking.attached
      ? "Attached: the registry's attestorStaking() names it (and the manifest), and only its stakes count now; the old one takes no new dispute (its open ones still resolve, its stakes unbond)."
      : `Not attached: attestors stake in it first (AttestorStaking.stake), then governance calls ProviderRegistry.setAttestorStaking(${staking.address})${attach ? " (this key is not the registry's governance)" : ", or rerun the deployment's governance key with --attach"}.`,
  );
}

/** What a deployment set up, for the operator: contracts, token, parameters, governance and the next steps. */
function describeDeployment(d: Deployment): string {
  const lines = [`Deployed to chain ${d.chainId} at block ${d.deploymentBlock}:`];
  for (const [role, address] of Object.entries(d.contracts)) lines.push(`  ${role.padEnd(21)} ${address}`);
  const permit = d.token.permit ? `EIP-2612 permit (domain "${d.token.permit.name}", version "${d.token.permit.version}")` : "no EIP-2612 permit (deposits are approved)";
  lines.push(`Token: ${d.token.symbol}, ${d.token.decimals} decimals, ${permit}${d.token.origin === "existing" ? "" : ", the devnet's open faucet"}`);
  if (d.params) lines.push(`Parameters: ${d.params.preset} (every value in the manifest)`);
  const timelock = d.governance?.timelock;
  if (timelock) {
    const executors = timelock.executors.map((a) => (a === ANYONE ? "anyone" : a)).join(", ");
    lines.push(
      `Governance: the timelock ${d.governance!.admin} holds every admin power, with a delay of ${timelock.minDelaySeconds} s (${+(timelock.minDelaySeconds / 86_400).toFixed(2)} days)`,
      `  proposers ${timelock.proposers.join(", ")}; executors ${executors}${timelock.cancellers.length ? `; cancellers ${timelock.cancellers.join(", ")}` : ""}`,
      `  the deployer ${d.deployer} holds no role`,
    );
  } else if (d.governance) {
    lines.push(`Governance: ${d.governance.admin} holds every admin power at once (no timelock: a devnet's setting)`);
  }
  if (d.roles) lines.push(`Attestors: ${d.roles.attestor.length ? d.roles.attestor.join(", ") : "none yet"}`);
  lines.push(
    "An attestor joins with `npx suanli attestor stake` (its own key), then governance grants it the role:",
    timelock
      ? "  `npx suanli governance grant-attestor <address>` prints the proposal; add --schedule (a proposer), then --execute after the delay."
      : "  `npx suanli governance grant-attestor <address> --execute` (the admin's key).",
  );
  return lines.join("\n");
}

main().catch((error: unknown) => {
  console.error(error instanceof SuanliError ? error.message : error);
  process.exit(1);
});
