/**
 * `npm run bench -- io [--json] [--mb N] [--requests N]`: task I/O over libp2p on loopback. On a
 * devnet with one provider process, a task writes an N MB output (default 256) and serves a TCP
 * echo on a declared port. The renter measures:
 *   - output download throughput (MB/s): the renter cancels the task, then `downloadOutput` of
 *     the final output, digest recomputed and verified against the provider's signed completion
 *     report (the renter's close puts none on-chain; included in the time, with the SDK's read of
 *     the task's state). An output that does not verify fails the bench;
 *   - forward round-trip latency of small requests (64 bytes) over one forwarded connection:
 *     p50 and p99 over `--requests` round trips (default 2000).
 * Targets (issue #16): download >= 100 MB/s; forward RTT p50 <= 2 ms.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { devnetAccount } from "../common/devnet.js";
import { startBundleServer } from "../node/demo/bundles.js";
import { startDemoMarket } from "../node/demo/market.js";
import { createClient } from "../sdk/index.js";
import type { MainFigure } from "./_calibration.js";

const TARGET_MB_PER_S = 100;
const TARGET_P50_RTT_MS = 2;

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

function option(args: string[], name: string, fallback: number, max: number): number {
  const at = args.indexOf(name);
  const value = at >= 0 ? Number(args[at + 1]) : fallback;
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`${name} takes a whole number from 1 to ${max}`);
  return value;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return address.port;
}

/** The figures bench/run.ts divides by the same run's calibration figure (bench/_calibration.ts). */
export const mainFigures: MainFigure[] = [{ field: "download.mbPerS", per: "keccakPerCpuSec" }];

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const mb = option(args, "--mb", 256, 4096);
  const requests = option(args, "--requests", 2000, 1_000_000);
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const work = await mkdtemp(path.join(tmpdir(), "suanli-bench-io-"));
  const market = await startDemoMarket({
    providers: [{ name: "provider-1", account: 1, model: "A100-80GB", count: 1, region: "eu-west", usd: "1.80" }],
    attestors: [],
    logLevel: "warn",
  });
  const bundles = await startBundleServer();
  const renter = devnetAccount(4);
  await market.mint(renter.address, 10_000n);
  const client = await createClient({ rpcUrl: market.chain.rpcUrl, account: renter, bootstrap: market.providerAddrs, deployment: market.deployment });
  try {
    const deadline = Date.now() + 60_000;
    while ((await client.queryOffers()).length < 1) {
      if (Date.now() > deadline) throw new Error("the provider's offer did not arrive");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const port = await freePort();
    const bundle = await bundles.bundle({
      // Python from the system (the sandbox binds /usr, not this checkout's Node).
      "echo.py": [
        "import socket",
        "s = socket.socket()",
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)",
        `s.bind(("127.0.0.1", ${port}))`,
        "s.listen(16)",
        'print("echo up", flush=True)',
        "while True:",
        "    c, _ = s.accept()",
        "    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)",
        "    while True:",
        "        d = c.recv(65536)",
        "        if not d:",
        "            break",
        "        c.sendall(d)",
        "    c.close()",
      ].join("\n"),
      "run.sh": [`mkdir -p "$SUANLI_OUTPUT_DIR"`, `head -c ${mb * 1024 * 1024} /dev/urandom > "$SUANLI_OUTPUT_DIR/weights.bin"`, "exec /usr/bin/python3 echo.py"].join("\n"),
    });
    const { taskId } = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 600,
      maxPricePerGpuHour: "3",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "sh run.sh",
      ports: [port],
    });
    log(`task ${taskId} submitted; waiting for its echo server`);
    let tunnel: Awaited<ReturnType<typeof client.forward>> | undefined;
    let lastError: unknown;
    for (let tries = 0; tries < 300 && !tunnel; tries++) {
      tunnel = await client.forward(taskId, { port }).catch((error: unknown) => void (lastError = error));
      if (!tunnel) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    if (!tunnel) throw new Error(`the task's echo server did not come up: ${(lastError as Error)?.message}`);

    // Forward RTT: one connection, one small request at a time.
    const socket = connect({ host: "127.0.0.1", port: tunnel.localPort });
    socket.setNoDelay(true);
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    const payload = Buffer.alloc(64, 7);
    const rtts: number[] = [];
    for (let i = 0; i < requests + 50; i++) {
      const started = performance.now();
      await new Promise<void>((resolve) => {
        let got = 0;
        const onData = (chunk: Buffer) => {
          got += chunk.length;
          if (got >= payload.length) {
            socket.off("data", onData);
            resolve();
          }
        };
        socket.on("data", onData);
        socket.write(payload);
      });
      if (i >= 50) rtts.push(performance.now() - started); // the first 50 warm up
    }
    socket.destroy();
    await tunnel.close();
    const sorted = rtts.sort((a, b) => a - b);
    log(`forward RTT over ${requests} round trips: p50 ${percentile(sorted, 50).toFixed(3)} ms, p99 ${percentile(sorted, 99).toFixed(3)} ms`);

    // End the task: its output becomes final (digested and signed), then download it. The lease
    // ends by the renter's close, so the output verifies against the provider's signed report.
    await client.cancel(taskId);
    const started = performance.now();
    const result = await client.downloadOutput(taskId, { dir: path.join(work, "out") });
    const seconds = (performance.now() - started) / 1000;
    if (!result.verified) throw new Error(`the cancelled task's output did not verify (${result.snapshot ? "served as a snapshot" : "unverified"})`);
    const mbPerS = result.bytes / 1024 / 1024 / seconds;
    log(`downloaded ${result.bytes} bytes in ${seconds.toFixed(2)} s (verified: ${result.verified})`);
    const summary = {
      outputMB: mb,
      download: { bytes: result.bytes, seconds: Number(seconds.toFixed(3)), mbPerS: Number(mbPerS.toFixed(1)), verified: result.verified, verifiedAgainst: result.verifiedAgainst },
      forwardRttMs: { requests, p50: Number(percentile(sorted, 50).toFixed(3)), p99: Number(percentile(sorted, 99).toFixed(3)), max: Number(sorted.at(-1)!.toFixed(3)) },
      targets: { downloadMbPerS: TARGET_MB_PER_S, forwardP50Ms: TARGET_P50_RTT_MS },
      targetsMet: { download: mbPerS >= TARGET_MB_PER_S, forwardP50: percentile(sorted, 50) <= TARGET_P50_RTT_MS },
    };
    process.stdout.write(
      [
        "",
        `output download: ${summary.download.mbPerS} MB/s for ${mb} MB, verified ${result.verified} (target >= ${TARGET_MB_PER_S} MB/s: ${summary.targetsMet.download ? "met" : "NOT met"})`,
        `forward RTT (64 B): p50 ${summary.forwardRttMs.p50} ms, p99 ${summary.forwardRttMs.p99} ms (target p50 <= ${TARGET_P50_RTT_MS} ms: ${summary.targetsMet.forwardP50 ? "met" : "NOT met"})`,
        "",
      ].join("\n"),
    );
    return summary;
  } finally {
    await client.close();
    await bundles.close();
    await market.stop();
    await rm(work, { recursive: true, force: true });
  }
}
