/**
 * The output snapshot race (issue #33, item 1), performed for real in both runtimes: a running
 * task swaps a folder of its `output/` with a symbolic link to the provider node's data dir
 * (renameat2 RENAME_EXCHANGE under bubblewrap; plain busybox `mv`s in a Podman container) while
 * its renter downloads snapshots in a bounded loop. Before the fix the renter received the node's
 * peer.key and sealing.key this way (now sealing-keys/<id>.json); now no byte of the data dir (its keys and a canary file) ever
 * arrives, while the task's own files still do.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { multiaddr } from "@multiformats/multiaddr";
import { devnetAccount } from "../../common/devnet.js";
import { suanliDomain } from "../../common/eip712.js";
import type { SuanliHost } from "../../common/p2p/host.js";
import { OUTPUT_PROTOCOL } from "../../common/p2p/protocols.js";
import { openStreamProtocol } from "../../common/p2p/streams.js";
import { signLeaseRequest } from "../../common/protocols/lease.js";
import { OUTPUT_ACK_BYTES, OUTPUT_FRAME_BYTES, TASK_IO_CONTROL_MAX_BYTES, outputManifestSchema } from "../../common/protocols/task-io.js";
import type { SuanliClient } from "../../sdk/index.js";
import type { BundleServer } from "../support/bundles.js";
import { BUSYBOX_IMAGE, requireContainerSupport } from "../support/container-images.js";
import { lightHost } from "../support/attacker.js";
import type { Devnet } from "../support/devnet.js";
import type { TestProvider } from "../support/provider.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

/** Bounds of the renter's loops: whichever comes first. */
const MAX_DOWNLOADS = 15;
const MAX_RAW_READS = 400;
const MAX_LOOP_MS = 12_000;
/** How far the renter's download loop goes on a loaded host before the first snapshot through the swapped folder. */
const MAX_DOWNLOADS_LOADED = 60;
const MAX_LOOP_MS_LOADED = 45_000;

/** Under bubblewrap: the system's Python swaps output/d and output/x (a link to $TARGET) atomically, without end. */
const SWAP_PY = `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
out = os.environ["SUANLI_OUTPUT_DIR"]
os.makedirs(out + "/d")
with open(out + "/d/f", "w") as f:
    f.write("task data\\n")
with open(out + "/plain.txt", "w") as f:
    f.write("plain\\n")
os.symlink(os.environ["TARGET"], out + "/x")
print("swapping", flush=True)
a, b = (out + "/d").encode(), (out + "/x").encode()
while True:
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
`;

/** In a container: the same with busybox mv (d is the link between the second and third mv). */
const SWAP_SH = [
  'OUT="$SUANLI_OUTPUT_DIR"',
  'mkdir -p "$OUT/d"',
  'echo "task data" > "$OUT/d/f"',
  'echo plain > "$OUT/plain.txt"',
  'ln -s "$TARGET" "$OUT/l"',
  "echo swapping",
  'while :; do mv "$OUT/d" "$OUT/t"; mv "$OUT/l" "$OUT/d"; mv "$OUT/d" "$OUT/l"; mv "$OUT/t" "$OUT/d"; done',
].join("\n");

/** Every file under `dir`, staging folders included: whatever the SDK wrote anywhere. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath, entry.name));
}

type Secrets = { name: string; bytes: Buffer }[];

/** The node's data dir secrets the test looks for in every downloaded byte: its keys and a canary. */
async function dataDirSecrets(dataDir: string): Promise<Secrets> {
  const canary = Buffer.from(`canary-${randomBytes(16).toString("hex")}`);
  await writeFile(path.join(dataDir, "canary.key"), canary, { mode: 0o600 });
  const secrets: Secrets = [{ name: "canary.key", bytes: canary }];
  secrets.push({ name: "peer.key", bytes: await readFile(path.join(dataDir, "peer.key")) });
  // The sealing keys rotate (node/provider/agent/sealing.ts): one file per key under sealing-keys/.
  const sealing = (await readdir(path.join(dataDir, "sealing-keys"))).filter((name) => name.endsWith(".json"));
  assert.ok(sealing.length > 0, `the node holds a sealing key under ${dataDir}/sealing-keys`);
  for (const name of sealing) secrets.push({ name: `sealing-keys/${name}`, bytes: await readFile(path.join(dataDir, "sealing-keys", name)) });
  return secrets;
}

/**
 * The renter's side of the attack: downloads snapshots in a bounded loop and checks every byte
 * that landed on its disk. Returns how many downloads succeeded and how many carried the task's
 * own swapped file (so the test shows the walk did go through the folder being swapped).
 */
async function downloadLoop(client: SuanliClient, taskId: string, work: string, secrets: Secrets): Promise<{ ok: number; failed: number; withTaskFile: number }> {
  let ok = 0;
  let failed = 0;
  let withTaskFile = 0;
  const started = Date.now();
  // MAX_DOWNLOADS in MAX_LOOP_MS; on a loaded host, where most downloads can meet a swap
  // mid-read, on until one succeeded through the swapped folder, within the outer bounds.
  const enough = () => i >= MAX_DOWNLOADS || Date.now() - started >= MAX_LOOP_MS;
  const outerBound = () => i >= MAX_DOWNLOADS_LOADED || Date.now() - started >= MAX_LOOP_MS_LOADED;
  let i = 0;
  for (; !outerBound() && !(enough() && withTaskFile > 0); i++) {
    const dir = path.join(work, `snapshot-${i}`);
    const result = await client.downloadOutput(taskId, { dir, resume: false }).catch((error: Error) => error);
    if (result instanceof Error) {
      // The output changed between listing and reading (the provider no longer has the file the
      // read starts at: InvalidMessageError), or a file was swapped away mid-read.
      assert.ok(["OutputDownloadError", "InvalidMessageError"].includes(result.name), `${result.name}: ${result.message}`);
      failed++;
    } else {
      ok++;
      assert.equal(result.snapshot, true);
      assert.equal(result.verified, false, "a running task's snapshot is never called verified");
      for (const file of result.files) assert.match(file.path, /^(plain\.txt|[dxt]\/f)$/, `listed ${file.path}: something outside the task's own files`);
      if (result.files.some((file) => file.path.endsWith("/f"))) withTaskFile++;
    }
    for (const file of await filesUnder(dir)) {
      const bytes = await readFile(file);
      for (const secret of secrets) assert.equal(bytes.indexOf(secret.bytes), -1, `${path.relative(dir, file)} holds the node's ${secret.name}`);
      // Each file (a partial one too, left staged by a failed download) is the task's, or the start of it.
      const text = bytes.toString();
      const staged = file.includes(".suanli-partial-") && file.endsWith("manifest.json");
      if (!staged) assert.ok("task data\n".startsWith(text) || "plain\n".startsWith(text), `${file} holds bytes the task did not write: ${JSON.stringify(text.slice(0, 80))}`);
    }
  }
  return { ok, failed, withTaskFile };
}

/**
 * The attacker's own client: raw output `read` requests (the whole output in one stream, no
 * listing first, nothing compared), as fast as the provider answers, every byte kept. Returns
 * how many reads carried the task's own file.
 */
async function rawReadLoop(
  host: SuanliHost,
  target: { addr: string; address: `0x${string}`; leaseId: bigint; domain: ReturnType<typeof suanliDomain> },
  secrets: Secrets,
): Promise<{ reads: number; withTaskFile: number }> {
  const renter = devnetAccount(5);
  const params = { op: "read", fromOffset: 0 };
  let reads = 0;
  let withTaskFile = 0;
  const started = Date.now();
  for (; reads < MAX_RAW_READS && Date.now() - started < MAX_LOOP_MS; reads++) {
    const auth = await signLeaseRequest((p) => renter.signTypedData(p), target.domain, { leaseId: target.leaseId, provider: target.address, action: "output", body: params });
    const opened = await openStreamProtocol(
      host,
      multiaddr(target.addr),
      OUTPUT_PROTOCOL,
      { auth, params },
      {
        responseSchema: outputManifestSchema,
        maxFrameBytes: Math.max(OUTPUT_FRAME_BYTES, TASK_IO_CONTROL_MAX_BYTES),
      },
    ).catch(() => undefined);
    if (!opened) continue;
    for (const file of opened.answer.files) assert.match(file.path, /^(plain\.txt|[dxt]\/f)$/, `the provider listed ${file.path}: something outside the task's own files`);
    const chunks: Buffer[] = [];
    let unacked = 0;
    for (let frames = 0; frames < 10_000; frames++) {
      const frame = await opened.lp.read({ signal: AbortSignal.timeout(10_000) }).catch(() => undefined);
      if (!frame) break;
      chunks.push(Buffer.from(frame.subarray()));
      unacked += frame.byteLength;
      while (unacked >= OUTPUT_ACK_BYTES) {
        unacked -= OUTPUT_ACK_BYTES;
        await opened.lp.write(Uint8Array.of(1)).catch(() => undefined);
      }
    }
    opened.stream.abort(new Error("done"));
    const bytes = Buffer.concat(chunks);
    for (const secret of secrets) assert.equal(bytes.indexOf(secret.bytes), -1, `a raw read received the node's ${secret.name}`);
    if (bytes.includes("task data")) withTaskFile++;
  }
  return { reads, withTaskFile };
}

async function waitForLine(client: SuanliClient, taskId: string, text: string): Promise<void> {
  await waitFor(
    `the task's "${text}" line`,
    async () => {
      for await (const line of client.logs(taskId, { follow: false })) if (line.text.includes(text)) return true;
      return false;
    },
    { timeoutMs: 60_000 },
  );
}

for (const runtime of ["bubblewrap", "container"] as const) {
  describe(`output snapshots of a task swapping folders for links to the node's data dir (${runtime === "bubblewrap" ? "process runtime, bubblewrap" : "container runtime, Podman"})`, function () {
    this.timeout(240_000);
    let devnet: Devnet;
    let bundles: BundleServer;
    let provider: TestProvider;
    let client: SuanliClient;
    let work: string;
    let market: RenterMarket;

    before(async () => {
      if (runtime === "container") await requireContainerSupport();
      market = await startRenterMarket({
        name: `output-race-${runtime}`,
        provider: {
          provider: {
            runtime: runtime === "bubblewrap" ? { sandbox: "bubblewrap", network: false } : { kind: "container", containerEngine: "podman", containerGpus: "none", network: false },
            grace: { taskStopMs: 2_000 },
          },
        },
        freeUnits: 1,
        offerTimeoutMs: 30_000,
      });
      ({ work, devnet, bundles, provider, client } = market);
    });
    after(async () => {
      await market?.close();
    });

    it("no byte of the node's keys or canary reaches the renter; the task's own files do; the final output after a cancel verifies", async () => {
      const dataDir = provider.daemon.config.dataDir;
      const secrets = await dataDirSecrets(dataDir);
      const env = { TARGET: dataDir };
      const task =
        runtime === "bubblewrap"
          ? await (async () => {
              const bundle = await bundles.bundle({ "swap.py": SWAP_PY });
              return client.submitTask({
                gpuType: "A100",
                gpuCount: 1,
                duration: 180,
                maxPricePerGpuHour: "1",
                attestedOnly: false,
                bundleUrl: bundle.url,
                sha256: bundle.sha256,
                command: ["/usr/bin/python3", "swap.py"],
                env,
              });
            })()
          : await client.submitTask({ gpuType: "A100", gpuCount: 1, duration: 180, maxPricePerGpuHour: "1", attestedOnly: false, image: BUSYBOX_IMAGE, command: SWAP_SH, env });
      await waitForLine(client, task.taskId, "swapping");

      // The attacker's raw reads, then the SDK's snapshot downloads (a renter's ordinary path).
      const attacker = await lightHost();
      try {
        const domain = suanliDomain(devnet.deployment.chainId, devnet.deployment.contracts.market as `0x${string}`);
        const raw = await rawReadLoop(attacker, { addr: provider.peer.addr, address: provider.peer.address, leaseId: task.leaseId, domain }, secrets);
        assert.ok(raw.withTaskFile > 0, `none of ${raw.reads} raw reads carried the task's own file from the folder being swapped: the walk never went through it`);
      } finally {
        await attacker.stop();
      }
      const outcome = await downloadLoop(client, task.taskId, work, secrets);
      assert.ok(outcome.ok > 0, `no snapshot download succeeded (${outcome.failed} failed)`);
      assert.ok(outcome.withTaskFile > 0, "no snapshot carried the task's own file from the folder being swapped: the walk never went through it");

      // Cancel and fetch what it wrote: verified against the provider's signed report (the renter's
      // close puts no completion on-chain), and still nothing of the data dir.
      await client.cancel(task.taskId);
      const final = await client.downloadOutput(task.taskId, { dir: path.join(work, "final") });
      assert.equal(final.snapshot, false);
      assert.equal(final.verified, true);
      assert.equal(final.verifiedAgainst, "signed-report");
      for (const file of final.files) assert.match(file.path, /^(plain\.txt|[dxt]\/f)$/);
      for (const file of await filesUnder(path.join(work, "final"))) {
        const bytes = await readFile(file);
        for (const secret of secrets) assert.equal(bytes.indexOf(secret.bytes), -1, `the final output holds the node's ${secret.name}`);
      }
    });
  });
}
