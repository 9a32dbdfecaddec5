/**
 * `npm run deploy`: deploys the contracts to a JSON-RPC endpoint (default: the devnet started by
 * `npm run chain` at http://127.0.0.1:8545) and writes deployments/<chainId>.json.
 *
 *   npm run deploy -- [--rpc-url URL] [--private-key 0x...] [--out DIR]
 *
 * Without --private-key on chain 31337 it uses the devnet's first account.
 */
import { parseArgs } from "node:util";
import { DEVNET_CHAIN_ID, devnetAccount } from "../../common/devnet.js";
import { SuanliError } from "../../common/errors.js";
import { connectChain } from "./clients.js";
import { deployContracts } from "./deploy.js";
import { DEFAULT_DEPLOYMENTS_DIR, writeDeployment } from "./manifest.js";

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      "rpc-url": { type: "string", default: process.env.SUANLI_CHAIN__RPC_URL ?? "http://127.0.0.1:8545" },
      "private-key": { type: "string", default: process.env.SUANLI_DEPLOYER_KEY },
      out: { type: "string", default: DEFAULT_DEPLOYMENTS_DIR },
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
