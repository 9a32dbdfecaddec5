/**
 * `npm run bench -- gateway [--json] [--requests N] [--concurrency C]`: HTTP requests through a
 * gateway node (docs/endpoints.md) against the same requests sent straight to the task's port, in
 * the same run. On a devnet with one provider process (tasks unsandboxed, so the bench can reach
 * the task's port on 127.0.0.1 directly) and a gateway node in this process, a task serves a small
 * HTTP answer (64 bytes) on a declared port; a public endpoint serves it at `/e/<id>/`. Each side
 * gets 100 warm-up requests, then N requests (default 2,000) from C concurrent callers (default 8)
 * over kept-alive connections: requests per second and p50/p99 of each request's time.
 * Targets (issue 37): through the gateway, at least 50 % of the direct requests per second, and a
 * p50 at most 2 ms above the direct p50, on 127.0.0.1.
 */
import { spawn } from "node:child_process";
import http from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { devnetAccount } from "../common/devnet.js";
import { nodeConfigSchema } from "../node/config/schema.js";
import { startDaemon } from "../node/daemon.js";
import { startBundleServer } from "../node/demo/bundles.js";
import { startDemoMarket } from "../node/demo/market.js";
import { startGateway } from "../node/gateway/start.js";
import { silentLogger } from "../node/log/logger.js";
import { createClient } from "../sdk/index.js";
import type { MainFigure } from "./_calibration.js";

const TARGET_THROUGHPUT_RATIO = 0.5;
const TARGET_P50_OVERHEAD_MS = 2;
const WARM_UP = 100;

const SERVER_JS = `
const http = require("node:http");
const body = Buffer.alloc(64, 120);
http.createServer((req, res) => res.end(body)).listen(Number(process.argv[2]), "127.0.0.1", () => console.log("serving"));
`;

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

/** One GET over `agent`; resolves with its time in ms once the body is read (a status other than 200 fails the bench). */
function get(agent: http.Agent, url: URL): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const request = http.get(url, { agent }, (response) => {
      response.resume();
      response.once("end", () => (response.statusCode === 200 ? resolve(performance.now() - started) : reject(new Error(`${url.href} answered ${response.statusCode}`))));
      response.once("error", reject);
    });
    request.once("error", reject);
  });
}

type Side = { requests: number; seconds: number; requestsPerSecond: number; p50Ms: number; p99Ms: number };

/**
 * The load generator, run in a process of its own: in this one it would share a thread with the
 * gateway node, the chain and the SDK client, and count its own HTTP work against the gateway.
 * `requests` GETs of the URL from `concurrency` callers over kept-alive connections after the
 * warm-up; bounded by the count; prints one JSON line.
 */
const LOAD_JS = `
const http = require("node:http");
const [url, requests, concurrency, warmUp] = [new URL(process.argv[1]), Number(process.argv[2]), Number(process.argv[3]), Number(process.argv[4])];
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
const get = () => new Promise((resolve, reject) => {
  const started = performance.now();
  const request = http.get(url, { agent }, (response) => {
    response.resume();
    response.once("end", () => (response.statusCode === 200 ? resolve(performance.now() - started) : reject(new Error(url.href + " answered " + response.statusCode))));
    response.once("error", reject);
  });
  request.once("error", reject);
});
(async () => {
  for (let i = 0; i < warmUp; i++) await get();
  const times = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => { while (next < requests) { next++; times.push(await get()); } }));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  console.log(JSON.stringify({ seconds, times: times.sort((a, b) => a - b) }));
})().catch((error) => { console.error(String(error)); process.exit(1); });
`;

/** `requests` GETs of `url` from `concurrency` callers in a child process (LOAD_JS), after the warm-up. */
async function load(url: URL, requests: number, concurrency: number): Promise<Side> {
  const child = spawn(process.execPath, ["-e", LOAD_JS, url.href, String(requests), String(concurrency), String(WARM_UP)], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", resolve);
  });
  if (code !== 0) throw new Error(`the load generator for ${url.href} exited ${code}: ${stderr.slice(0, 500)}`);
  const { seconds, times } = JSON.parse(stdout.trim().split("\n").at(-1)!) as { seconds: number; times: number[] };
  const round = (value: number) => Number(value.toFixed(3));
  return { requests, seconds: round(seconds), requestsPerSecond: Math.round(requests / seconds), p50Ms: round(percentile(times, 50)), p99Ms: round(percentile(times, 99)) };
}

/** The figures bench/run.ts divides by the same run's calibration figure (bench/_calibration.ts). */
export const mainFigures: MainFigure[] = [{ field: "gateway.requestsPerSecond", per: "keccakPerCpuSec" }];

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const requests = option(args, "--requests", 2000, 1_000_000);
  const concurrency = option(args, "--concurrency", 8, 256);
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const work = await mkdtemp(path.join(tmpdir(), "suanli-bench-gateway-"));
  const market = await startDemoMarket({
    providers: [{ name: "provider-1", account: 1, model: "A100-80GB", count: 1, region: "eu-west", usd: "1.80", runtime: { sandbox: "none" } }],
    attestors: [],
    logLevel: "warn",
  });
  const bundles = await startBundleServer();
  const renter = devnetAccount(4);
  await market.mint(renter.address, 10_000n);
  const config = nodeConfigSchema.parse({
    dataDir: path.join(work, "gateway-node"),
    log: { level: "warn" },
    chain: { rpcUrl: market.chain.rpcUrl, deploymentsDir: path.join(market.workDir, "deployments"), pollingIntervalMs: 100 },
    p2p: { listen: ["/ip4/127.0.0.1/tcp/0"], allowPrivateAddresses: true, dht: { enabled: false }, bootstrap: market.providerAddrs },
    gateway: { enabled: true, port: 0 },
  });
  const daemon = await startDaemon(config, { logger: silentLogger() });
  const client = await createClient({ rpcUrl: market.chain.rpcUrl, account: renter, bootstrap: market.providerAddrs, deployment: market.deployment });
  try {
    const gateway = await startGateway(daemon);
    daemon.attach(gateway);
    const deadline = Date.now() + 60_000;
    // The provider process is still starting (startDemoMarket does not wait for it): unreachable until it listens.
    const offers = () => client.queryOffers().catch((error: unknown) => (Date.now() > deadline ? Promise.reject(error) : []));
    while ((await offers()).length < 1) {
      if (Date.now() > deadline) throw new Error("the provider's offer did not arrive");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const port = await freePort();
    const bundle = await bundles.bundle({ "server.js": SERVER_JS });
    const { taskId } = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 600,
      maxPricePerGpuHour: "3",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: [process.execPath, "server.js", String(port)],
      ports: [port],
    });
    const direct = new URL(`http://127.0.0.1:${port}/`);
    const probe = new http.Agent();
    let up = false;
    for (let tries = 0; tries < 300 && !up; tries++) {
      up = await get(probe, direct).then(
        () => true,
        () => false,
      );
      if (!up) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    probe.destroy();
    if (!up) throw new Error(`the task ${taskId} did not start serving on ${direct.href}`);
    const endpoint = await client.createEndpoint({ gatewayUrl: gateway.url, taskId, port, public: true, ttlSeconds: 3600 });
    log(`task ${taskId} serving on ${direct.href}; endpoint ${endpoint.url}`);

    const straight = await load(direct, requests, concurrency);
    log(`direct:  ${straight.requestsPerSecond} requests/s, p50 ${straight.p50Ms} ms, p99 ${straight.p99Ms} ms`);
    const through = await load(new URL(endpoint.url), requests, concurrency);
    log(`gateway: ${through.requestsPerSecond} requests/s, p50 ${through.p50Ms} ms, p99 ${through.p99Ms} ms`);
    await client.cancel(taskId);

    const ratio = Number((through.requestsPerSecond / straight.requestsPerSecond).toFixed(3));
    const overhead = Number((through.p50Ms - straight.p50Ms).toFixed(3));
    const summary = {
      requests,
      concurrency,
      direct: straight,
      gateway: { ...through, streamsOpened: gateway.proxy.streamsOpened },
      throughputRatio: ratio,
      p50OverheadMs: overhead,
      targets: { throughputRatio: TARGET_THROUGHPUT_RATIO, p50OverheadMs: TARGET_P50_OVERHEAD_MS },
      targetsMet: { throughput: ratio >= TARGET_THROUGHPUT_RATIO, p50Overhead: overhead <= TARGET_P50_OVERHEAD_MS },
    };
    process.stdout.write(
      [
        "",
        `gateway vs direct, ${requests} requests at concurrency ${concurrency} over kept-alive connections (${gateway.proxy.streamsOpened} forward streams):`,
        `  direct:  ${straight.requestsPerSecond} requests/s, p50 ${straight.p50Ms} ms, p99 ${straight.p99Ms} ms`,
        `  gateway: ${through.requestsPerSecond} requests/s, p50 ${through.p50Ms} ms, p99 ${through.p99Ms} ms`,
        `  throughput ${Math.round(ratio * 100)} % of direct (target >= ${TARGET_THROUGHPUT_RATIO * 100} %: ${summary.targetsMet.throughput ? "met" : "NOT met"}); p50 overhead ${overhead} ms (target <= ${TARGET_P50_OVERHEAD_MS} ms: ${summary.targetsMet.p50Overhead ? "met" : "NOT met"})`,
        "",
      ].join("\n"),
    );
    return summary;
  } finally {
    await client.close();
    await daemon.stop();
    await bundles.close();
    await market.stop();
    await rm(work, { recursive: true, force: true });
  }
}
