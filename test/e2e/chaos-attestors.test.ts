/**
 * Chaos: faults of the attestors, on a devnet with three attestors (quorum two) and real provider
 * nodes in their own processes. Attestor 6 runs in its own process (it is SIGKILLed and restarted
 * on its data dir); attestors 7 and 8 run in this process, so a test can stop them and cut them off
 * from one provider with their own connection gater. Short QoS windows and `cpu-devnet`
 * challenges. Every case ends with the money check (chaos.ts `checkLedger`).
 */
import assert from "node:assert/strict";
import { appendFileSync } from "node:fs";
import { mkdtemp, writeFile } from "node:fs/promises";
import { removeDir } from "../support/chaos-host.js";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { multiaddr } from "@multiformats/multiaddr";
import { parseEventLogs } from "viem";
import { leaseMarketAbi } from "../../common/abi.js";
import { requestChallenge } from "../../common/attest/request.js";
import { devnetAccount } from "../../common/devnet.js";
import type { AttestorService } from "../../node/attest/service.js";
import { addrOf, startAttestorDaemon, type TestDaemon } from "../support/attest.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { checkLedger, watchWallets, type WatchedWallet } from "../support/chaos.js";
import { AttestorProcess, attestorProcessConfig, heal, logEntries, partition, waitForLine } from "../support/chaos-attest.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { ProviderProcess, writeProviderConfig } from "../support/provider-process.js";
import { TestRenter } from "../support/renter.js";
import { waitFor } from "../support/wait.js";

const ATTESTORS = [6, 7, 8] as const;
/** Probes every 300 ms, a 3 s QoS window: an outage is faulted within seconds. */
const LIVENESS = { probeIntervalMs: 300, probeTimeoutMs: 1_500, qosWindowSeconds: 3, minFailedProbes: 2, backupSubmitDelayMs: 2_000 };
/** A busy provider (another attestor's challenge computing) is tried again at the next scan, and never fails for it here. */
const ROLE = { scheduleIntervalMs: 1_000 };
/**
 * How long the second provider's runner holds attestor 6's challenge: the window in which it is
 * killed. The others' challenges and any after the kill are not held (the runner reads a file the
 * test writes: slow-challenge-runner.mjs): they need no window, and each held one cost 2.5 s and,
 * to an attestor that met the runner busy meanwhile, a retry.
 */
const SLOW_CHALLENGE_MS = 2_500;
const SLOW_RUNNER = path.join(path.dirname(fileURLToPath(import.meta.url)), "../support/slow-challenge-runner.mjs");

/** An answer in an assertion message (bigints as strings). */
const show = (value: unknown) => JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? v.toString() : v));

type InProcessAttestor = { daemon: TestDaemon; attestor: AttestorService; dataDir: string };

describe("chaos: attestors SIGKILLed, down and partitioned (three attestors, quorum two)", function () {
  this.timeout(240_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let dir: string;
  let renter: TestRenter;
  let a: AttestorProcess;
  const inProcess = new Map<number, InProcessAttestor>();
  let p1: ProviderProcess;
  let p2: ProviderProcess | undefined;
  let wallets: WatchedWallet[];
  let lease1: bigint;

  const aConfigFile = () => path.join(dir, "attestor-6.json");
  const startA = async (bootstrap: string[]) =>
    (a = await AttestorProcess.start(
      aConfigFile(),
      attestorProcessConfig(devnet, ATTESTORS[0], path.join(dir, "attestor-6"), { p2p: { bootstrap }, attest: { attestor: ROLE, liveness: LIVENESS } }),
    ));
  const startInProcess = async (index: number, bootstrap: string[]) => {
    const dataDir = path.join(dir, `attestor-${index}`);
    const started = await startAttestorDaemon(devnet, index, { dataDir, p2p: { bootstrap }, attest: { attestor: ROLE, liveness: LIVENESS } });
    inProcess.set(index, { ...started, dataDir });
    return started;
  };
  const attestorB = () => inProcess.get(ATTESTORS[1])!;
  const attestorC = () => inProcess.get(ATTESTORS[2])!;
  const startProvider = async (index: number, overrides: Record<string, unknown>, onLine?: (line: string) => void) => {
    const bootstrap = [a.addr, addrOf(attestorB().daemon), addrOf(attestorC().daemon)];
    const { configFile } = await writeProviderConfig(devnet, index, {
      dir,
      overrides: { p2p: { bootstrap, gossip: { heartbeatIntervalMs: 200 } }, offers: { reannounceIntervalMs: 1_000 }, ...overrides },
    });
    return ProviderProcess.start(configFile, { timeoutMs: 120_000, onLine });
  };
  /** Rents one unit of the provider's machine for ten minutes and starts a long task: the lease is Active. */
  const rentRunning = async (provider: ProviderProcess) => {
    const task = await bundles.bundle({ "run.sh": "echo started\nsleep 300\n" });
    const leaseId = await renter.rent(provider.peer, { machineId: provider.ready.machines[0]!.machineId, units: 1, duration: 600 });
    await renter.sendTask(provider.peer, leaseId, { bundle: task, command: "sh run.sh" });
    await renter.waitLease(leaseId, ["Active"], 20_000);
    return leaseId;
  };
  const machinesOf = (...providers: ProviderProcess[]) => new Map(providers.map((p) => [p.ready.machines[0]!.machineId, 2]));
  const assertLedger = async () => {
    const ledger = await checkLedger(devnet, { wallets, capacity: machinesOf(p1, ...(p2 ? [p2] : [])) });
    assert.deepEqual(ledger.violations, []);
  };
  /** Asks attestor 6 for a machine's outcome; a `busy` answer (another attestor's challenge computing) is asked again. */
  const ask = (machineId: number) =>
    waitFor(
      `attestor 6's outcome for machine ${machineId}`,
      async () => {
        const answer = await requestChallenge(renter.host, multiaddr(a.addr), { chainId: devnet.deployment.chainId, machineId }, { timeoutMs: 60_000 });
        return answer.outcome === "error" && answer.reason === "busy" ? undefined : answer;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );

  before(async () => {
    // Wall-clock blocks: the chain's clock must not run ahead of the attestors' (observedAt is checked against both).
    devnet = await startDevnet({
      params: { faultQuorum: 2, faultMinCreditBps: 2_000, attestorFaultWindow: LIVENESS.qosWindowSeconds },
      attestors: ATTESTORS.map((i) => devnetAccount(i).address),
      wallClockBlocks: true,
    });
    bundles = await startBundleServer();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-chaos-attest-"));
    await startA([]);
    await Promise.all([startInProcess(ATTESTORS[1], [a.addr]), startInProcess(ATTESTORS[2], [a.addr])]);
    [p1, renter] = await Promise.all([startProvider(1, { attest: { runner: { workers: 1 } } }), TestRenter.start(devnet, 5)]);
    wallets = await watchWallets(devnet, [
      { address: renter.address, role: "renter" },
      { address: p1.ready.address, role: "provider" },
    ]);
  });
  // A failure on a loaded CI host is hard to reproduce: it prints the child nodes' last log lines.
  afterEach(function () {
    if (this.currentTest?.state !== "failed") return;
    for (const [name, lines] of [
      ["attestor 6", a?.stderr],
      ["provider 1", p1?.stderr],
      ["provider 2", p2?.stderr],
    ] as const)
      if (lines?.length) console.error(`--- ${name}, last log lines:\n${lines.slice(-25).join("\n")}`);
  });
  after(async () => {
    for (const node of [p1, p2]) if (node && node.child.exitCode === null && node.child.signalCode === null) await node.kill("SIGKILL");
    await a?.kill("SIGKILL");
    for (const { daemon } of inProcess.values()) await daemon.close({ keepData: true }).catch(() => undefined);
    await renter?.close();
    await bundles?.close();
    await devnet?.close();
    if (dir) await removeDir(dir);
  });

  it("an attestor SIGKILLed mid-challenge: the provider is not penalised, the others attest it, the restarted attestor resumes from its records", async () => {
    const m1 = p1.ready.machines[0]!.machineId;
    // Attestor 6 attests the first provider's machine; the record is in its level database.
    const passed = await ask(m1);
    assert.equal(passed.outcome, "pass", show(passed));
    lease1 = await rentRunning(p1);

    // A second provider whose runner holds every challenge 2.5 s; attestor 6 dies while computing its challenge.
    // Killed on the provider's log line, as it comes (the challenge may start before the node prints ready).
    const victim = a;
    let killed: { challengeId: unknown; exited: Promise<void> } | undefined;
    // The other attestors' challenges, when they reach the runner first, are let through at once (held, each cost
    // 2.5 s and a retry to the attestor that met the runner busy); after the kill none is held.
    const delayFile = path.join(dir, "slow-challenge-ms");
    const killOnChallenge = (line: string) => {
      const [entry] = logEntries([line]);
      if (killed || entry?.msg !== "Challenge computing") return;
      if (String(entry.attestor).toLowerCase() !== victim.ready.address.toLowerCase()) return appendFileSync(delayFile, `\n${String(entry.challengeId)}`);
      killed = { challengeId: entry.challengeId, exited: victim.kill("SIGKILL") };
    };
    await writeFile(delayFile, String(SLOW_CHALLENGE_MS));
    p2 = await startProvider(2, { attest: { runner: { kind: "external", command: process.execPath, args: [SLOW_RUNNER, delayFile] } } }, killOnChallenge);
    wallets.push(...(await watchWallets(devnet, [{ address: p2.ready.address, role: "provider" }])));
    const m2 = p2.ready.machines[0]!.machineId;
    const kill = await waitFor("attestor 6 killed mid-challenge", () => killed, { timeoutMs: 40_000, intervalMs: 20 });
    await kill.exited;
    await writeFile(delayFile, "0");
    // The provider sees the stream close and stops that compute at once (no busy GPU until the cutoff).
    await waitForLine(p2.stderr, "Challenge compute stopped: the attestor went away", (entry) => entry.challengeId === kill.challengeId, { timeoutMs: 20_000 });

    // The others challenge it (tried again after a `busy` while the dead attestor's compute ran) and pass it.
    const records = async () =>
      Promise.all(
        [attestorB(), attestorC()].map(async ({ attestor }) =>
          (await attestor.results.history(m2, 5)).map(({ outcome, reason, detail, trigger, finishedAtMs }) => ({ outcome, reason, detail, trigger, finishedAtMs })),
        ),
      );
    for (const { attestor } of [attestorB(), attestorC()]) {
      await waitFor("the other attestors' passes of the second provider", async () => (await attestor.results.latest(m2))?.outcome === "pass", {
        timeoutMs: 90_000, // two challenges in turn, after the dead attestor's held one: slower on a loaded host
        intervalMs: 100,
        state: records,
      });
    }
    assert.equal(p2.child.exitCode, null, "the provider runs on");

    // Restarted on its data dir: its attestation from before the kill is answered from its records,
    // and the machine whose challenge it lost is challenged again and passes, with no failure held.
    await startA([addrOf(attestorB().daemon), addrOf(attestorC().daemon), p1.peer.addr, p2.peer.addr]);
    const cached = await ask(m1);
    assert.ok(cached.outcome === "pass" && cached.cached, show(cached));
    assert.equal(
      cached.outcome === "pass" && passed.outcome === "pass" && cached.attestation.attestation.challengeId,
      passed.outcome === "pass" && passed.attestation.attestation.challengeId,
    );
    const again = await ask(m2);
    assert.equal(again.outcome, "pass", show(again));
    for (const { attestor } of [attestorB(), attestorC()]) assert.equal((await attestor.failures.ofProvider(p2.ready.address, Date.now())).failures, 0);

    // The lease that ran through it all was never faulted: no attestor lost sight of its provider.
    assert.equal((await renter.lease(lease1)).status, "Active");
    await assertLedger();
  });

  it("two of three attestors down: one alone cannot fault a dead provider; once a quorum is back it is faulted and the renter refunded and credited", async () => {
    const market = devnet.deployment.contracts.market!;
    const from = a.stderr.length;
    const b = attestorB();
    await Promise.all([b.daemon.close({ keepData: true }), attestorC().daemon.close({ keepData: true })]);
    await p1.kill("SIGKILL");

    // The lone attestor sees the outage, signs a fault, finds no co-signer: the lease stays Active.
    const proposed = await waitForLine(a.stderr, "Fault proposed", (entry) => String(entry.leaseId) === lease1.toString(), {
      from,
      timeoutMs: 30_000,
    });
    assert.ok(proposed);
    await new Promise((resolve) => setTimeout(resolve, 2 * LIVENESS.backupSubmitDelayMs));
    assert.equal((await renter.lease(lease1)).status, "Active", "one attestor's signature must not end a lease");

    // One attestor comes back on its data dir: a quorum again. It watches a whole window itself, then co-signs.
    await startInProcess(ATTESTORS[1], [a.addr]);
    const ended = await renter.waitLease(lease1, ["Ended", "Settled"], 40_000);
    assert.equal(ended.endReason, "Faulted");
    const logs = parseEventLogs({ abi: leaseMarketAbi, logs: await devnet.admin.publicClient.getLogs({ address: market, fromBlock: devnet.deployment.deploymentBlock }) });
    const end = logs.find((log) => log.eventName === "LeaseEnded" && log.args.leaseId === lease1);
    assert.ok(end && end.eventName === "LeaseEnded");
    assert.ok(end.args.refund > 0n && end.args.credit > 0n, `the renter was refunded (${end.args.refund}) and credited (${end.args.credit})`);
    assert.equal(logs.filter((log) => log.eventName === "FaultSubmitted" && log.args.leaseId === lease1).length, 1, "faulted once");
    await assertLedger();
  });

  it("a provider cut off from one attestor is not faulted (and that attestor drops its proposal when the partition heals); cut off from all past the QoS window it is", async () => {
    const provider = p2!;
    await startInProcess(ATTESTORS[2], [a.addr, addrOf(attestorB().daemon)]);
    const leaseId = await rentRunning(provider);
    const b = attestorB();
    const c = attestorC();
    const heard = (node: InProcessAttestor) => node.attestor.prober!.state(leaseId)?.lastSuccessAt !== undefined;
    await waitFor("both in-process attestors hearing from the provider", () => heard(b) && heard(c), { timeoutMs: 20_000, intervalMs: 50 });

    // Attestor 8 alone loses the provider: it proposes a fault, the others (who hear it) refuse to co-sign.
    const providerPeerId = provider.ready.addrs[0]!.split("/p2p/")[1]!;
    await partition(c.daemon.p2p.host, providerPeerId);
    const proposal = await waitFor("attestor 8's fault proposal", () => c.attestor.faults!.get(leaseId), { timeoutMs: 20_000, intervalMs: 50 });
    assert.equal(proposal.role, "proposer");
    await new Promise((resolve) => setTimeout(resolve, 2 * LIVENESS.qosWindowSeconds * 1000));
    assert.equal((await renter.lease(leaseId)).status, "Active", "a provider partitioned from one attestor is not faulted");
    // Its own signature at most: moved past the others' last heartbeat, its fault waits out the
    // fault window after the new observedAt unsigned before it signs and asks again.
    const signers = c.attestor.faults!.get(leaseId)?.signatures.map((s) => s.signer) ?? [];
    assert.ok(
      signers.every((signer) => signer === devnetAccount(ATTESTORS[2]).address),
      `only attestor 8 signed: ${signers.join(", ")}`,
    );
    assert.equal(b.attestor.faults!.get(leaseId), undefined, "attestor 7 signed nothing");
    assert.ok(heard(b));
    // The partition heals: attestor 8 hears the provider again and drops its proposal.
    heal(c.daemon.p2p.host, providerPeerId);
    await waitFor("attestor 8 abandoning its proposal", () => c.attestor.faults!.get(leaseId)?.status === "abandoned", { timeoutMs: 20_000, intervalMs: 50 });
    assert.equal((await renter.lease(leaseId)).status, "Active");

    // The provider's node goes silent to every attestor (stopped: connections open, nothing answers).
    process.kill(provider.child.pid!, "SIGSTOP");
    try {
      const ended = await renter.waitLease(leaseId, ["Ended", "Settled"], 40_000);
      assert.equal(ended.endReason, "Faulted");
    } finally {
      process.kill(provider.child.pid!, "SIGCONT");
    }
    const logs = parseEventLogs({
      abi: leaseMarketAbi,
      logs: await devnet.admin.publicClient.getLogs({ address: devnet.deployment.contracts.market!, fromBlock: devnet.deployment.deploymentBlock }),
    });
    const end = logs.find((log) => log.eventName === "LeaseEnded" && log.args.leaseId === leaseId);
    assert.ok(end && end.eventName === "LeaseEnded" && end.args.refund > 0n && end.args.credit > 0n);
    // The partition heals: the provider finds its lease faulted, stops the task and claims only what accrued before observedAt.
    await renter.waitStatus(provider.peer, leaseId, (status) => status.state !== "running", "the provider to stop the faulted lease's task", 30_000);
    await assertLedger();
  });
});
