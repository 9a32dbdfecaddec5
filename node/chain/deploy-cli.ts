/**
 * `npm run deploy`: deploys the contracts to a JSON-RPC endpoint (default: the devnet started by
 * `npm run chain` at http://127.0.0.1:8545) and writes deployments/<chainId>.json.
 *
 *   npm run deploy -- [--rpc-url URL] [--private-key 0x...] [--out DIR]
 *   npm run deploy -- --replace-staking [--predecessor 0x...] [--attach] [--rpc-url URL] [--private-key 0x...] [--out DIR]
 *
 * Without --private-key on chain 31337 it uses the devnet's first account. `--replace-staking`
 * deploys only a new AttestorStaking for the manifest's registry and market (in --out), replacing
 * --predecessor (default: the registry's current attestorStaking()) with its parameters; with
 * --attach it also attaches it when the key is governance's, which should wait until attestors have
 * staked in it (docs/contracts.md, "Replacing the staking").
 */
import { parseArgs } from "node:util";
import { isAddress, zeroAddress, type Address } from "viem";
import { providerRegistryAbi } from "../../common/abi.js";
import { DEVNET_CHAIN_ID, devnetAccount } from "../../common/devnet.js";
import { SuanliError } from "../../common/errors.js";
import { connectChain } from "./clients.js";
import { deployAttestorStaking, deployContracts } from "./deploy.js";
import { DEFAULT_DEPLOYMENTS_DIR, readDeployment, writeDeployment } from "./manifest.js";

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      "rpc-url": { type: "string", default: process.env.SUANLI_CHAIN__RPC_URL ?? "http://127.0.0.1:8545" },
      "private-key": { type: "string", default: process.env.SUANLI_DEPLOYER_KEY },
      out: { type: "string", default: DEFAULT_DEPLOYMENTS_DIR },
      "replace-staking": { type: "boolean", default: false },
      predecessor: { type: "string" },
      attach: { type: "boolean", default: false },
    },
    strict: true,
  });
  const probe = await connectChain({ rpcUrl: values["rpc-url"] });
  const chainId = probe.chain.id;
  const key = values["private-key"];
  if (!key && chainId !== DEVNET_CHAIN_ID) {
    throw new SuanliError(`Chain ${chainId} is not the devnet: pass --private-key of a funded deployer`);
  }
  if (key && !/^0x[0-9a-fA-F]{64}$/.test(key)) throw new SuanliError("--private-key must be 0x followed by 64 hex digits");
  const clients = await connectChain({
    rpcUrl: values["rpc-url"],
    chainId,
    account: (key as `0x${string}` | undefined) ?? devnetAccount(0),
  });
  if ((values.predecessor !== undefined || values.attach) && !values["replace-staking"]) throw new SuanliError("--predecessor and --attach go with --replace-staking");
  if (values["replace-staking"]) {
    const manifest = await readDeployment(values.out, chainId);
    const registry = manifest.contracts.registry;
    const market = manifest.contracts.market;
    if (!registry || !market) throw new SuanliError(`The manifest for chain ${chainId} in ${values.out} names no registry or market: deploy the contracts first`);
    let predecessor: Address;
    if (values.predecessor !== undefined) {
      if (!isAddress(values.predecessor)) throw new SuanliError(`--predecessor must be an address (0x followed by 40 hex digits), got ${values.predecessor}`);
      predecessor = values.predecessor;
    } else {
      predecessor = await clients.publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
      if (predecessor === zeroAddress) throw new SuanliError("The registry names no AttestorStaking to replace: pass --predecessor 0x...");
    }
    const staking = await deployAttestorStaking({ publicClient: clients.publicClient, walletClient: clients.walletClient!, registry, market, predecessor, attach: values.attach });
    console.log(`Deployed AttestorStaking ${staking.address} at block ${staking.blockNumber}, replacing ${staking.predecessor}`);
    console.log(
      staking.attached
        ? "Attached: the registry's attestorStaking() names it, and only its stakes count now; the old one takes no new dispute (its open ones still resolve, its stakes unbond)."
        : `Not attached: attestors stake in it first (AttestorStaking.stake), then governance calls ProviderRegistry.setAttestorStaking(${staking.address})${values.attach ? " (this key is not the registry's governance)" : ", or rerun the deployment's governance key with --attach"}.`,
    );
    return;
  }
  const deployment = await deployContracts({ publicClient: clients.publicClient, walletClient: clients.walletClient! });
  const file = await writeDeployment(values.out, deployment);
  console.log(`Deployed to chain ${chainId} at block ${deployment.deploymentBlock}:`);
  for (const [role, address] of Object.entries(deployment.contracts)) console.log(`  ${role.padEnd(9)} ${address}`);
  console.log(`Manifest: ${file}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof SuanliError ? error.message : error);
  process.exit(1);
});
