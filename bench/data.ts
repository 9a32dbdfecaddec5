/**
 * `npm run bench -- data [--json] [--mb N] [--checkpoint-mb N]`: the data plane (issue #36,
 * docs/data.md), Helia with bitswap on each node's own libp2p host, two nodes on 127.0.0.1, level
 * blockstores on disk:
 *   - add: a folder of N MB (default 256; 16 random files) imported as UnixFS and pinned on node A
 *     (`DataStore.add`, what `suanli data add` does), in MB/s;
 *   - get: node B fetches it from A block by block over bitswap, verifies every block against its
 *     CID and writes the files (`DataStore.get`, what `suanli data get` and a provider's input
 *     fetch do), in MB/s; the bytes written are compared with the source;
 *   Each also in MB per CPU-second of this process (both nodes run in it), the figure that holds on
 *   a loaded host where wall-clock MB/s does not;
 *   - checkpoint: a task's checkpoint folder of M MB (default 1024, one file) snapshotted by the
 *     provider's CheckpointBook (copied out of the task's folder, imported, pinned, the record
 *     signed), with its time and the node's growth sampled every 20 ms: the V8 heap, Buffers
 *     outside it (arrayBuffers), and the resident set split into anonymous memory and pages of
 *     mapped files (LevelDB maps its table files to read them: reclaimable page cache).
 * Targets: add and get >= 200 MB/s (the task-output path measured 201 MB/s); the 1 GiB snapshot
 * streamed, heap growth <= 64 MB. Preemption -> resumed task running is measured by the `resume`
 * suite (bench/resume.ts; docs/data.md, "Preemption → resumed task").
 */
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, readFileSync } from "node:fs";
import { mkdir, mkdtemp, open, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { suanliDomain } from "../common/eip712.js";
import { DataStore } from "../node/data/store.js";
import { silentLogger } from "../node/log/logger.js";
import { startNodeHost, type NodeHost } from "../node/p2p/start.js";
import { CheckpointBook } from "../node/provider/agent/checkpoints.js";
import { loopbackP2pOptions } from "../test/support/nodes.js";
import type { MainFigure } from "./_calibration.js";

const TARGET_MB_PER_S = 200;
const TARGET_HEAP_GROWTH_MB = 64;
const MB = 1024 * 1024;
const FILES = 16;

function option(args: string[], name: string, fallback: number, max: number): number {
  const at = args.indexOf(name);
  const value = at >= 0 ? Number(args[at + 1]) : fallback;
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`${name} takes a whole number of MB from 1 to ${max}`);
  return value;
}

/** Writes `bytes` of random data to `file` in 1 MiB chunks (never the whole file in memory). */
async function writeRandom(file: string, bytes: number): Promise<void> {
  const handle = await open(file, "w");
  try {
    for (let written = 0; written < bytes;) {
      const chunk = randomBytes(Math.min(MB, bytes - written));
      await handle.write(chunk);
      written += chunk.length;
    }
  } finally {
    await handle.close();
  }
}

/** sha256 over every file under `dir`, by sorted relative path (path and bytes), streamed. */
async function treeDigest(dir: string): Promise<string> {
  const hash = createHash("sha256");
  const walk = async (at: string, prefix: string): Promise<void> => {
    for (const entry of (await readdir(at, { withFileTypes: true })).sort((x, y) => (x.name < y.name ? -1 : 1))) {
      const full = path.join(at, entry.name);
      if (entry.isDirectory()) await walk(full, `${prefix}${entry.name}/`);
      else {
        hash.update(`${prefix}${entry.name}\0`);
        for await (const chunk of createReadStream(full)) hash.update(chunk as Buffer);
      }
    }
  };
  await walk(dir, "");
  return hash.digest("hex");
}

/** The resident set split as Linux counts it (/proc/self/status): anonymous memory, and pages of mapped files (LevelDB maps its tables). */
function residentMB(): { anon: number; file: number } {
  const status = readFileSync("/proc/self/status", "utf8");
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0);
  return { anon: kb("RssAnon") / 1024, file: kb("RssFile") / 1024 };
}

/** Samples heap and RSS every 20 ms while `work` runs; growth is the peak over the value before. */
async function sampled<T>(
  work: () => Promise<T>,
): Promise<{ value: T; seconds: number; cpuSeconds: number; heapGrowthMB: number; buffersGrowthMB: number; anonGrowthMB: number; fileMappedGrowthMB: number }> {
  global.gc?.();
  const before = process.memoryUsage();
  const cpuBefore = process.cpuUsage();
  let heapPeak = before.heapUsed;
  const residentBefore = residentMB();
  let anonPeak = residentBefore.anon;
  let filePeak = residentBefore.file;
  let buffersPeak = before.arrayBuffers;
  const timer = setInterval(() => {
    const now = process.memoryUsage();
    heapPeak = Math.max(heapPeak, now.heapUsed);
    buffersPeak = Math.max(buffersPeak, now.arrayBuffers);
    const resident = residentMB();
    anonPeak = Math.max(anonPeak, resident.anon);
    filePeak = Math.max(filePeak, resident.file);
  }, 20);
  const started = performance.now();
  try {
    const value = await work();
    const cpu = process.cpuUsage(cpuBefore);
    return {
      value,
      seconds: (performance.now() - started) / 1000,
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
      heapGrowthMB: (heapPeak - before.heapUsed) / MB,
      buffersGrowthMB: (buffersPeak - before.arrayBuffers) / MB,
      anonGrowthMB: anonPeak - residentBefore.anon,
      fileMappedGrowthMB: filePeak - residentBefore.file,
    };
  } finally {
    clearInterval(timer);
  }
}

const round = (value: number, digits = 1) => Number(value.toFixed(digits));

/** The figures bench/run.ts divides by the same run's calibration figure (bench/_calibration.ts). */
export const mainFigures: MainFigure[] = [
  { field: "add.mbPerCpuS", per: "keccakPerCpuSec" },
  { field: "get.mbPerCpuS", per: "keccakPerCpuSec" },
];

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const mb = option(args, "--mb", 256, 16_384);
  const checkpointMb = option(args, "--checkpoint-mb", 1024, 16_384);
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const root = await mkdtemp(path.join(tmpdir(), "suanli-bench-data-"));
  const hosts: NodeHost[] = [];
  const stores: DataStore[] = [];
  try {
    const peer = async (name: string) => {
      const dataDir = path.join(root, name);
      const p2p = await startNodeHost({ dataDir, options: loopbackP2pOptions(), logger: silentLogger() });
      hosts.push(p2p);
      // The per-peer serving limits are lifted: this measures what the engine moves, not the default budget of one peer (32 MiB/s).
      const serving = { bytesPerSecondPerPeer: 1024 * 1024 * MB, blocksPerSecondPerPeer: 1_000_000 };
      const store = await DataStore.open({ dataDir, libp2p: p2p.host, options: { pinnedBytes: 64 * 1024 * MB, cacheBytes: 64 * 1024 * MB, serving } });
      stores.push(store);
      return { dataDir, p2p, store, addr: p2p.host.getMultiaddrs()[0]!.toString() };
    };
    const a = await peer("a");
    const b = await peer("b");

    // The dataset: 16 files of random bytes (incompressible, no repeated blocks).
    const dataset = path.join(root, "dataset");
    await mkdir(dataset);
    const perFile = Math.ceil((mb * MB) / FILES);
    for (let i = 0; i < FILES; i++) await writeRandom(path.join(dataset, `part-${String(i).padStart(2, "0")}.bin`), Math.min(perFile, mb * MB - i * perFile));
    const sourceDigest = await treeDigest(dataset);
    log(`dataset: ${mb} MB in ${FILES} files`);

    const added = await sampled(() => a.store.add(dataset, { name: "bench" }));
    const addMbPerS = added.value.bytes / MB / added.seconds;
    log(`add on A: ${round(addMbPerS)} MB/s (${round(added.seconds, 2)} s), CID ${added.value.cid}`);

    const target = path.join(root, "got");
    const got = await sampled(() => b.store.get(added.value.cid, target, { providers: [a.addr], timeoutMs: 600_000 }));
    const getMbPerS = got.value.bytes / MB / got.seconds;
    const verified = (await treeDigest(target)) === sourceDigest;
    if (!verified) throw new Error("The files B wrote differ from the dataset A added");
    log(`get on B from A over bitswap: ${round(getMbPerS)} MB/s (${round(got.seconds, 2)} s), every block verified, files identical`);
    await rm(target, { recursive: true, force: true });
    await rm(dataset, { recursive: true, force: true });

    // A checkpoint folder of checkpoint-mb MB in a task's workspace, snapshotted as the provider does.
    const workspace = path.join(root, "workspace");
    await mkdir(path.join(workspace, "checkpoint"), { recursive: true });
    await writeRandom(path.join(workspace, "checkpoint", "model.bin"), checkpointMb * MB);
    const book = new CheckpointBook({ data: a.store, dataDir: a.dataDir, maxBytes: (checkpointMb + 1) * MB, retentionSeconds: 86_400, logger: silentLogger() });
    const signer = { account: privateKeyToAccount(generatePrivateKey()), domain: suanliDomain(31337, "0x0000000000000000000000000000000000000001") };
    const snap = await sampled(() => book.snapshot(1n, workspace, signer, "end"));
    if (!snap.value) throw new Error(`The checkpoint snapshot failed: ${book.lastError(1n)?.message ?? "no record"}`);
    log(
      `checkpoint snapshot of ${checkpointMb} MB: ${round(snap.seconds, 2)} s (${round(checkpointMb / snap.seconds)} MB/s), heap +${round(snap.heapGrowthMB)} MB, buffers +${round(snap.buffersGrowthMB)} MB; resident: anonymous +${round(snap.anonGrowthMB)} MB, mapped files +${round(snap.fileMappedGrowthMB)} MB`,
    );

    const summary = {
      add: { mb, seconds: round(added.seconds, 3), mbPerS: round(addMbPerS), mbPerCpuS: round(mb / added.cpuSeconds), heapGrowthMB: round(added.heapGrowthMB) },
      get: { mb, seconds: round(got.seconds, 3), mbPerS: round(getMbPerS), mbPerCpuS: round(mb / got.cpuSeconds), heapGrowthMB: round(got.heapGrowthMB), verified },
      checkpoint: {
        mb: checkpointMb,
        seconds: round(snap.seconds, 3),
        mbPerS: round(checkpointMb / snap.seconds),
        mbPerCpuS: round(checkpointMb / snap.cpuSeconds),
        heapGrowthMB: round(snap.heapGrowthMB),
        buffersGrowthMB: round(snap.buffersGrowthMB),
        anonGrowthMB: round(snap.anonGrowthMB),
        fileMappedGrowthMB: round(snap.fileMappedGrowthMB),
        cid: snap.value.record.cid,
      },
      targets: { mbPerS: TARGET_MB_PER_S, checkpointHeapGrowthMB: TARGET_HEAP_GROWTH_MB },
      met: {
        add: addMbPerS >= TARGET_MB_PER_S,
        get: getMbPerS >= TARGET_MB_PER_S,
        checkpointHeap: snap.heapGrowthMB <= TARGET_HEAP_GROWTH_MB,
      },
    };
    console.log(
      [
        "| measure | value | target |",
        "|---|---|---|",
        `| add (A) | ${summary.add.mbPerS} MB/s (${summary.add.mbPerCpuS} MB per CPU-s) | >= ${TARGET_MB_PER_S} MB/s |`,
        `| get (B from A, verified) | ${summary.get.mbPerS} MB/s (${summary.get.mbPerCpuS} MB per CPU-s) | >= ${TARGET_MB_PER_S} MB/s |`,
        `| ${checkpointMb} MB checkpoint snapshot | ${summary.checkpoint.seconds} s, heap +${summary.checkpoint.heapGrowthMB} MB | heap growth <= ${TARGET_HEAP_GROWTH_MB} MB |`,
      ].join("\n"),
    );
    return summary;
  } finally {
    for (const store of stores) await store.stop().catch(() => undefined);
    for (const host of hosts) await host.stop().catch(() => undefined);
    await rm(root, { recursive: true, force: true });
  }
}
