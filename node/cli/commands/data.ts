/**
 * `suanli data add|pin|ls|rm|get`: the renter's data on a node (docs/data.md). They talk to the node's
 * HTTP API through the SDK (addData, pinData, listData, removeData, getData); the node is the renter's own,
 * on the same machine: --node-url (env SUANLI_NODE_URL, default http://127.0.0.1:8080, the API's
 * default address), or --pin-on URL for `add`. Progress goes to stderr, data to stdout (--json:
 * one JSON line).
 */
import type { Command } from "commander";
import { addData, getData, listData, pinData, removeData, type DataProgress } from "../../../sdk/index.js";
import { emit, progress } from "../output.js";
import { FlagProblems } from "../preflight.js";

const DEFAULT_NODE_URL = "http://127.0.0.1:8080";

type DataFlags = { nodeUrl: string; json?: boolean };

function withNodeFlags(command: Command): Command {
  return command
    .option("--node-url <url>", "your node's HTTP API, on this machine (env SUANLI_NODE_URL)", process.env.SUANLI_NODE_URL ?? DEFAULT_NODE_URL)
    .option("--json", "print data as one JSON object");
}

function checkUrl(flag: string, value: string, problems: FlagProblems): void {
  try {
    const url = new URL(value);
    if (url.protocol !== "http:" && url.protocol !== "https:") problems.add(`--${flag} must be an http(s) URL, got "${value}"`);
  } catch {
    problems.add(`--${flag} must be a URL like ${DEFAULT_NODE_URL}, got "${value}"`);
  }
}

function size(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

/** Progress lines on stderr, at most one per second (and the last), silent with --json. */
function progressReporter(json: boolean, verb: string): (progress: DataProgress) => void {
  let lastAt = 0;
  return ({ bytes, totalBytes }) => {
    const now = Date.now();
    if (now - lastAt < 1000 && bytes !== totalBytes) return;
    lastAt = now;
    const percent = totalBytes ? ` (${Math.min(100, Math.floor((bytes * 100) / totalBytes))}%)` : "";
    progress(json, `${verb} ${size(bytes)}${totalBytes ? ` of ${size(totalBytes)}` : ""}${percent}`);
  };
}

export function registerData(program: Command): void {
  const data = program.command("data").description("add, list, remove and get content-addressed data on your node (needs data.enabled and api.enabled)");

  withNodeFlags(data.command("add").argument("<path>", "a file or a folder").description("add a file or folder to your node (pinned); prints its CID"))
    .option("--pin-on <url>", "the node API to pin on (instead of --node-url)")
    .option("--name <name>", "the name kept with the pin (default: the file or folder's name)")
    .action(async (localPath: string, flags: DataFlags & { pinOn?: string; name?: string }) => {
      const json = Boolean(flags.json);
      const nodeUrl = flags.pinOn ?? flags.nodeUrl;
      const problems = new FlagProblems();
      checkUrl(flags.pinOn ? "pin-on" : "node-url", nodeUrl, problems);
      problems.throwIfAny();
      const added = await addData(localPath, { nodeUrl, name: flags.name, onProgress: progressReporter(json, "Sent") });
      emit(json, { ...added, nodeUrl }, () => `${added.cid}\n  ${added.name}, ${size(added.bytes)}, pinned on ${nodeUrl}; CID verified locally`);
    });

  withNodeFlags(
    data
      .command("pin")
      .argument("<cid>", "the root to keep")
      .description("have your node fetch data by its CID (over bitswap, every block verified) and pin it: a checkpoint or an output kept past its provider"),
  )
    .option("--name <name>", "the name kept with the pin (default: the CID)")
    .option("--timeout-ms <ms>", "how long the node waits for the data (default: its data.fetchTimeoutMs)")
    .option("--provider <multiaddr>", "a node known to have the data, ending in /p2p/<peer id> (repeatable)", (value: string, previous: string[] = []) => [...previous, value])
    .action(async (cid: string, flags: DataFlags & { name?: string; timeoutMs?: string; provider?: string[] }) => {
      const problems = new FlagProblems();
      checkUrl("node-url", flags.nodeUrl, problems);
      const timeoutMs = problems.number("timeout-ms", flags.timeoutMs);
      problems.throwIfAny();
      const pinned = await pinData(cid, { nodeUrl: flags.nodeUrl, name: flags.name, timeoutMs, providers: flags.provider });
      emit(
        Boolean(flags.json),
        { ...pinned, nodeUrl: flags.nodeUrl },
        () => `${pinned.cid}\n  ${pinned.name}, ${size(pinned.bytes)}, pinned on ${flags.nodeUrl}; every block verified`,
      );
    });

  withNodeFlags(data.command("ls").description("list the data your node pins and caches")).action(async (flags: DataFlags) => {
    const problems = new FlagProblems();
    checkUrl("node-url", flags.nodeUrl, problems);
    problems.throwIfAny();
    const list = await listData({ nodeUrl: flags.nodeUrl });
    emit(Boolean(flags.json), list, () =>
      [
        ...list.items.map((item) => `${item.cid}  ${item.pinned ? "pinned" : "cached"}  ${size(item.bytes).padStart(10)}  ${item.name}`),
        `${list.items.length} root(s); pinned ${size(list.pinnedBytes)} of ${size(list.pinnedLimitBytes)}, cached ${size(list.cachedBytes)} of ${size(list.cacheLimitBytes)}`,
      ].join("\n"),
    );
  });

  withNodeFlags(data.command("rm").argument("<cid>", "the root to remove").description("unpin data on your node (or drop its cached copy)")).action(
    async (cid: string, flags: DataFlags) => {
      const problems = new FlagProblems();
      checkUrl("node-url", flags.nodeUrl, problems);
      problems.throwIfAny();
      const removed = await removeData(cid, { nodeUrl: flags.nodeUrl });
      emit(Boolean(flags.json), removed, () => `Removed ${removed.cid} (${removed.removed})`);
    },
  );

  withNodeFlags(
    data
      .command("get")
      .argument("<cid>", "the root to get")
      .argument("<target>", "a path that does not exist yet: the file, or the folder to create")
      .description("get data through your node (fetched over bitswap when it lacks it) and verify it against the CID"),
  )
    .option("--timeout-ms <ms>", "how long the node waits for the data (default: its data.fetchTimeoutMs)")
    .option("--provider <multiaddr>", "a node known to have the data (repeatable)", (value: string, previous: string[] = []) => [...previous, value])
    .action(async (cid: string, target: string, flags: DataFlags & { timeoutMs?: string; provider?: string[] }) => {
      const json = Boolean(flags.json);
      const problems = new FlagProblems();
      checkUrl("node-url", flags.nodeUrl, problems);
      const timeoutMs = problems.number("timeout-ms", flags.timeoutMs);
      problems.throwIfAny();
      const got = await getData(cid, target, { nodeUrl: flags.nodeUrl, timeoutMs, providers: flags.provider, onProgress: progressReporter(json, "Received") });
      emit(json, got, () => `${got.path}: ${got.kind}, ${size(got.bytes)}, ${got.verified ? "verified against" : "NOT verified against"} ${got.cid}`);
    });
}
