/**
 * How a renter command opens its SDK client (split from renter.ts): the chain, wallet, bootstrap
 * and state-dir flags every renter command takes, and `--pin-checkpoints-on` for the commands that
 * follow a task to its end (submit, wait).
 */
import { homedir } from "node:os";
import path from "node:path";
import type { Command } from "commander";
import { createClient, type SuanliClient } from "../../../sdk/index.js";
import { connectChain } from "../../chain/clients.js";
import { resolveAccount } from "../account.js";
import { withChainFlags } from "../context.js";
import { progress } from "../output.js";
import { checkChainFlags, FlagProblems } from "../preflight.js";
import type { RenterFlags } from "./renter-output.js";

/**
 * `--pin-checkpoints-on URL` (env SUANLI_PIN_CHECKPOINTS_ON): each new checkpoint of the task is
 * pinned on that node as it appears (client option `pinCheckpointsOn`, docs/data.md "Where data
 * lives"). Added as `.option(...CHECKPOINT_COPY_FLAG)`.
 */
export const CHECKPOINT_COPY_FLAG = [
  "--pin-checkpoints-on <url>",
  "your node's HTTP API (on this machine, data.enabled): each new checkpoint is pinned there as it appears, and a resumed lease fetches it from there after its provider is gone (env SUANLI_PIN_CHECKPOINTS_ON)",
  process.env.SUANLI_PIN_CHECKPOINTS_ON,
] as const;

/** The client option `--pin-checkpoints-on` gives; a value that is not an http(s) URL is a usage error. */
function checkpointCopyOption(flags: RenterFlags & { pinCheckpointsOn?: string }, problems: FlagProblems): { pinCheckpointsOn?: string } {
  const url = flags.pinCheckpointsOn;
  if (url === undefined || url === "") return {};
  if (!/^https?:\/\/[^/]+/.test(url)) problems.add(`--pin-checkpoints-on must be a node's HTTP API URL like http://127.0.0.1:8080, got "${url}"`);
  return { pinCheckpointsOn: url };
}

export function withRenterFlags(command: Command, wallet = true): Command {
  return withChainFlags(command, { wallet })
    .option("--bootstrap <multiaddrs>", "comma-separated multiaddrs of Suanli nodes (env SUANLI_BOOTSTRAP)", process.env.SUANLI_BOOTSTRAP ?? "")
    .option("--state-dir <dir>", "where the CLI keeps your tasks", process.env.SUANLI_STATE_DIR ?? path.join(homedir(), ".suanli"));
}

/**
 * Opens an SDK client for the command's flags; `run` gets it and it is always closed. Before
 * anything is reached, the chain and wallet flags are checked and every problem found so far
 * (`problems`, filled by the command with its own flags) is reported at once, exit 2.
 */
export async function withClient<T>(flags: RenterFlags, needWallet: boolean, run: (client: SuanliClient) => Promise<T>, problems = new FlagProblems()): Promise<T> {
  checkChainFlags(flags, problems);
  const copies = checkpointCopyOption(flags, problems);
  problems.throwIfAny();
  const rpcUrl = flags.rpcUrl ?? "http://127.0.0.1:8545";
  const chain = await connectChain({ rpcUrl });
  const wants = needWallet || flags.key || flags.keyFile || flags.devnetAccount || process.env.SUANLI_KEY;
  const account = wants ? await resolveAccount(flags, chain.chain.id) : undefined;
  const bootstrap = (flags.bootstrap ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const stateFile = account ? path.join(flags.stateDir ?? path.join(homedir(), ".suanli"), `tasks-{deployment}-${account.address.toLowerCase()}.json`) : undefined;
  const client = await createClient({
    rpcUrl,
    account,
    bootstrap,
    // One command is a short-lived client: it pulls the book, never joins gossip (issue #40 item 12).
    gossip: false,
    deployment: flags.deployments,
    stateFile,
    ...copies,
    onProgress: (line) => progress(Boolean(flags.json), line),
  });
  try {
    return await run(client);
  } finally {
    await client.close();
  }
}
