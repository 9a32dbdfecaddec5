/**
 * The SDK client of a renter command (split from renter.ts): its chain, wallet and network flags,
 * `--pin-checkpoints-on` for the commands that follow a task to its end (submit, wait), and with
 * `--smart-account` an ERC-4337 smart account as the renter (docs/aa.md "The CLI with a smart account"): the key or the
 * passkey in the file owns it (a SimpleAccount or a PasskeyAccount, node/cli/smart-account-file.ts), its operations go through `--bundler`, its gas is paid by `--paymaster` (the deployment's sponsor). Its
 * session (the key that signs its requests, approved on-chain once) is kept in the state folder, so that the next
 * command does not approve another.
 */
import { readFile, rm, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";
import type { Command } from "commander";
import { stringifyPlain } from "../../../common/json.js";
import { createClient, type CreateClientParameters, type SuanliClient } from "../../../sdk/index.js";
import { connectChain } from "../../chain/clients.js";
import { resolveAccount } from "../account.js";
import { readSmartAccountOwner } from "../smart-account-file.js";
import { withChainFlags } from "../context.js";
import { checkChainFlags, FlagProblems } from "../preflight.js";
import { progress } from "../output.js";
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

/**
 * `--node-url`: an http(s) URL. A flag only (SUANLI_NODE_URL, which `suanli data` reads, may be set
 * beside SUANLI_BOOTSTRAP); when given, it wins over --bootstrap and SUANLI_BOOTSTRAP, which the README exports.
 */
function nodeUrlOption(flags: RenterFlags, problems: FlagProblems): string | undefined {
  const url = flags.nodeUrl;
  if (url === undefined) return undefined;
  if (!/^https?:\/\/[^\s/]+(\/[^\s]*)?$/.test(url)) problems.add(`--node-url must be a node's HTTP API URL like http://127.0.0.1:8080, got "${url}"`);
  return url;
}

export function withRenterFlags(command: Command, wallet = true): Command {
  withChainFlags(command, { wallet })
    .option("--bootstrap <multiaddrs>", "comma-separated multiaddrs of Suanli nodes (env SUANLI_BOOTSTRAP)", process.env.SUANLI_BOOTSTRAP ?? "")
    .option("--node-url <url>", "a Suanli node's HTTP API (its relay reaches the providers): the command joins no p2p network, which makes reads fast; instead of --bootstrap")
    .option("--state-dir <dir>", "where the CLI keeps your tasks", process.env.SUANLI_STATE_DIR ?? path.join(homedir(), ".suanli"));
  if (!wallet) return command;
  return command
    .option(
      "--smart-account <file>",
      "rent from the ERC-4337 smart account that this file's owner owns: a key file (0x + 64 hex) or a passkey file (`suanli wallet passkey new`) (docs/aa.md); needs --bundler",
    )
    .option("--bundler <url>", "ERC-4337 bundler for --smart-account (env SUANLI_BUNDLER_URL)", process.env.SUANLI_BUNDLER_URL)
    .option("--paymaster <url>", "ERC-7677 paymaster paying --smart-account's gas: the deployment's sponsor (env SUANLI_PAYMASTER_URL)", process.env.SUANLI_PAYMASTER_URL);
}

/** `--smart-account`'s owner key and URLs, every problem added to `problems`; undefined without it. */
async function smartAccountOption(flags: RenterFlags, problems: FlagProblems): Promise<CreateClientParameters["smartAccount"]> {
  const urlProblem = (flag: string, value: string | undefined) => {
    if (value !== undefined && !/^https?:\/\/[^\s]+$/.test(value)) problems.add(`--${flag} must be an http(s):// URL, got "${value}"`);
  };
  urlProblem("bundler", flags.bundler);
  urlProblem("paymaster", flags.paymaster);
  if (flags.smartAccount === undefined) return undefined;
  if (flags.key !== undefined || flags.keyFile !== undefined || flags.devnetAccount !== undefined) {
    problems.add("--smart-account and --key/--key-file/--devnet-account both give the renter: pass one of them (the file's key or passkey owns the smart account)");
  }
  if (!flags.bundler) problems.add("--smart-account needs --bundler URL (or SUANLI_BUNDLER_URL): the ERC-4337 bundler its operations go through");
  const owner = await readSmartAccountOwner(flags.smartAccount, (problem) => problems.add(problem));
  if (!owner || !flags.bundler) return undefined;
  return { owner: owner.owner, bundlerUrl: flags.bundler, ...(flags.paymaster ? { paymasterUrl: flags.paymaster } : {}) };
}

/**
 * A smart account's session, kept between commands in `<state-dir>/session-<chain>-<market>-<account>.json` (mode
 * 0600: its key signs the account's requests until the delegation expires). A file that no longer fits (expired,
 * another deployment's) is set aside; returns what saves the client's session at the end.
 */
async function keepSession(client: SuanliClient, stateDir: string): Promise<() => Promise<void>> {
  const file = path.join(stateDir, `session-${client.chainId}-${(client.deployment.contracts.market ?? "none").toLowerCase()}-${client.address!.toLowerCase()}.json`);
  const saved = await readFile(file, "utf8").catch(() => undefined);
  if (saved) await client.useSession(JSON.parse(saved)).catch(() => rm(file, { force: true }));
  const loaded = client.session?.hash;
  return async () => {
    const session = client.session;
    if (!session || session.hash === loaded) return;
    await writeFile(file, `${stringifyPlain({ privateKey: session.privateKey, delegation: session.delegation })}\n`, { mode: 0o600 });
  };
}

/**
 * Opens an SDK client for the command's flags; `run` gets it and it is always closed. Before
 * anything is reached, the chain and wallet flags are checked and every problem found so far
 * (`problems`, filled by the command with its own flags) is reported at once, exit 2.
 */
export async function withClient<T>(flags: RenterFlags, needWallet: boolean, run: (client: SuanliClient) => Promise<T>, problems = new FlagProblems()): Promise<T> {
  checkChainFlags(flags, problems);
  const smartAccount = await smartAccountOption(flags, problems);
  const copies = checkpointCopyOption(flags, problems);
  const nodeUrl = nodeUrlOption(flags, problems);
  problems.throwIfAny();
  const rpcUrl = flags.rpcUrl ?? "http://127.0.0.1:8545";
  const chain = await connectChain({ rpcUrl });
  const wants = !smartAccount && (needWallet || flags.key || flags.keyFile || flags.devnetAccount || process.env.SUANLI_KEY);
  const account = wants ? await resolveAccount(flags, chain.chain.id) : undefined;
  const bootstrap = (flags.bootstrap ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const stateDir = flags.stateDir ?? path.join(homedir(), ".suanli");
  // One task list per renter: a smart account's is named by its address, known once the client has computed it.
  const client = await createClient({
    rpcUrl,
    ...(smartAccount ? { smartAccount } : { account }),
    // With --node-url, that node's HTTP API and relay instead of libp2p (docs/sdk.md "The CLI through a node's API").
    ...(nodeUrl ? { nodeUrl } : { bootstrap }),
    // One command is a short-lived client: it pulls the book, never joins gossip (issue #40 item 12).
    gossip: false,
    deployment: flags.deployments,
    ...(smartAccount || account ? { stateFile: path.join(stateDir, `tasks-{deployment}-{renter}.json`) } : {}),
    ...copies,
    onProgress: (line) => progress(Boolean(flags.json), line),
  });
  const saveSession = smartAccount ? await keepSession(client, stateDir) : undefined;
  try {
    return await run(client);
  } finally {
    await saveSession?.().catch((error: unknown) => progress(Boolean(flags.json), `Could not keep the smart account's session: ${String(error)}`));
    await client.close();
  }
}
