/**
 * In-lease capacity checks (docs/attestation.md, "In-lease checks"). A heartbeat proves only that
 * the provider's key is online; so every attestor also challenges each leased machine, without
 * notice, with a LIGHT check (Challenger, trigger `lease`): a challenge sized to
 * `attest.leaseChecks.rateShare` of each GPU (common/attest/params.ts deriveChallengeParams), so an
 * honest machine answers it while its renter's task uses the rest. A light pass signs no
 * attestation: it proves the machine is still what its last full check found.
 *
 * - When: at random times, exponentially distributed, so a provider cannot tell when the next
 *   check comes. The mean interval is the last measured check's duration divided by this
 *   attestor's part of the share the machine's offer announces (`leaseChecks.shareBps`,
 *   DEFAULT_LEASE_CHECK_SHARE_BPS without one): the share over the on-chain attestor set
 *   (attestor-count.ts), so all attestors together use the whole share and no more.
 * - How much: never more than that part of the lease's elapsed time: a check starts only if the
 *   time this attestor already spent checking the lease (from its recorded results, so a restart
 *   does not reset it) plus the expected cost stays within `part × elapsed`.
 * - Then (light-verdict.ts): wrong rows (`wrong_rows`) get a capacity fault (kind 2) proposed at
 *   once, with the transcript (the provider's signed commit and the wrong rows, faults/fault-transcript.ts):
 *   a co-signer that verifies it signs at once. Any other failure (late, slow, refused...) gets one
 *   proposed only when `failuresToFault` of the lease's last `failureWindow` checks by this
 *   attestor failed; co-signers then sign only from their own evidence under the same rule
 *   (CapacityEvidence). A co-signer without it checks the machine itself (within the same
 *   budget) and declines until it has a verdict, so a lying proposer cannot get a capacity fault
 *   co-signed against a machine that passes.
 */
import { leaseCheckShareBps } from "../../../common/attest/lease-checks.js";
import { FaultKind, type Fault } from "../../../common/eip712.js";
import { runDetached } from "../../../common/detached.js";
import type { Logger } from "../../log/logger.js";
import type { OfferBook } from "../../offers/book.js";
import type { Challenger, ChallengeRecord, ChallengeResults } from "../challenge/index.js";
import type { EvidenceVerdict, FaultEvidence, FaultLease, FaultCoordinator, LeaseTracker, TrackedLease } from "../faults/index.js";
import type { LeaseChecksOptions } from "./options.js";
import { judgeLightChecks, leaseVerdicts } from "./light-verdict.js";

/** Results read back per machine to account a lease's checks and find evidence. */
const HISTORY_LIMIT = 100;

type Budget = { spentMs: number; lastCostMs: number; nextAtMs: number };

export type InLeaseCheckerOptions = {
  tracker: LeaseTracker;
  challenger: Challenger;
  results: ChallengeResults;
  book: OfferBook;
  /** Where capacity faults are proposed (absent: checks run, faults are not proposed). */
  faults: () => FaultCoordinator | undefined;
  options: LeaseChecksOptions;
  /** The on-chain attestor set's size (attestor-count.ts): the lease's share is split over it. Default 1. */
  attestorCount?: () => Promise<number>;
  logger: Logger;
  now?: () => number;
  /** Uniform in [0, 1): the check times' randomness (tests may fix it). */
  random?: () => number;
};

export class InLeaseChecker {
  private readonly budgets = new Map<string, Budget>();
  private readonly running = new Map<string, Promise<ChallengeRecord | undefined>>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(private readonly o: InLeaseCheckerOptions) {
    this.now = o.now ?? Date.now;
    this.random = o.random ?? Math.random;
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => runDetached(this.tick(), this.o.logger, "In-lease check scan"), this.o.options.tickMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await Promise.allSettled([...this.running.values()]);
  }

  /** The share of the lease's elapsed time its machine's offer lets each attestor spend on checks (basis points). */
  shareBps(lease: Pick<TrackedLease, "machineId" | "provider">): number {
    const entries = this.o.book.byMachine(lease.machineId).filter((entry) => entry.provider.toLowerCase() === lease.provider.toLowerCase());
    const onDemand = entries.find((entry) => !entry.message.tier) ?? entries[0];
    return leaseCheckShareBps(onDemand?.message.leaseChecks);
  }

  /** This attestor's part of the share (basis points, fractional): the offer's share over the on-chain attestor set. */
  async ownShareBps(lease: Pick<TrackedLease, "machineId" | "provider">): Promise<number> {
    const count = this.o.attestorCount ? await this.o.attestorCount().catch(() => 1) : 1;
    return this.shareBps(lease) / Math.max(1, count);
  }

  /** How much checking time (ms) the lease still allows this attestor now. */
  async remainingMs(lease: TrackedLease, nowMs = this.now()): Promise<number> {
    const budget = await this.budget(lease);
    const allowance = (Math.max(0, nowMs - lease.activatedAt * 1000) * (await this.ownShareBps(lease))) / 10_000;
    return allowance - budget.spentMs;
  }

  /** Starts the checks that are due. */
  async tick(): Promise<void> {
    const nowMs = this.now();
    for (const lease of this.o.tracker.active(Math.floor(nowMs / 1000))) {
      const key = lease.leaseId.toString();
      if (this.running.has(key)) continue;
      const budget = await this.budget(lease);
      if (nowMs < budget.nextAtMs) continue;
      if ((await this.remainingMs(lease, nowMs)) < budget.lastCostMs) continue;
      runDetached(this.check(lease), this.o.logger, "In-lease check", { leaseId: lease.leaseId });
    }
    const live = new Set(this.o.tracker.active(Math.floor(nowMs / 1000)).map((lease) => lease.leaseId.toString()));
    for (const key of this.budgets.keys()) if (!live.has(key)) this.budgets.delete(key);
  }

  /**
   * Checks the lease's machine now if its budget allows (a co-signer asked for evidence).
   * Returns whether a check is running.
   */
  async requestCheck(lease: TrackedLease): Promise<boolean> {
    if (this.running.has(lease.leaseId.toString())) return true;
    const budget = await this.budget(lease);
    if ((await this.remainingMs(lease)) < budget.lastCostMs) return false;
    runDetached(this.check(lease), this.o.logger, "In-lease check", { leaseId: lease.leaseId });
    return true;
  }

  /**
   * A challenge result: a leased machine that failed a scheduled or in-lease challenge during its
   * lease gets a capacity fault proposed (a requested one never): at once for wrong rows, otherwise
   * once `failuresToFault` of the lease's last `failureWindow` checks failed (light-verdict.ts).
   */
  async onResult(record: ChallengeRecord): Promise<void> {
    if (record.outcome !== "fail") return;
    const faults = this.o.faults();
    if (!faults) return;
    for (const lease of this.o.tracker.active(Math.floor(this.now() / 1000))) {
      if (lease.machineId !== record.machineId || !leaseVerdicts([record], lease).length) continue;
      const verdict =
        record.reason === "wrong_rows" ? undefined : judgeLightChecks(leaseVerdicts(await this.o.results.history(lease.machineId, HISTORY_LIMIT), lease), this.o.options);
      if (verdict && !verdict.due) {
        this.o.logger.info("A leased machine failed a light check; no fault yet", {
          leaseId: lease.leaseId,
          machineId: lease.machineId,
          reason: record.reason,
          failed: verdict.failed,
          of: verdict.window,
          failuresToFault: this.o.options.failuresToFault,
        });
        continue;
      }
      this.o.logger.warn("A leased machine failed a capacity challenge: proposing a capacity fault", {
        leaseId: lease.leaseId,
        machineId: lease.machineId,
        provider: lease.provider,
        reason: record.reason,
        detail: record.detail,
      });
      // A wrong answer's signed transcript goes with the proposal: co-signers that verify it sign at once.
      await faults.propose(lease, FaultKind.capacity, Math.floor(record.startedAtMs / 1000), record.evidence);
    }
  }

  private check(lease: TrackedLease): Promise<ChallengeRecord | undefined> {
    const key = lease.leaseId.toString();
    const work = (async () => {
      const budget = await this.budget(lease);
      try {
        const record = await this.o.challenger.challenge(lease.machineId, "lease");
        const nowMs = this.now();
        // What the check cost the provider: an exchange that never started (backoff, unreachable) cost nothing.
        if (record.challengeId) {
          const cost = Math.max(1, record.finishedAtMs - record.startedAtMs);
          budget.spentMs += cost;
          budget.lastCostMs = cost;
        }
        budget.nextAtMs = nowMs + (await this.interval(lease, budget.lastCostMs));
        this.o.logger.info("In-lease check", { leaseId: lease.leaseId, machineId: lease.machineId, outcome: record.outcome, reason: record.reason, spentMs: budget.spentMs });
        return record;
      } catch (error) {
        budget.nextAtMs = this.now() + (await this.interval(lease, budget.lastCostMs));
        this.o.logger.warn("In-lease check could not run", { leaseId: lease.leaseId }, error);
        return undefined;
      }
    })().finally(() => this.running.delete(key));
    this.running.set(key, work);
    return work;
  }

  /** A random wait before the next check: exponential, its mean the check's cost over this attestor's part of the share. */
  private async interval(lease: TrackedLease, costMs: number): Promise<number> {
    const meanMs = (costMs * 10_000) / (await this.ownShareBps(lease));
    return Math.round(-Math.log(1 - this.random()) * meanMs);
  }

  /** The lease's budget; on first sight its spent time is read back from the recorded in-lease checks. */
  private async budget(lease: TrackedLease): Promise<Budget> {
    const key = lease.leaseId.toString();
    const held = this.budgets.get(key);
    if (held) return held;
    const history = await this.o.results.history(lease.machineId, HISTORY_LIMIT);
    const checks = history.filter((record) => record.trigger === "lease" && record.challengeId && record.startedAtMs >= lease.activatedAt * 1000);
    const spentMs = checks.reduce((sum, record) => sum + Math.max(1, record.finishedAtMs - record.startedAtMs), 0);
    const lastCostMs = checks[0] ? Math.max(1, checks[0].finishedAtMs - checks[0].startedAtMs) : this.o.options.assumedChallengeMs;
    const budget: Budget = { spentMs, lastCostMs, nextAtMs: this.now() + (await this.interval(lease, lastCostMs)) };
    this.budgets.set(key, this.budgets.get(key) ?? budget);
    return this.budgets.get(key)!;
  }
}

/**
 * Kind 2: this attestor's own checks of the leased machine during the lease call for a fault under
 * the same rule as the proposer's (light-verdict.ts): wrong rows, or `failuresToFault` of its last
 * `failureWindow` checks failed, from no later than observedAt.
 */
export class CapacityEvidence implements FaultEvidence {
  readonly kind = FaultKind.capacity;

  constructor(
    private readonly checker: InLeaseChecker,
    private readonly results: ChallengeResults,
    private readonly tracker: LeaseTracker,
    private readonly rule: Pick<LeaseChecksOptions, "failuresToFault" | "failureWindow">,
  ) {}

  /** The issuedAt of this attestor's newest attestation of the lease's machine issued after `observedAt`, if any. */
  async contradictedAt(lease: FaultLease, observedAt: number): Promise<number | undefined> {
    const history = await this.results.history(lease.machineId, HISTORY_LIMIT);
    const pass = history.find(
      (record) =>
        record.outcome === "pass" && record.attestation && record.provider.toLowerCase() === lease.provider.toLowerCase() && record.attestation.attestation.issuedAt > observedAt,
    );
    return pass?.attestation?.attestation.issuedAt;
  }

  async check(lease: FaultLease, fault: Fault): Promise<EvidenceVerdict> {
    const verdicts = leaseVerdicts(await this.results.history(lease.machineId, HISTORY_LIMIT), lease);
    const newest = verdicts[0];
    const tracked = this.tracker.get(lease.leaseId);
    if (!newest) {
      const checking = tracked ? await this.checker.requestCheck(tracked) : false;
      return {
        ok: false,
        reason: "no_evidence",
        detail: checking
          ? "this attestor has no verdict on the leased machine during the lease; it is challenging it now"
          : "this attestor has no verdict on the leased machine during the lease, and the lease's check budget allows no challenge now",
        earliestObservedAt: null,
      };
    }
    const verdict = judgeLightChecks(verdicts, this.rule);
    if (!verdict.due) {
      // Not enough failures here: look again (within the budget) when the claim is newer than this attestor's last check.
      if (tracked && newest.finishedAtMs < fault.observedAt * 1000) await this.checker.requestCheck(tracked);
      if (newest.outcome === "pass") {
        return {
          ok: false,
          reason: "seen_alive",
          detail: `the machine passed this attestor's challenge started at ${Math.floor(newest.startedAtMs / 1000)} (${verdict.failed} of its last ${verdict.window} checks failed; a fault needs ${this.rule.failuresToFault})`,
          lastSeenAt: Math.floor(newest.finishedAtMs / 1000),
        };
      }
      return {
        ok: false,
        reason: "no_evidence",
        detail: `${verdict.failed} of this attestor's last ${verdict.window} checks of the leased machine failed; a fault needs ${this.rule.failuresToFault} of ${this.rule.failureWindow} (or wrong rows)`,
        earliestObservedAt: null,
      };
    }
    // The evidence starts with the failure that proves it (wrong rows) or the earliest failure of the window.
    const earliestAt = Math.floor((verdict.why === "wrong_rows" ? verdict.at : verdict.first).startedAtMs / 1000);
    if (fault.observedAt < earliestAt) {
      return {
        ok: false,
        reason: "no_evidence",
        detail: `observedAt ${fault.observedAt} is before this attestor's own failed challenge at ${earliestAt}`,
        earliestObservedAt: earliestAt,
      };
    }
    return { ok: true };
  }
}
