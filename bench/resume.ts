/**
 * `npm run bench -- resume [--json] [--runs N] [--notice S]`: preemption → the resumed task
 * running with its checkpoint mounted (issue #36, docs/data.md "Resume"), on real components set
 * up as test/e2e/resume-checkpoint.test.ts does: a devnet (preemption notice S seconds, default 2),
 * two provider nodes (libp2p on 127.0.0.1, level, Helia with data.enabled, bubblewrap sandbox) and
 * the real SDK. Each of N runs (default 5): a fresh renter client submits the interruptible
 * counting job (test/support/counting-job.ts: a step every 0.3 s, a checkpoint folder written every
 * 5 steps, the provider snapshots it every 10 s, the period floor) with autoMigrate; once the SDK
 * holds a checkpoint record, an on-demand renter opens a lease on the job's unit (the preemption);
 * the SDK re-rents the task on the other provider from the newest checkpoint. Per run:
 *   - open → resumed: from the moment the preempting lease's open transaction is mined (this host's
 *     clock when the receipt came back) to the resumed lease's `resumed=<CID>` line (the job's first
 *     line, printed inside the sandbox with $SUANLI_CHECKPOINT_DIR restored; its time is the
 *     provider's stamp on the line, same host clock);
 *   - notice end → resumed: the same end, from the notice's end (stopAt: the open plus the notice, in
 *     chain seconds, added to the wall moment of the open): the part that does not depend on the
 *     notice, a chain parameter;
 *   - the steps redone (last step of the preempted run minus the step restored);
 *   - where the time goes, from the SDK's progress lines and the providers' system lines: the SDK
 *     noticing the preemption (its wait polls the chain every second), the old task's end (the
 *     notice, then its end snapshot), the SDK settling on the checkpoint, matching and reserving,
 *     the lease open, and the new provider starting it (block confirmation, bundle and checkpoint
 *     fetch over bitswap, the sandbox).
 * Goal (issue #36): open → resumed p50 <= 5 s on the devnet.
 */
import { mkdtemp, rm } from "node:fs/promises";
import path from "node:path";
import { tmpdir } from "node:os";
import { readLease } from "../common/chain/market.js";
import { devnetAccount } from "../common/devnet.js";
import { detectBubblewrap } from "../node/provider/runtime/sandbox.js";
import type { LogLine } from "../common/protocols/lease.js";
import type { SuanliClient, TaskRecord } from "../sdk/index.js";
import { countingJob } from "../test/support/counting-job.js";
import { leaseEvents, TestRenter } from "../test/support/renter.js";
import { connectRenter, startMarket } from "../test/support/renter-market.js";
import { waitFor } from "../test/support/wait.js";
import type { MainFigure } from "./_calibration.js";

const GOAL_P50_MS = 5_000;
/** Steps between two checkpoints the job writes: a resume redoes at most this many. */
const EVERY = 5;
const RENTER = 5;
const PREEMPTOR = 6;
const ENDED = new Set(["Ended", "Settled", "Cancelled"]);

const dataProvider = {
  data: { enabled: true, fetchTimeoutMs: 4_000 },
  provider: {
    inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 1, region: "eu-west" }] },
    minBids: { "A100-80GB": { pricePerUnitSecond: "50" } },
    reserve: { holdSeconds: 5 },
    runtime: { sandbox: "bubblewrap", network: false },
  },
};

function option(args: string[], name: string, fallback: number, max: number): number {
  const at = args.indexOf(name);
  const value = at >= 0 ? Number(args[at + 1]) : fallback;
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`${name} takes a whole number from 1 to ${max}`);
  return value;
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

const stats = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: Math.round(percentile(sorted, 50)), p95: Math.round(percentile(sorted, 95)), max: Math.round(sorted.at(-1)!) };
};

/** The phases of one run, ms, each from the previous mark (see the header). */
type Phases = { sdkNoticed: number; oldTaskEnded: number; sdkSettled: number; matchedReserved: number; leaseOpened: number; providerStarted: number; jobFirstLine: number };
type Run = { openToResumedMs: number; stopToResumedMs: number; redoneSteps: number; restoredStep: number; phases: Phases };

/** The figures bench/run.ts divides by the same run's calibration figure: none (wall time, bound by polling and the chain, not CPU). */
export const mainFigures: MainFigure[] = [];

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const runs = option(args, "--runs", 5, 100);
  const notice = option(args, "--notice", 2, 60);
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const bubblewrap = await detectBubblewrap();
  if (!bubblewrap.available) throw new Error(`the resume bench runs its tasks in bubblewrap: ${bubblewrap.reason ?? "not available"}`);
  const market = await startMarket({
    name: "bench-resume",
    devnet: { params: { preemptionNotice: notice } },
    providers: [dataProvider, dataProvider],
    renter: RENTER,
    fund: 10_000_000_000n,
  });
  const states = await mkdtemp(path.join(tmpdir(), "suanli-bench-resume-"));
  const results: Run[] = [];
  try {
    const { devnet, providers } = market;
    const counter = await market.bundles.bundle({ "run.sh": countingJob(EVERY) });
    const preemptor = await TestRenter.start(devnet, PREEMPTOR, 10_000_000_000n);
    market.defer(() => preemptor.close());
    // The renter's own wallet as a plain libp2p renter: reads each lease's log lines with their provider stamps.
    const reader = await TestRenter.start(devnet, RENTER, 0n);
    market.defer(() => reader.close());
    for (let i = 1; i <= runs; i++) {
      // A fresh client each run: one that saw a provider preempt its task avoids it for ten minutes.
      const progress: { at: number; line: string }[] = [];
      const pending: bigint[] = [];
      let client: SuanliClient | undefined;
      try {
        client = await connectRenter(devnet, {
          name: `the renter (run ${i})`,
          account: devnetAccount(RENTER),
          bootstrap: providers.map((p) => p.peer.addr),
          stateFile: path.join(states, `run-${i}.json`),
          freeUnits: 1,
          offers: 2,
          timeoutMs: 60_000,
          client: { onProgress: (line: string) => progress.push({ at: Date.now(), line }) },
        });
        const submitted = await client.submitTask({
          gpuType: "A100",
          gpuCount: 1,
          duration: 120,
          interruptible: true,
          bidPerGpuHour: "0.2",
          attestedOnly: false,
          bundleUrl: counter.url,
          sha256: counter.sha256,
          command: "sh run.sh",
          // MARK: each run's checkpoints are its own CIDs (none already cached on the other provider).
          env: { TOTAL: "100", FAST: "0.02", MARK: `bench-${Date.now()}-${i}` },
          checkpointPeriodSeconds: 10,
          autoMigrate: true,
        });
        const first = providers.find((p) => p.peer.address === submitted.provider)!;
        const waiting = client.wait(submitted.taskId, { timeoutMs: 200_000 });
        waiting.catch(() => undefined);
        const sdk = client;
        await waitFor("a periodic checkpoint", async () => (await sdk.checkpoints(submitted.taskId)).newest !== null, { timeoutMs: 40_000, intervalMs: 250 });
        const demandLease = await preemptor.rent(first.peer, { machineId: first.agent.machines[0]!.machineId, units: 1, duration: 30 });
        const openedAt = Date.now();
        pending.push(demandLease);
        const accepted = await preemptor.sendTask(first.peer, demandLease, { bundle: counter, command: "true" });
        if (accepted.state !== "accepted") throw new Error(`the on-demand task was not accepted: ${JSON.stringify(accepted)}`);
        const receipt = await waiting;
        if (receipt.state !== "succeeded" || receipt.leases.length !== 2 || receipt.leases[0]!.endReason !== "Preempted") {
          throw new Error(`run ${i}: not one preemption then a success: ${receipt.state}, ${receipt.leases.map((l) => l.endReason).join(", ")}`);
        }
        const record = (await client.tasks()).find((task) => task.taskId === submitted.taskId) as TaskRecord;
        const [preempted, resumed] = record.attempts;
        pending.push(resumed!.leaseId);
        const second = providers.find((p) => p.peer.address === resumed!.provider)!;
        // The notice in chain seconds: the preempted lease's stopAt minus the block time of the open that preempted it.
        const events = await leaseEvents(devnet, preempted!.leaseId);
        const preemptEvent = events.find((e) => e.eventName === "LeasePreempted")!;
        const block = await devnet.admin.publicClient.getBlock({ blockNumber: preemptEvent.blockNumber });
        const noticeMs = (Number((preemptEvent.args as { stopAt: number }).stopAt) - Number(block.timestamp)) * 1000;
        const before: LogLine[] = await reader.allLogs(first.peer, preempted!.leaseId);
        const after: LogLine[] = await reader.allLogs(second.peer, resumed!.leaseId);
        const line = (lines: LogLine[], test: (text: string) => boolean, what: string) => {
          const found = lines.find((l) => test(l.text));
          if (!found) throw new Error(`run ${i}: no ${what} line: ${lines.map((l) => l.text).join(" | ")}`);
          return found;
        };
        const mark = (test: (text: string) => boolean, what: string) => {
          const found = progress.find((p) => test(p.line));
          if (!found) throw new Error(`run ${i}: the SDK said no ${what}: ${progress.map((p) => p.line).join(" | ")}`);
          return found.at;
        };
        const resumedLine = line(after, (t) => t === `resumed=${resumed!.resumedFrom}`, "resumed=<CID>");
        const restoredStep = Number(line(after, (t) => t.startsWith("start="), "start=").text.slice(6));
        const reached = Math.max(...before.filter((l) => l.text.startsWith("step=")).map((l) => Number(l.text.slice(5))));
        const oldEnded = line(before, (t) => t.startsWith("Task ended"), "Task ended").ts;
        const noticed = mark((t) => t.includes("(Preempted); migrating"), "migrating");
        const settled = mark((t) => t.startsWith("Resuming from checkpoint"), "Resuming from checkpoint");
        const opening = progress.find((p) => p.at >= settled && p.line.startsWith("Opening the lease"))!.at;
        const sending = progress.find((p) => p.at >= settled && p.line.startsWith(`Lease ${resumed!.leaseId} opened`))!.at;
        const started = line(after, (t) => t.startsWith("Task ") && t.includes(" started on "), "Task started").ts;
        const phases: Phases = {
          sdkNoticed: noticed - openedAt,
          oldTaskEnded: oldEnded - openedAt,
          sdkSettled: settled - Math.max(noticed, oldEnded),
          matchedReserved: opening - settled,
          leaseOpened: sending - opening,
          providerStarted: started - sending,
          jobFirstLine: resumedLine.ts - started,
        };
        const result: Run = {
          openToResumedMs: resumedLine.ts - openedAt,
          stopToResumedMs: resumedLine.ts - (openedAt + noticeMs),
          redoneSteps: reached - restoredStep,
          restoredStep,
          phases,
        };
        results.push(result);
        log(
          `run ${i}: open → resumed ${result.openToResumedMs} ms, notice end (${noticeMs / 1000} s) → resumed ${result.stopToResumedMs} ms; restored step ${restoredStep}, reached ${reached}, redone ${result.redoneSteps}; phases ${JSON.stringify(phases)}`,
        );
      } finally {
        await client?.close().catch(() => undefined);
      }
      // The next run starts with both units free: the on-demand lease and the resumed one ended on chain.
      const market_ = devnet.deployment.contracts.market!;
      await waitFor(
        "the on-demand and the resumed leases to end",
        async () => {
          for (const id of pending.splice(0)) if (!ENDED.has((await readLease(devnet.admin.publicClient, market_, id)).status)) pending.push(id);
          return pending.length === 0;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
    }
  } finally {
    await market.close().catch(() => undefined);
    await rm(states, { recursive: true, force: true });
  }
  const phaseNames = Object.keys(results[0]!.phases) as (keyof Phases)[];
  const summary = {
    runs,
    noticeSeconds: notice,
    openToResumedMs: stats(results.map((r) => r.openToResumedMs)),
    stopToResumedMs: stats(results.map((r) => r.stopToResumedMs)),
    redoneSteps: { max: Math.max(...results.map((r) => r.redoneSteps)), each: results.map((r) => r.redoneSteps) },
    phasesP50Ms: Object.fromEntries(phaseNames.map((name) => [name, stats(results.map((r) => r.phases[name])).p50])),
    goal: { openToResumedP50Ms: GOAL_P50_MS },
    met: { openToResumedP50: stats(results.map((r) => r.openToResumedMs)).p50 <= GOAL_P50_MS },
  };
  console.log(
    [
      "| measure | p50 | p95 | max | goal |",
      "|---|---|---|---|---|",
      `| preempting open → resumed task's first line (${notice} s notice) | ${summary.openToResumedMs.p50} ms | ${summary.openToResumedMs.p95} ms | ${summary.openToResumedMs.max} ms | p50 <= ${GOAL_P50_MS} ms |`,
      `| notice end → resumed task's first line | ${summary.stopToResumedMs.p50} ms | ${summary.stopToResumedMs.p95} ms | ${summary.stopToResumedMs.max} ms | |`,
      `| steps redone (checkpoint every ${EVERY}) | | | ${summary.redoneSteps.max} | <= ${EVERY} |`,
      `\nphases, p50 ms: ${phaseNames.map((name) => `${name} ${summary.phasesP50Ms[name]}`).join(", ")}`,
    ].join("\n"),
  );
  return summary;
}
