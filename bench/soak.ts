/**
 * `npm run bench -- soak [--json] [--seconds N] [--providers P] [--attestors A] [--renters R] [--seed S] [--log-dir DIR]`:
 * the market under faults over time.
 *
 * A devnet (wall-clock blocks, a 3 s preemption notice, a fault quorum of 2), P provider nodes and
 * A attestor nodes as real child processes (their chain RPC behind the chaos proxy, fixed libp2p
 * ports so a restarted node is found where it was), and R renters, each an SDK client with its own
 * wallet and libp2p node (its RPC behind the proxy too). For N seconds (default 300) every renter
 * submits random tasks: short, long or failing, on demand or interruptible (a cheaper bid that an
 * on-demand task preempts), most with `autoMigrate`; it cancels some, extends some, and waits for
 * the rest through the SDK, which migrates a task whose lease was faulted or preempted. Meanwhile
 * faults are injected at random, every kind at least once first: the chain RPC away for a few
 * seconds (`rpcOutage`), slowed down (`rpcDelay`), connections reset in flight (`rpcReset`), a
 * provider node SIGKILLed, kept down past the attestors' QoS window (so its running leases are
 * faulted by the quorum) and restarted on its data dir (`providerKill`), an attestor SIGKILLed and
 * restarted (`attestorKill`). Three more renters run planned scenarios so that every run reaches a
 * preemption, a faulted lease and a migration (below, "Planned scenarios"). Then the renters cancel
 * what still runs, every lease is drained, and the chaos ledger checks the money. `--log-dir` keeps
 * every node's log (providers at info, attestors at debug).
 *
 * Summary (the last line with --json): leasesRun, tasksSubmitted, tasksCompleted, tasksFailed,
 * migrations (by cause), cancels, extends, preemptions, leasesFaulted, providerKills (each kill's
 * leases and how they ended), faultsInjected (by kind),
 * baseUnitsLost (must be 0), unitsDoubleLeased (0), leasesStuck (0), leasesOpenAfterDrain (0),
 * violations, and each node's heap and open handles at start and end with the stated bound
 * (`resourceBound`, checked in `nodeResourcesWithinBounds`). The CI test runs a 45-second version
 * with 4 renters (test/e2e/chaos-soak.test.ts) and asserts the zeros, the bound and that every
 * action and fault kind happened.
 */
import { createWriteStream, type WriteStream } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { peerIdFromPrivateKey } from "@libp2p/peer-id";
import type { Address } from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { leaseMarketAbi } from "../common/abi.js";
import { isTransientRpcError } from "../common/chain/tx.js";
import { devnetAccount, devnetPrivateKey } from "../common/devnet.js";
import { loadOrCreatePeerKey } from "../node/p2p/identity.js";
import { createClient, type SuanliClient } from "../sdk/index.js";
import { startBundleServer, type ServedBundle } from "../test/support/bundles.js";
import { checkLedger, RpcProxy, watchWallets, type LedgerReport } from "../test/support/chaos.js";
import { startCli, type RunningCli } from "../test/support/cli.js";
// A port picked below the ephemeral range; a node listens on it again after a restart.
import { freePort } from "../test/support/ports.js";
import { fund, fundedAccount, startDevnet, type Devnet } from "../test/support/devnet.js";
import { testProviderConfig } from "../test/support/provider.js";
import { ProviderProcess } from "../test/support/provider-process.js";

/** A string option's value (`--name VALUE`), or undefined when not given. */
function textOption(args: string[], name: string): string | undefined {
  const at = args.indexOf(`--${name}`);
  if (at < 0) return undefined;
  const value = args[at + 1];
  if (value === undefined || value.startsWith("--")) throw new Error(`--${name} needs a value`);
  return value;
}

function option(args: string[], name: string, fallback: number): number {
  const at = args.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const n = Number(args[at + 1]);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got ${args[at + 1]}`);
  return n;
}

/** A small seeded generator (mulberry32), so a run's choices can be replayed with --seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether an SDK error, or any error in its cause chain, is the chain's transport failing (what a retry may not meet). */
function isTransportError(error: unknown): boolean {
  for (let cause = error, depth = 0; cause !== undefined && depth < 8; cause = (cause as { cause?: unknown }).cause, depth++) {
    if (isTransientRpcError(cause)) return true;
  }
  return false;
}

/**
 * Waits for every start; when one fails, stops the ones that started (they are not in the run's
 * lists yet, so its cleanup would miss them) and throws the first failure.
 */
async function allStarted<T extends { node: ProviderProcess | RunningCli }>(starts: Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(starts);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (!failed) return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
  for (const s of settled) {
    if (s.status !== "fulfilled") continue;
    const node = s.value.node;
    if (node instanceof ProviderProcess) await node.kill("SIGKILL").catch(() => undefined);
    else await node.stop("SIGKILL").catch(() => undefined);
  }
  throw failed.reason;
}

type NodeStats = { heapUsedBytes: number | null; activeHandles: number | null };

async function nodeStats(metricsUrl: string | null): Promise<NodeStats> {
  let text = "";
  // A few tries: a node just restarted, or busy, may answer late.
  for (let attempt = 0; metricsUrl && text === "" && attempt < 3; attempt++) {
    if (attempt > 0) await sleep(1_000);
    text = await fetch(metricsUrl, { signal: AbortSignal.timeout(10_000) })
      .then((r) => r.text())
      .catch(() => "");
  }
  const metric = (name: string) => {
    const match = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text);
    return match?.[1] !== undefined ? Number(match[1]) : null;
  };
  return { heapUsedBytes: metric("suanli_nodejs_heap_size_used_bytes"), activeHandles: metric("suanli_nodejs_active_handles_total") };
}

/**
 * A node's figures at the end: the lowest of 3 samples 2 s apart. Used heap counts garbage not
 * collected yet (a node that just ran many tasks showed 237 MiB, over the bound, with no leak): a
 * leak stays in every sample, garbage leaves at the next collection.
 */
async function settledNodeStats(metricsUrl: string | null): Promise<NodeStats> {
  const samples: NodeStats[] = [];
  for (let i = 0; i < 3; i++) {
    if (i > 0) await sleep(2_000);
    samples.push(await nodeStats(metricsUrl));
  }
  const lowest = (values: (number | null)[]) => (values.some((value) => value === null) ? null : Math.min(...(values as number[])));
  return { heapUsedBytes: lowest(samples.map((sample) => sample.heapUsedBytes)), activeHandles: lowest(samples.map((sample) => sample.activeHandles)) };
}

/**
 * The stated bound on a node over the run: its used heap at most doubles plus 64 MiB, and it holds
 * at most 32 more handles (sockets, timers, files) at the end than at the start. A node restarted
 * during the run is compared from its first start: a restart must not leave it bigger either.
 */
export const RESOURCE_BOUND = { heapFactor: 2, heapSlackBytes: 64 * 1024 * 1024, handleSlack: 32 } as const;

function withinBound(start: NodeStats, end: NodeStats): boolean {
  if (start.heapUsedBytes === null || end.heapUsedBytes === null || start.activeHandles === null || end.activeHandles === null) return false;
  return (
    end.heapUsedBytes <= RESOURCE_BOUND.heapFactor * start.heapUsedBytes + RESOURCE_BOUND.heapSlackBytes && end.activeHandles <= start.activeHandles + RESOURCE_BOUND.handleSlack
  );
}

/** The attestors' QoS window, and the staking's fault window: a killed provider's leases are faulted within seconds. */
const QOS_WINDOW_SECONDS = 4;
/** Units of each provider's one machine: a dozen renters asking 1 or 2 each keep them contended (so on-demand tasks preempt interruptible ones) without queueing every submit. */
const UNITS_PER_MACHINE = 4;

/**
 * The first provider's machine is in its own region, which only the planned preemption asks for
 * (the random tasks ask for RANDOM_REGION): its units are free when that scenario starts.
 */
const PLANNED_REGION = "eu-central";
const RANDOM_REGION = "eu-west";

/** The fault kinds the soak injects. */
export const FAULT_KINDS = ["rpcOutage", "rpcDelay", "rpcReset", "providerKill", "attestorKill"] as const;
type FaultKind = (typeof FAULT_KINDS)[number];

type ProviderSlot = { configFile: string; node: ProviderProcess; machineId: number; address: Address; down: boolean };
type AttestorSlot = { configFile: string; node: RunningCli; metricsUrl: string | null; down: boolean };
type Renter = { account: PrivateKeyAccount; client: SuanliClient; current: string | undefined };

/** How a soak task is built: what it runs, for how long, on demand or interruptible. */
type TaskKind = "short" | "long" | "failing" | "interruptible" | "held";

/** Each renter's first task, by renter index: its kind and its action (below 0.15 cancel, below 0.35 extend, else wait). */
const FIRST_TASKS: { kind: TaskKind; action: number }[] = [
  { kind: "failing", action: 0.9 },
  { kind: "long", action: 0.25 },
  { kind: "long", action: 0.05 },
  { kind: "interruptible", action: 0.9 },
];

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const seconds = option(args, "seconds", 300);
  const providerCount = option(args, "providers", 3);
  const attestorCount = option(args, "attestors", 3);
  const renterCount = option(args, "renters", 24);
  const seed = option(args, "seed", 20);
  // Diagnostics: every node's log (info for providers, debug for attestors: each probe) in this folder.
  const logDir = textOption(args, "log-dir");
  if (logDir) await mkdir(logDir, { recursive: true });
  const rand = random(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;
  if (providerCount < 2) throw new Error("--providers must be at least 2: the first one serves the planned preemption, the others the random tasks");
  if (attestorCount < 2) throw new Error("--attestors must be at least 2: the soak's fault quorum is 2 and one attestor is killed at times");

  const log = (line: string) => process.stderr.write(`soak: ${line}\n`);
  const attestorIndexes = Array.from({ length: attestorCount }, (_, i) => 10 + i);
  const devnet: Devnet = await startDevnet({
    wallClockBlocks: true,
    // The staking's fault window as short as the attestors' QoS window: an attestor signs a liveness
    // fault only once the larger of the two has passed after observedAt (the devnet's default is 30 s,
    // longer than a killed provider's leases last here).
    params: { preemptionNotice: 3, faultQuorum: 2, attestorFaultWindow: QOS_WINDOW_SECONDS },
    attestors: attestorIndexes.map((i) => devnetAccount(i).address),
  });
  const bundles = await startBundleServer();
  const proxy = await RpcProxy.start(devnet.rpcUrl, { maxConnections: 1024 });
  const dir = await mkdtemp(path.join(tmpdir(), "suanli-soak-"));
  const providers: ProviderSlot[] = [];
  const attestors: AttestorSlot[] = [];
  const renters: Renter[] = [];
  const counts = {
    tasksSubmitted: 0,
    submitRefused: 0,
    tasksCompleted: 0,
    tasksFailed: 0,
    tasksPreempted: 0,
    tasksOtherEnd: 0,
    cancels: 0,
    extends: 0,
    sdkErrors: 0,
    orphanLeasesClosed: 0,
    restartRetries: 0,
    leasesActiveOnKilledProviders: 0,
  };
  const faults: Record<FaultKind, number> = { rpcOutage: 0, rpcDelay: 0, rpcReset: 0, providerKill: 0, attestorKill: 0 };
  /** SDK and restart errors by step and error name, with the first message of each (what the faults cost the renters). */
  const errors: Record<string, { count: number; first: string }> = {};
  const noteError = (step: string, error: unknown) => {
    const key = `${step}/${error instanceof Error ? error.name : "unknown"}`;
    const text = (e: unknown) => (e instanceof Error ? (e.message.split("\n")[0] ?? "").slice(0, 300) : String(e));
    const cause = error instanceof Error && error.cause !== undefined ? ` (cause: ${text(error.cause)})` : "";
    const entry = (errors[key] ??= { count: 0, first: `${text(error)}${cause}` });
    entry.count++;
  };
  const quiet = { level: "warn", format: "json" } as const;
  const providerLog = logDir ? ({ level: "info", format: "json" } as const) : quiet;
  const attestorLog = logDir ? ({ level: "debug", format: "json" } as const) : quiet;
  /** A node's log file in --log-dir, appended to in order (one stream per node, across its restarts). */
  const logFiles = new Map<string, WriteStream>();
  const logFile = (name: string): WriteStream => {
    let stream = logFiles.get(name);
    if (!stream) logFiles.set(name, (stream = createWriteStream(path.join(logDir ?? dir, `${name}.log`), { flags: "a" })));
    return stream;
  };
  const providerLines = (i: number) => (logDir ? { onLine: (line: string) => void logFile(`provider-${i}`).write(`${line}\n`) } : {});
  /** An attestor process's whole log, written to its file when it is killed or at the end. */
  const keepAttestorLog = (i: number, node: RunningCli) => {
    if (logDir) logFile(`attestor-${i}`).write(`${node.stderr()}{"soak":"attestor process ended","at":${Date.now()}}\n`);
  };
  /** Each provider kill: when, which leases it held Active, and (at the end) how each of them ended. */
  const kills: { provider: number; killedAt: number; restartedAt: number | null; leases: { leaseId: bigint; end: number }[] }[] = [];
  try {
    // Providers and attestors start side by side on fixed ports (a restarted node listens where
    // its peers and offers say it is); a provider restarted later bootstraps from all the others.
    const providerPorts = await Promise.all(Array.from({ length: providerCount }, freePort));
    const providerConfig = (i: number, bootstrap: string[]) =>
      testProviderConfig(1 + i, {
        dataDir: path.join(dir, `provider-data-${i}`),
        log: providerLog,
        chain: { rpcUrl: proxy.url, deploymentsDir: devnet.deploymentsDir, pollingIntervalMs: 250 },
        p2p: {
          listen: [`/ip4/127.0.0.1/tcp/${providerPorts[i]}`],
          bootstrap,
          allowPrivateAddresses: true,
          dht: { enabled: false },
          gossip: { ipColocationWhitelist: ["127.0.0.1"] },
          connections: { inboundPerSecondPerHost: 1000 },
        },
        metrics: { enabled: true, port: 0 },
        provider: {
          inventory: { source: "declared", declared: [{ model: "A100-80GB", count: UNITS_PER_MACHINE, region: i === 0 ? PLANNED_REGION : RANDOM_REGION }] },
          minBids: { "A100-80GB": { pricePerUnitSecond: "50" } },
          // The PLANNED_REGION machine is dearer, so a renter that asks for any region ranks the random providers' free units first.
          ...(i === 0 ? { prices: { "A100-80GB": { pricePerUnitSecond: "150" } } } : {}),
          // A renter whose open failed under a fault must not keep the units from the others for two minutes.
          reserve: { holdSeconds: 10 },
          terms: { startWindowSeconds: 30, minDurationSeconds: 1 },
        },
      });
    for (let i = 0; i < providerCount; i++) await fund(devnet, await devnet.wallet(1 + i), 2_000_000_000n);
    providers.push(
      ...(await allStarted(
        Array.from({ length: providerCount }, async (_, i): Promise<ProviderSlot> => {
          const configFile = path.join(dir, `provider-${i}.json`);
          await writeFile(configFile, JSON.stringify(providerConfig(i, []), null, 2));
          const node = await ProviderProcess.start(configFile, providerLines(i));
          const machine = node.ready.machines[0];
          if (!machine) throw new Error(`provider ${i} started without a machine`);
          return { configFile, node, machineId: machine.machineId, address: node.ready.address, down: false };
        }),
      )),
    );
    const providerAddrs = providers.map((p) => p.node.peer.addr);
    log(`${providerCount} providers up`);
    for (let i = 0; i < providerCount; i++) {
      await writeFile(
        providers[i]!.configFile,
        JSON.stringify(
          providerConfig(
            i,
            providerAddrs.filter((_, j) => j !== i),
          ),
          null,
          2,
        ),
      );
    }

    // Attestors: liveness probes every second, a provider silent for 4 s is faulted by the quorum.
    // Their identities and ports are fixed up front so each lists the others in
    // `attest.attestor.peers`: they bootstrap only from the providers, with the DHT off, so without
    // the list no attestor ever meets another, and each proposes its faults alone and never
    // reaches the quorum (what left the soak's first kills unfaulted; docs/provider.md, Faults).
    const attestorSpecs: { dir: string; port: number; addr: string }[] = [];
    for (let i = 0; i < attestorCount; i++) {
      const dataDir = path.join(dir, `attestor-data-${i}`);
      const { key } = await loadOrCreatePeerKey(path.join(dataDir, "peer.key"));
      const port = await freePort();
      attestorSpecs.push({ dir: dataDir, port, addr: `/ip4/127.0.0.1/tcp/${port}/p2p/${peerIdFromPrivateKey(key).toString()}` });
    }
    attestors.push(
      ...(await allStarted(
        attestorIndexes.map(async (accountIndex, i): Promise<AttestorSlot> => {
          const configFile = path.join(dir, `attestor-${i}.json`);
          await writeFile(
            configFile,
            JSON.stringify({
              dataDir: attestorSpecs[i]!.dir,
              log: attestorLog,
              chain: { rpcUrl: proxy.url, deploymentsDir: devnet.deploymentsDir, privateKey: devnetPrivateKey(accountIndex), pollingIntervalMs: 250 },
              p2p: {
                listen: [`/ip4/127.0.0.1/tcp/${attestorSpecs[i]!.port}`],
                bootstrap: providerAddrs,
                allowPrivateAddresses: true,
                dht: { enabled: false },
                gossip: { ipColocationWhitelist: ["127.0.0.1"] },
                connections: { inboundPerSecondPerHost: 1000 },
              },
              metrics: { enabled: true, port: 0 },
              attest: {
                challenge: { preset: "cpu-devnet" },
                runner: { kind: "cpu", workers: 1 },
                attestor: { maxConcurrentChallenges: 1, peers: attestorSpecs.filter((_, j) => j !== i).map((spec) => spec.addr) },
                liveness: { probeIntervalMs: 1_000, probeTimeoutMs: 1_500, qosWindowSeconds: QOS_WINDOW_SECONDS, minFailedProbes: 2, backupSubmitDelayMs: 4_000 },
              },
            }),
          );
          const node = startCli(["attestor", "start", "--config", configFile, "--json"], { timeoutMs: 90_000 });
          const ready = (await node.ready) as { metricsUrl: string | null };
          return { configFile, node, metricsUrl: ready.metricsUrl, down: false };
        }),
      )),
    );

    log(`${attestorCount} attestors up`);
    // Renters: fresh wallets, one SDK client each, over the proxy.
    const accounts: PrivateKeyAccount[] = [];
    // The random renters, then the planned scenarios' three (preemptee, migrant, preemptor).
    for (let i = 0; i < renterCount + 3; i++) accounts.push(await fundedAccount(devnet, 1_000_000_000n));
    for (const account of accounts) {
      renters.push({ account, client: await createClient({ rpcUrl: proxy.url, account, bootstrap: providerAddrs, deployment: devnet.deploymentsDir }), current: undefined });
    }
    const plannedRenters = renters.slice(renterCount);
    log(`${renterCount} renters up (and ${plannedRenters.length} planned)`);
    const offersDeadline = Date.now() + 60_000;
    for (const renter of renters) {
      while ((await renter.client.queryOffers()).length < providerCount) {
        if (Date.now() > offersDeadline) throw new Error("the renters did not see every provider's offer within 60 s");
        await sleep(250);
      }
    }
    const wallets = await watchWallets(devnet, [
      ...renters.map((r) => ({ address: r.account.address, role: "renter" as const })),
      ...providers.map((p) => ({ address: p.address, role: "provider" as const })),
    ]);
    const statsAtStart = await Promise.all([...providers.map((p) => nodeStats(p.node.ready.metricsUrl)), ...attestors.map((a) => nodeStats(a.metricsUrl))]);
    const tasks: Record<TaskKind, ServedBundle> = {
      short: await bundles.bundle({ "run.sh": "echo ok\n" }),
      long: await bundles.bundle({ "run.sh": "sleep 6\necho ok\n" }),
      failing: await bundles.bundle({ "run.sh": "echo bad >&2\nexit 3\n" }),
      interruptible: await bundles.bundle({ "run.sh": "sleep 8\necho ok\n" }),
      held: await bundles.bundle({ "run.sh": "sleep 40\necho ok\n" }),
    };
    log(`${providerCount} providers, ${attestorCount} attestors, ${renterCount} renters ready; running ${seconds} s`);
    const started = Date.now();
    const deadline = started + seconds * 1000;

    // Follow a task to its end; an SDK error (the chain or the provider away) is retried while there is time.
    const follow = async (renter: Renter, taskId: string) => {
      while (renter.current !== undefined) {
        try {
          const receipt = await renter.client.wait(taskId, { pollIntervalMs: 1_000, timeoutMs: Math.max(1_000, deadline - Date.now()) });
          if (receipt.state === "succeeded") counts.tasksCompleted++;
          else if (receipt.state === "preempted") counts.tasksPreempted++;
          else if (receipt.state === "failed") counts.tasksFailed++;
          else counts.tasksOtherEnd++;
          renter.current = undefined;
        } catch (error) {
          counts.sdkErrors++;
          noteError("wait", error);
          if (Date.now() > deadline - 3_000) {
            // Out of time with the lease not settled (the provider's completion delayed by the RPC faults): a task
            // whose state is final still ended so, and is counted by it; the drain below closes its lease.
            const state = await renter.client
              .status(taskId)
              .then((status) => status.state)
              .catch(() => undefined);
            if (state === "failed") counts.tasksFailed++;
            else if (state === "succeeded") counts.tasksCompleted++;
            break;
          }
          await sleep(1_000);
        }
      }
    };

    // A renter: submit, then cancel, extend or just wait (the SDK migrates a faulted or preempted
    // autoMigrate task), until the deadline. Every SDK error is counted and the task followed again.
    const renterLoop = async (renter: Renter) => {
      // The planned renters go first (their leases open before the random ones contend for units), for up to 8 s.
      await Promise.race([plannedSubmitted, sleep(8_000)]);
      await sleep(rand() * 2_000);
      // The first task of each renter is scripted (so a short run still fails one, extends one, cancels one and runs interruptible work); then at random.
      let scripted: { kind: TaskKind; action: number } | undefined = FIRST_TASKS[renters.indexOf(renter) % FIRST_TASKS.length];
      while (Date.now() < deadline - 3_000) {
        const kind = scripted?.kind ?? pick(["short", "long", "long", "failing", "interruptible", "interruptible"] as const);
        const bundle = tasks[kind];
        const interruptible = kind === "interruptible";
        let taskId: string;
        try {
          const submitted = await renter.client.submitTask({
            gpuType: "A100",
            gpuCount: rand() < 0.75 ? 1 : 2,
            duration: kind === "short" ? 10 + Math.floor(rand() * 10) : 20 + Math.floor(rand() * 15),
            ...(interruptible ? { interruptible: true, bidPerGpuHour: "0.2" } : { maxPricePerGpuHour: "1" }),
            region: RANDOM_REGION,
            attestedOnly: false,
            bundleUrl: bundle.url,
            sha256: bundle.sha256,
            command: "sh run.sh",
            autoMigrate: rand() < 0.85,
          });
          taskId = submitted.taskId;
          renter.current = taskId;
          counts.tasksSubmitted++;
        } catch (error) {
          // Nothing free (every unit leased on demand), a refusal, or the chain away: try again soon.
          counts.submitRefused++;
          noteError("submit", error);
          await sleep(500 + rand() * 1_000);
          continue;
        }
        const action = scripted?.action ?? rand();
        try {
          if (action < 0.15) {
            await sleep(500 + rand() * 2_000);
            await renter.client.cancel(taskId);
            counts.cancels++;
            renter.current = undefined;
            scripted = undefined;
            continue;
          }
          if (action < 0.35) {
            // Extend once the lease is active (an Open lease cannot be extended), within a few seconds. A renter retries
            // what the chain's outage refused (the RPC faults above cut it for seconds at a time), the status reads
            // included: up to 6 tries, 1.5 s apart, on a transport error only.
            const seconds = 5 + Math.floor(rand() * 6);
            for (let attempt = 1; ; attempt++) {
              try {
                for (let i = 0; i < 20 && (await renter.client.status(taskId)).lease.status === "Open"; i++) await sleep(500);
                await renter.client.extend(taskId, { seconds });
                break;
              } catch (error) {
                if (attempt >= 6 || !isTransportError(error)) throw error;
                noteError("extend-retried", error);
                await sleep(1_500);
              }
            }
            counts.extends++;
          }
          // A scripted action that failed is tried again on the renter's next task, so a short run still has each.
          scripted = undefined;
        } catch (error) {
          counts.sdkErrors++;
          noteError(action < 0.15 ? "cancel" : "extend", error);
        }
        await follow(renter, taskId);
      }
    };

    // Planned scenarios, on their own renters beside the random ones, so that a short run reaches
    // a preemption, a faulted lease and a migration every time (the random mix reaches them only
    // now and then). At once: the migrant leases one unit on demand in any region (the random
    // providers rank first: the PLANNED_REGION machine is dearer) with autoMigrate, and its
    // provider is the first kill's victim: down past the QoS window, the lease is faulted by the
    // attestors' quorum and the SDK moves the task (to a free random unit or the PLANNED_REGION
    // machine). Beside it the preemptee leases three of the PLANNED_REGION machine's four units
    // interruptibly; once that lease is Active the preemptor asks for two units there on demand,
    // which only preempting it can give.
    const plannedSubmit = async (
      role: string,
      renter: Renter,
      task: { gpuCount: number; duration: number; bundle: ServedBundle; region?: string; interruptible: boolean; autoMigrate: boolean },
    ) => {
      // Until a few seconds before the end: a lease opened by then still counts (a preemption happens when the preemptor's lease opens).
      while (Date.now() < deadline - 6_000) {
        try {
          const { taskId } = await renter.client.submitTask({
            gpuType: "A100",
            gpuCount: task.gpuCount,
            duration: task.duration,
            ...(task.interruptible ? { interruptible: true, bidPerGpuHour: "0.2" } : { maxPricePerGpuHour: "1" }),
            ...(task.region ? { region: task.region } : {}),
            attestedOnly: false,
            bundleUrl: task.bundle.url,
            sha256: task.bundle.sha256,
            command: "sh run.sh",
            autoMigrate: task.autoMigrate,
          });
          renter.current = taskId;
          counts.tasksSubmitted++;
          return taskId;
        } catch (error) {
          counts.submitRefused++;
          noteError(`planned ${role} submit`, error);
          await sleep(1_000);
        }
      }
      return undefined;
    };
    /** The task's provider once its lease is Active; undefined if the lease ended first or time ran out. */
    const untilActive = async (renter: Renter, taskId: string): Promise<Address | undefined> => {
      while (Date.now() < deadline - 8_000) {
        try {
          const status = await renter.client.status(taskId);
          if (status.lease.status === "Active") return status.provider;
          if (status.lease.status !== "Open" && status.lease.status !== "None") return undefined;
        } catch (error) {
          noteError("status", error);
        }
        await sleep(500);
      }
      return undefined;
    };
    /** The provider the first kill is aimed at: the migrant's, once its lease is Active. */
    const planned: { killTarget: Address | undefined; done: boolean } = { killTarget: undefined, done: false };
    let markSubmitted = () => {};
    /** Resolves once the migrant's and the preemptee's tasks were submitted (or gave up). */
    const plannedSubmitted = new Promise<void>((resolve) => (markSubmitted = resolve));
    const plannedLoop = async () => {
      const [preemptee, migrant, preemptor] = plannedRenters;
      if (!preemptee || !migrant || !preemptor) return;
      const following: Promise<void>[] = [];
      let submitted = 0;
      const oneSubmitted = () => {
        if (++submitted === 2) markSubmitted();
      };
      const migration = (async () => {
        const moved = await plannedSubmit("migrant", migrant, { gpuCount: 1, duration: 45, bundle: tasks.held, interruptible: false, autoMigrate: true });
        oneSubmitted();
        if (moved === undefined) return;
        planned.killTarget = await untilActive(migrant, moved);
        log(`planned: the migrant's lease runs on ${planned.killTarget ?? "no provider"}`);
        following.push(follow(migrant, moved));
      })();
      const preemption = (async () => {
        const held = await plannedSubmit("preemptee", preemptee, {
          gpuCount: UNITS_PER_MACHINE - 1,
          duration: 45,
          bundle: tasks.held,
          region: PLANNED_REGION,
          interruptible: true,
          autoMigrate: false,
        });
        oneSubmitted();
        if (held === undefined) return;
        following.push(follow(preemptee, held));
        if ((await untilActive(preemptee, held)) === undefined) {
          log("planned: the preemptee's lease never became Active");
          return;
        }
        const preempting = await plannedSubmit("preemptor", preemptor, {
          gpuCount: 2,
          duration: 15,
          bundle: tasks.long,
          region: PLANNED_REGION,
          interruptible: false,
          autoMigrate: false,
        });
        log(`planned: the preemptor ${preempting === undefined ? "found no lease" : "leased"}`);
        if (preempting !== undefined) following.push(follow(preemptor, preempting));
      })();
      try {
        await Promise.all([migration, preemption]);
      } finally {
        markSubmitted();
        planned.done = true;
        await Promise.all(following);
      }
    };

    // Faults: every kind once first (in random order), then at random, one every 1 to 4 s.
    const firstRound = [...FAULT_KINDS].sort(() => rand() - 0.5);
    const activeLeasesOn = async (slot: ProviderSlot) => {
      const report = await checkLedger(devnet, { wallets: [], capacity: new Map() });
      return report.leases.filter((l) => l.status === "Active" && l.provider.toLowerCase() === slot.address.toLowerCase());
    };
    // A node refuses to start while it cannot reach the chain (an RPC fault, or a chain slow under
    // load): restart it as a supervisor would (systemd's Restart=on-failure), a few times.
    const restarted = async <T>(start: () => Promise<T>): Promise<T> => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await start();
        } catch (error) {
          noteError("restart", error);
          if (attempt >= 5) throw error;
          counts.restartRetries++;
          await sleep(2_000);
        }
      }
    };
    // A killed node comes back in the background (its restart takes seconds, more under load):
    // the faults go on meanwhile. At most one provider and one attestor are down at a time (two
    // attestors of three still make the quorum).
    const recoveries: Promise<void>[] = [];
    // A restart that failed every attempt is caught at once and reported when the faults are over:
    // left pending until then, its rejection was unhandled and ended the whole process mid-run.
    const failedRecoveries: string[] = [];
    const recover = (what: string, work: () => Promise<void>) =>
      recoveries.push(
        work().catch((error: unknown) => {
          failedRecoveries.push(`${what}: ${error instanceof Error ? error.message : String(error)}`);
          log(`${what} did not come back after 5 attempts`);
        }),
      );
    const faultLoop = async () => {
      while (Date.now() < deadline - 12_000) {
        await sleep(1_000 + rand() * 2_000);
        let fault = firstRound[0] ?? pick(FAULT_KINDS);
        if (fault === "providerKill" && providers.some((p) => p.down)) fault = "rpcReset";
        if (fault === "attestorKill" && attestors.some((a) => a.down)) fault = "rpcReset";
        // The first kill is aimed at the planned migrant's provider: it waits (a while) for that lease
        // to be Active, so the quorum has a lease to fault and the SDK a task to migrate.
        const firstKill = fault === "providerKill" && firstRound[0] === "providerKill";
        if (firstKill && planned.killTarget === undefined && !planned.done && Date.now() < deadline - 25_000) {
          fault = "rpcReset";
          firstRound.push(firstRound.shift()!);
        }
        if (fault === firstRound[0]) firstRound.shift();
        faults[fault]++;
        if (fault === "rpcOutage") {
          proxy.down();
          await sleep(2_000 + rand() * 2_000);
          proxy.up();
        } else if (fault === "rpcDelay") {
          proxy.set({ kind: "delay", ms: 200 + Math.floor(rand() * 600) });
          await sleep(3_000);
          proxy.up();
        } else if (fault === "rpcReset") {
          proxy.cut();
        } else if (fault === "providerKill") {
          // The provider with the most running leases, kept down past the QoS window (its leases
          // are faulted by the quorum), then restarted on its data dir.
          const running = await Promise.all(providers.map(activeLeasesOn));
          const load = running.map((leases) => leases.length);
          const target = firstKill ? providers.findIndex((p) => p.address.toLowerCase() === planned.killTarget?.toLowerCase()) : -1;
          const victimIndex = target >= 0 ? target : Math.max(0, load.indexOf(Math.max(...load)));
          const victim = providers[victimIndex]!;
          victim.down = true;
          await victim.node.kill("SIGKILL");
          counts.leasesActiveOnKilledProviders += load[victimIndex] ?? 0;
          const kill = {
            provider: victimIndex,
            killedAt: Math.floor(Date.now() / 1000),
            restartedAt: null as number | null,
            leases: (running[victimIndex] ?? []).map((l) => ({ leaseId: l.leaseId, end: l.end })),
          };
          kills.push(kill);
          log(`killed provider-${victimIndex} holding leases ${kill.leases.map((l) => `${l.leaseId} (ends in ${l.end - kill.killedAt} s)`).join(", ") || "none"}`);
          const downFor = 10_000 + rand() * 4_000;
          recover(`provider-${victimIndex}`, async () => {
            await sleep(downFor);
            victim.node = await restarted(() => ProviderProcess.start(victim.configFile, providerLines(victimIndex)));
            kill.restartedAt = Math.floor(Date.now() / 1000);
            victim.down = false;
          });
        } else {
          const victim = pick(attestors);
          victim.down = true;
          await victim.node.stop("SIGKILL");
          keepAttestorLog(attestors.indexOf(victim), victim.node);
          const downFor = 1_000 + rand() * 3_000;
          recover(`attestor-${attestors.indexOf(victim)}`, async () => {
            await sleep(downFor);
            const { node, metricsUrl } = await restarted(async () => {
              const started = startCli(["attestor", "start", "--config", victim.configFile, "--json"], { timeoutMs: 90_000 });
              return { node: started, metricsUrl: ((await started.ready) as { metricsUrl: string | null }).metricsUrl };
            });
            victim.node = node;
            victim.metricsUrl = metricsUrl;
            victim.down = false;
          });
        }
      }
      await Promise.all(recoveries);
      if (failedRecoveries.length) throw new Error(`A killed node did not come back (5 attempts each): ${failedRecoveries.join("; ")}`);
    };
    await Promise.all([...renters.filter((r) => !plannedRenters.includes(r)).map(renterLoop), plannedLoop(), faultLoop()]);
    proxy.up();
    const ranFor = (Date.now() - started) / 1000;
    log(`ran ${ranFor.toFixed(0)} s; draining`);

    // Drain: each renter cancels the task it still follows (the SDK refunds the unused deposit).
    await Promise.all(
      renters.map(async (renter) => {
        for (let attempt = 0; renter.current !== undefined && attempt < 5; attempt++) {
          try {
            const receipt = await renter.client.cancel(renter.current);
            if (receipt.state === "succeeded") counts.tasksCompleted++;
            counts.cancels++;
            renter.current = undefined;
          } catch {
            await sleep(1_000);
          }
        }
      }),
    );
    // Then every lease ends by the rules: completed, closed, preempted, faulted, or past its end
    // (the nodes claim it); a lease a renter opened but the SDK lost (an RPC fault between open
    // and hand-over) is closed by its renter as the SDK's own recovery would.
    const capacity = new Map(providers.map((p) => [p.machineId, UNITS_PER_MACHINE]));
    const drainDeadline = Date.now() + 60_000;
    let report: LedgerReport = await checkLedger(devnet, { wallets, capacity });
    const open = (r: LedgerReport) => r.leases.filter((l) => l.status === "Open" || l.status === "Active");
    let closedOrphans = false;
    while (open(report).length > 0 && Date.now() < drainDeadline) {
      if (!closedOrphans && Date.now() > drainDeadline - 45_000) {
        closedOrphans = true;
        for (const lease of open(report)) {
          const renter = renters.find((r) => r.account.address.toLowerCase() === lease.renter.toLowerCase());
          if (!renter) continue;
          const clients = await devnet.wallet(renter.account);
          const ok = await clients.walletClient
            .writeContract({
              address: devnet.deployment.contracts.market!,
              abi: leaseMarketAbi,
              functionName: "close",
              args: [lease.leaseId],
              account: renter.account,
              chain: clients.walletClient.chain,
            })
            .then((hash) => clients.publicClient.waitForTransactionReceipt({ hash }))
            .then((receipt) => receipt.status === "success")
            .catch(() => false);
          if (ok) counts.orphanLeasesClosed++;
        }
      }
      await sleep(1_000);
      report = await checkLedger(devnet, { wallets, capacity });
    }
    report = await checkLedger(devnet, { wallets, capacity });
    const stillOpen = open(report).map((l) => l.leaseId);
    const statsAtEnd = await Promise.all([...providers.map((p) => settledNodeStats(p.node.ready.metricsUrl)), ...attestors.map((a) => settledNodeStats(a.metricsUrl))]);
    const nodeNames = [...providers.map((_, i) => `provider-${i}`), ...attestors.map((_, i) => `attestor-${i}`)];
    const nodes = nodeNames.map((name, i) => ({ name, start: statsAtStart[i]!, end: statsAtEnd[i]!, withinBound: withinBound(statsAtStart[i]!, statsAtEnd[i]!) }));

    // Migrations, from the SDK's own task records (a lease replaced after it faulted or was preempted).
    const migrations: Record<string, number> = {};
    for (const renter of renters) {
      for (const task of await renter.client.tasks()) {
        for (const attempt of task.attempts) if (attempt.migratedBecause) migrations[attempt.migratedBecause] = (migrations[attempt.migratedBecause] ?? 0) + 1;
      }
    }
    const byOutcome: Record<string, number> = {};
    for (const lease of report.leases) byOutcome[`${lease.status}/${lease.endReason}`] = (byOutcome[`${lease.status}/${lease.endReason}`] ?? 0) + 1;
    const summary = {
      seconds,
      ranForSeconds: Math.round(ranFor),
      providers: providerCount,
      attestors: attestorCount,
      renters: renterCount,
      plannedRenters: plannedRenters.length,
      seed,
      leasesRun: report.leases.length,
      ...counts,
      migrations: Object.values(migrations).reduce((a, b) => a + b, 0),
      migrationsByCause: migrations,
      preemptions: report.leases.filter((l) => l.endReason === "Preempted").length,
      leasesFaulted: report.leases.filter((l) => l.endReason === "Faulted").length,
      // Each provider kill: the leases it held Active, when each would have ended, and how it did end (times in s from the kill).
      providerKills: kills.map((k) => ({
        provider: k.provider,
        downSeconds: k.restartedAt === null ? null : k.restartedAt - k.killedAt,
        leases: k.leases.map((held) => {
          const now = report.leases.find((l) => l.leaseId === held.leaseId);
          return {
            leaseId: held.leaseId,
            endsAfterKill: held.end - k.killedAt,
            outcome: now ? `${now.status}/${now.endReason}` : "unknown",
            stoppedAfterKill: now && now.stopAt > 0 ? now.stopAt - k.killedAt : null,
          };
        }),
      })),
      faultsInjected: Object.values(faults).reduce((a, b) => a + b, 0),
      faults,
      leasesByOutcome: byOutcome,
      errors,
      baseUnitsLost: report.marketDrift < 0n ? -report.marketDrift : report.marketDrift,
      unitsDoubleLeased: report.doubleLeased.length,
      leasesStuck: report.stuck.length,
      leasesOpenAfterDrain: stillOpen.length,
      violations: report.violations,
      resourceBound: `heap end <= ${RESOURCE_BOUND.heapFactor} x start + ${RESOURCE_BOUND.heapSlackBytes / 1024 / 1024} MiB; handles end <= start + ${RESOURCE_BOUND.handleSlack}`,
      nodeResourcesWithinBounds: nodes.every((n) => n.withinBound),
      nodes,
    };
    const mib = (bytes: number | null) => (bytes === null ? "?" : `${(bytes / 1024 / 1024).toFixed(1)} MiB`);
    console.log(`soak: ${seconds} s, ${providerCount} providers, ${attestorCount} attestors, ${renterCount} renters, seed ${seed}`);
    console.log(
      `  leases run ${summary.leasesRun}, tasks submitted ${counts.tasksSubmitted}, completed ${counts.tasksCompleted}, failed ${counts.tasksFailed}, preempted ${counts.tasksPreempted}`,
    );
    console.log(
      `  migrations ${summary.migrations} ${JSON.stringify(migrations)}, cancels ${counts.cancels}, extends ${counts.extends}, preemptions ${summary.preemptions}, leases faulted ${summary.leasesFaulted}`,
    );
    console.log(`  faults injected ${summary.faultsInjected} ${JSON.stringify(faults)}`);
    for (const k of summary.providerKills)
      console.log(
        `  provider-${k.provider} killed for ${k.downSeconds ?? "?"} s holding ${k.leases.map((l) => `lease ${l.leaseId} (end +${l.endsAfterKill} s): ${l.outcome}${l.stoppedAfterKill === null ? "" : ` at +${l.stoppedAfterKill} s`}`).join("; ") || "no Active lease"}`,
      );
    console.log(
      `  base units lost ${summary.baseUnitsLost}, units double-leased ${summary.unitsDoubleLeased}, leases stuck ${summary.leasesStuck}, open after drain ${summary.leasesOpenAfterDrain}`,
    );
    for (const n of nodes)
      console.log(
        `  ${n.name}: heap ${mib(n.start.heapUsedBytes)} -> ${mib(n.end.heapUsedBytes)}, handles ${n.start.activeHandles} -> ${n.end.activeHandles}${n.withinBound ? "" : "  OVER THE BOUND"}`,
      );
    console.log(`  bound: ${summary.resourceBound}`);
    for (const [key, e] of Object.entries(errors)) console.log(`  error ${key} x${e.count}: ${e.first}`);
    for (const v of report.violations) console.log(`  VIOLATION ${v}`);
    return summary;
  } finally {
    for (const r of renters) await r.client.close().catch(() => undefined);
    for (const p of providers) if (p.node.child.exitCode === null && p.node.child.signalCode === null) await p.node.kill("SIGTERM").catch(() => undefined);
    for (const [i, a] of attestors.entries()) {
      await a.node.stop("SIGTERM").catch(() => undefined);
      keepAttestorLog(i, a.node);
    }
    await Promise.all([...logFiles.values()].map((stream) => new Promise((resolve) => stream.end(resolve))));
    await proxy.close();
    await bundles.close();
    await devnet.close();
    await rm(dir, { recursive: true, force: true });
  }
}
