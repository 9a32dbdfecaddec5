/**
 * The attestor's proof-of-capacity challenges over libp2p. Targets are the machines in the
 * node's offer book (scheduled: each machine once its last attestation by this attestor nears
 * expiry, or its own backoff after a failure has passed; in-lease checks ignore the backoff) and any machine someone asks for over
 * `/suanli/attest-request/1.0.0`. The backoff grows with the machine's failure history
 * (failure-history.ts) and holds forced requests too. A full challenge is a round of the
 * provider's unleased machines, issued together (rounds.ts). Each challenge:
 *
 *   1. reads the machine on-chain (owner, model, units, VRAM: the claim is the declaration),
 *   2. dials the provider (its registered peer id, the offer's addresses),
 *   3. runs the Attestor state machine over `/suanli/attest/1.0.0`: challenge → commit (stamped on
 *      arrival), open → rows, with the deadlines the challenge fixes,
 *   4. sends the provider the result (the signed attestation on a pass),
 *   5. records the result in level.
 */
import type { PeerId } from "@libp2p/interface";
import { peerIdFromString } from "@libp2p/peer-id";
import { multiaddr } from "@multiformats/multiaddr";
import { getAddress, type Address, type Chain, type PublicClient, type Transport } from "viem";
import { challengeOutcomeSchema, challengeRequestSchema, type ChallengeErrorReason, type ChallengeOutcomeMessageInput } from "../../../common/attest/wire.js";
import { readMachine, readProvider } from "../../../common/chain/market.js";
import { SuanliError } from "../../../common/errors.js";
import { GPU_MODELS, modelHash } from "../../../common/gpu.js";
import type { SuanliHost } from "../../../common/p2p/host.js";
import { ATTEST_REQUEST_PROTOCOL } from "../../../common/p2p/protocols.js";
import { handleProtocol } from "../../../common/p2p/reqresp.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { OfferBook } from "../../offers/book.js";
import type { Attestor } from "./attestor.js";
import type { AttestorRoleOptions } from "./options.js";
import type { MemoryOptions } from "../memory/index.js";
import type { ChallengeRecord, ChallengeResults, ChallengeTrigger } from "./results.js";
import { runDetached } from "../../../common/detached.js";
import { ChallengeSession, connectTo, errorText, type Target } from "./challenge-session.js";
import type { FailureEntry, FailureHistory } from "./failure-history.js";
import { backoffAnswer, leasedAnswer, outcomeMessage, RequesterAllowance } from "./request-answers.js";
import { ChallengeRound, roundMachines, roundSiblingWork } from "./rounds.js";

/** Forced challenges (`npx suanli attestor challenge --force`) run at most this often per machine. */
const FORCE_MIN_INTERVAL_MS = 60_000;
/** Requests waiting for a challenge slot before new ones are answered `busy`. */
const MAX_WAITING = 32;
/** How long a challenge-request exchange may stay open (a challenge at the gpu preset takes about a minute at worst). */
const REQUEST_EXCHANGE_TIMEOUT_MS = 10 * 60_000;
/**
 * A scheduled challenge answered `busy` (another attestor's challenge holds the provider's single
 * slot) is tried again soon rather than at the next scan: after BUSY_RETRY_BASE_MS × attempt,
 * jittered by ±50 % so that two attestors that met do not meet again, at most BUSY_RETRIES times
 * in a row (then the next scan). A challenge holds the slot at most MAX_CHALLENGE_WINDOW_MS
 * (2 min, common/attest/bounds.ts): five tries over 2+4+6+8+10 s ≈ 30 s cover the usual check
 * (seconds to a minute), and bound this attestor's retries to 5 per machine per scan.
 */
export const BUSY_RETRY_BASE_MS = 2_000;
export const BUSY_RETRIES = 5;

export type ChallengerOptions = {
  host: SuanliHost;
  chainId: number;
  publicClient: PublicClient<Transport, Chain>;
  registry: Address;
  book: OfferBook;
  attestor: Attestor;
  results: ChallengeResults;
  /** Failed challenges per machine and provider, which only time clears: the backoff and the attestations' `failures`. */
  failures: FailureHistory;
  options: AttestorRoleOptions;
  metrics: Metrics;
  logger: Logger;
  /** Told of every recorded result (the in-lease checker turns a leased machine's failure into a capacity fault). */
  onResult?: (record: ChallengeRecord) => void | Promise<void>;
  /** Clock in unix ms. */
  now?: () => number;
  /** `attest.memory`: run the memory phase after a passed GEMM phase. */
  memory?: MemoryOptions;
  /** `attest.leaseChecks.rateShare`: an in-lease check (trigger `lease`) is a light check of this share of the GPUs. Default 1 (full). */
  lightRateShare?: number;
  /** When the machine's active lease ends (unix s), or undefined when it is not leased: the scheduler skips a leased machine and a request for it is answered from the cache or refused `leased`. */
  leasedUntil?: (machineId: number) => number | undefined;
};

class BusyError extends SuanliError {
  override name = "AttestorBusyError";
}

/** Full-GPU model names by hash, for machines asked about without an offer in the book. */
const MODEL_BY_HASH = new Map(GPU_MODELS.map((model) => [modelHash(model.name), model.name]));

export class Challenger {
  private readonly inflight = new Map<number, { trigger: ChallengeTrigger; work: Promise<ChallengeRecord>; waiting?: true }>();
  /** Each requester's (peer id's) answered requests in the current hour. */
  private readonly requesters = new RequesterAllowance();
  private active = 0;
  private readonly waiters: (() => void)[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;
  private kickTimer: ReturnType<typeof setTimeout> | undefined;
  private unhandle: (() => Promise<void>) | undefined;
  /** Scheduled challenges answered `busy` in a row per machine, and when the next try is due (unix ms). */
  private readonly busyRetries = new Map<number, { count: number; atMs: number }>();
  /** When each machine last had a forced challenge (unix ms). */
  private readonly forcedAt = new Map<number, number>();
  private running = false;
  /** A scan stopped with the slots full: another runs when one frees. */
  private rescan = false;
  private readonly now: () => number;
  private readonly onOffer = (_entry: unknown, previous: unknown) => {
    if (!previous) this.kick();
  };

  private readonly session: ChallengeSession;

  constructor(private readonly o: ChallengerOptions) {
    this.now = o.now ?? Date.now;
    this.session = new ChallengeSession({
      host: o.host,
      attestor: o.attestor,
      results: o.results,
      logger: o.logger,
      now: this.now,
      ...(o.memory ? { memory: o.memory } : {}),
    });
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.unhandle = await handleProtocol(this.o.host, ATTEST_REQUEST_PROTOCOL, {
      requestSchema: challengeRequestSchema,
      responseSchema: challengeOutcomeSchema,
      maxMessageBytes: 1_024,
      timeoutMs: REQUEST_EXCHANGE_TIMEOUT_MS,
      maxInboundStreamsPerPeer: 2,
      handler: (body, context) => this.answerRequest(body.chainId, body.machineId, body.force ?? false, context.peer.toString()),
    });
    this.timer = setInterval(() => this.kick(), this.o.options.scheduleIntervalMs);
    this.timer.unref();
    // A machine that appears in the book is looked at now rather than at the next interval.
    this.o.book.on("offer", this.onOffer);
    this.kick();
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.timer) clearInterval(this.timer);
    if (this.kickTimer) clearTimeout(this.kickTimer);
    this.o.book.off("offer", this.onOffer);
    await this.unhandle?.();
    await Promise.allSettled([...this.inflight.values()].map((entry) => entry.work));
  }

  /** Schedules a scan of the book for machines due a challenge. */
  kick(): void {
    if (!this.running || this.kickTimer) return;
    this.kickTimer = setTimeout(() => {
      this.kickTimer = undefined;
      runDetached(this.runDue(), this.o.logger, "Challenge scan");
    }, 0);
  }

  /** Starts challenges of the book's machines that are due, as far as free slots allow. Returns the machine ids started. */
  async runDue(): Promise<number[]> {
    const nowMs = this.now();
    const machineIds = [...new Set(this.o.book.all().map((entry) => entry.machineId))];
    const started: number[] = [];
    for (const machineId of machineIds) {
      // Slots full: the scan goes on when one frees (release()).
      if (this.active >= this.o.options.maxConcurrentChallenges) this.rescan = true;
      if (!this.running || this.active >= this.o.options.maxConcurrentChallenges) break;
      // A leased machine gets only light in-lease checks (lease-checks/in-lease.ts): a full one would need the renter's GPU.
      if (this.inflight.has(machineId) || this.o.leasedUntil?.(machineId) !== undefined || !(await this.isDue(machineId, nowMs))) continue;
      started.push(machineId);
      runDetached(this.challenge(machineId, "schedule"), undefined, "A scheduled challenge");
    }
    return started;
  }

  /**
   * The failure that holds the machine in backoff, with the failures counted and when the wait
   * ends, or undefined. Per machine (issue 35 item 2): a provider that fails a spare machine's
   * challenge on purpose holds back only that machine, and in-lease checks ignore the backoff
   * altogether (run()). The wait doubles with every failure the machine holds in its history, which
   * only time clears (issue 35 item 3), and holds forced requests too. One exception: a machine this
   * attestor has never passed waits on its provider's history (every machine's failures), so that a
   * fresh machine id (it costs only gas) buys a cheater no new try; such a machine has no
   * attestation to lose.
   */
  private async machineFailure(machineId: number, nowMs: number, provider?: string): Promise<{ failure: FailureEntry; failures: number; retryAtMs: number } | undefined> {
    const held = (summary: Awaited<ReturnType<FailureHistory["ofMachine"]>>) => {
      const retryAtMs = this.o.failures.retryAtMs(summary);
      return summary.latest && retryAtMs !== undefined && nowMs < retryAtMs ? { failure: summary.latest, failures: summary.failures, retryAtMs } : undefined;
    };
    const own = held(await this.o.failures.ofMachine(machineId, nowMs));
    if (own) return own;
    const history = await this.o.results.history(machineId, this.o.options.keepResultsPerMachine);
    if (history.some((record) => record.outcome === "pass")) return undefined;
    const providers = new Set(this.o.book.byMachine(machineId).map((entry) => entry.provider.toLowerCase()));
    if (provider) providers.add(provider.toLowerCase());
    for (const owner of providers) {
      const failure = held(await this.o.failures.ofProvider(owner, nowMs));
      if (failure) return failure;
    }
    return undefined;
  }

  /** Whether this attestor should challenge the machine now. */
  async isDue(machineId: number, nowMs = this.now()): Promise<boolean> {
    const latest = await this.latestFull(machineId);
    if (await this.machineFailure(machineId, nowMs)) return false;
    if (!latest) return true;
    if (latest.outcome === "pass" && latest.attestation) {
      return latest.attestation.attestation.expiry - nowMs / 1000 <= this.o.options.refreshBeforeExpirySeconds;
    }
    // Busy: tried again soon, a bounded number of times (BUSY_RETRIES).
    const busy = this.busyRetries.get(machineId);
    if (latest.outcome === "error" && latest.reason === "busy" && busy && busy.count <= BUSY_RETRIES && nowMs >= busy.atMs) return true;
    // An error (unreachable, busy too often) says nothing about the machine: try again at the next scan.
    if (latest.outcome === "error") return nowMs - latest.finishedAtMs >= this.o.options.scheduleIntervalMs;
    // A failure whose backoff (above) has ended.
    return true;
  }

  /**
   * Challenges a machine now (one challenge per machine at a time: a second call joins the first).
   * A full challenge (scheduled or requested) is a round (rounds.ts): every unleased machine the
   * provider offers is challenged with it, at once, in one slot. Resolves with the machine's
   * recorded result; throws AttestorBusyError when too many wait for a slot.
   */
  challenge(machineId: number, trigger: ChallengeTrigger = "request"): Promise<ChallengeRecord> {
    const running = this.inflight.get(machineId);
    if (running) {
      // A scheduled or in-lease challenge never joins a requested one (which leads to no fault: a provider keeping its
      // leased machine under requests would shield it from in-lease checks); it runs once the requested one is over.
      if (running.trigger === "request" && trigger !== "request") return running.work.catch(() => undefined).then(() => this.challenge(machineId, trigger));
      return running.work;
    }
    // A round waits for another round of the provider's machines to end, then takes them all (none is challenged alone meanwhile).
    const earlier = trigger === "lease" ? undefined : roundSiblingWork(this.o.book, machineId, this.inflight);
    if (earlier) {
      const work: Promise<ChallengeRecord> = earlier.then(() => {
        if (this.inflight.get(machineId)?.work === work) this.inflight.delete(machineId);
        if (!this.running) throw new BusyError("The attestor is stopping");
        return this.challenge(machineId, trigger);
      });
      // A waiting entry: others wait on running rounds only, never on a wait (no cycle).
      this.inflight.set(machineId, { trigger, work, waiting: true });
      return work;
    }
    const machines = trigger === "lease" ? [machineId] : roundMachines(this.o.book, machineId, (id) => this.inflight.has(id) || this.o.leasedUntil?.(id) !== undefined);
    const round = machines.length > 1 ? new ChallengeRound(machines, this.now) : undefined;
    if (round) this.o.logger.info("Challenge round", { round: round.ref.id, machines, trigger });
    const all = (async () => {
      await this.acquire(trigger === "request");
      try {
        return await Promise.all(machines.map((id) => this.run(id, trigger, round)));
      } finally {
        this.release();
      }
    })();
    machines.forEach((id, index) => {
      const work = all.then((records) => records[index]!);
      this.inflight.set(id, { trigger, work });
      runDetached(
        work.finally(() => this.inflight.get(id)?.work === work && this.inflight.delete(id)),
        undefined,
        "A challenge",
      );
    });
    return this.inflight.get(machineId)!.work;
  }

  private async acquire(wait: boolean): Promise<void> {
    if (this.active < this.o.options.maxConcurrentChallenges) {
      this.active++;
      return;
    }
    if (!wait || this.waiters.length >= MAX_WAITING) {
      this.rescan = true; // a scheduled one is looked at again when a slot frees
      throw new BusyError("Too many challenges are waiting; try again later");
    }
    // The releasing challenge hands its slot over: `active` stays the same.
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  private release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.active--;
    if (this.rescan && !next) {
      this.rescan = false;
      this.kick();
    }
  }

  private async answerRequest(chainId: number, machineId: number, force: boolean, requester: string): Promise<ChallengeOutcomeMessageInput> {
    if (chainId !== this.o.chainId) {
      return { v: 1, machineId, outcome: "error", reason: "wrong_chain", detail: `this attestor serves chain ${this.o.chainId}`, retryAfter: null };
    }
    const limitedUntil = this.requesters.count(requester, this.now(), this.o.options.requestsPerRequesterPerHour);
    if (limitedUntil !== undefined) {
      return {
        v: 1,
        machineId,
        outcome: "error",
        reason: "backoff",
        detail: `peer ${requester} has had its ${this.o.options.requestsPerRequesterPerHour} challenge requests this hour`,
        retryAfter: limitedUntil,
      };
    }
    if (force) {
      // A forced challenge skips a recorded pass (an operator wants to know now), bounded so that
      // nobody can keep the attestor computing; it does not skip a failure's backoff (below).
      const last = this.forcedAt.get(machineId);
      const nowMs = this.now();
      if (last !== undefined && nowMs - last < FORCE_MIN_INTERVAL_MS) {
        return {
          v: 1,
          machineId,
          outcome: "error",
          reason: "backoff",
          detail: `machine ${machineId} had a forced challenge ${Math.round((nowMs - last) / 1000)} s ago; forced challenges run at most once a minute per machine`,
          retryAfter: Math.ceil((last + FORCE_MIN_INTERVAL_MS) / 1000),
        };
      }
      this.forcedAt.set(machineId, nowMs);
      if (this.forcedAt.size > 10_000) this.forcedAt.delete(this.forcedAt.keys().next().value!);
    }
    // A pass not yet due for renewal is answered from the record (a restarted provider gets its attestation back at
    // once), and so is a failure within its backoff; an error (unreachable...) was no verdict, so it is tried again.
    // A leased machine is never challenged on request (a full check needs the renter's GPU): its attestation from the cache, or a refusal `leased`, never a failure.
    const leasedUntil = this.o.leasedUntil?.(machineId);
    if (leasedUntil !== undefined) return leasedAnswer(machineId, leasedUntil, await this.o.results.history(machineId, this.o.options.keepResultsPerMachine), this.now());
    const latest = await this.latestFull(machineId);
    if (!force && latest && latest.outcome !== "error" && !(await this.isDue(machineId))) return outcomeMessage(latest, true);
    // Forced or not, a machine in its failure backoff is not challenged, and the refusal costs the
    // attestor nothing (no challenge, no record): forcing every minute bought a cheat 1,440 tries a day.
    const held = await this.machineFailure(machineId, this.now());
    if (held) return backoffAnswer(machineId, held);
    let record: ChallengeRecord;
    try {
      record = await this.challenge(machineId, "request");
    } catch (error) {
      if (error instanceof BusyError) return { v: 1, machineId, outcome: "error", reason: "busy", detail: error.shortMessage, retryAfter: null };
      throw error;
    }
    if (record.outcome === "error" && record.reason === "backoff") {
      const heldNow = await this.machineFailure(machineId, this.now(), record.provider);
      if (heldNow) return { ...outcomeMessage(record, false), retryAfter: Math.ceil(heldNow.retryAtMs / 1000) } as ChallengeOutcomeMessageInput;
    }
    return outcomeMessage(record, false);
  }

  /** The machine's newest result of a full challenge (a light in-lease check's neither attests nor renews). */
  private async latestFull(machineId: number): Promise<ChallengeRecord | undefined> {
    return (await this.o.results.history(machineId, this.o.options.keepResultsPerMachine)).find((record) => !record.light);
  }

  /** Resolves the machine's claim and the provider's peer from the chain (and the book's addresses). */
  private async target(machineId: number): Promise<Target | { reason: ChallengeErrorReason; detail: string }> {
    const machine = await readMachine(this.o.publicClient, this.o.registry, machineId);
    if (machine.owner === "0x0000000000000000000000000000000000000000") return { reason: "not_declared", detail: `machine ${machineId} is not declared on-chain` };
    const owner = getAddress(machine.owner);
    const entries = this.o.book.byMachine(machineId).filter((entry) => entry.provider === owner);
    // MIG slices are not enumerable: their canonical name comes from the provider's offer, whose model hash the book checked.
    const model = entries.find((entry) => modelHash(entry.model) === machine.model)?.model ?? MODEL_BY_HASH.get(machine.model);
    if (!model) return { reason: "not_declared", detail: `machine ${machineId}'s model is unknown here (no offer names it)` };
    const provider = await readProvider(this.o.publicClient, this.o.registry, owner);
    if (!provider.registered) return { reason: "not_declared", detail: `${owner} is not a registered provider` };
    let peer: PeerId;
    try {
      peer = peerIdFromString(provider.peerId);
    } catch {
      return { reason: "unreachable", detail: `${owner} registered an invalid peer id` };
    }
    const addrs = entries.filter((entry) => entry.peerId === provider.peerId).flatMap((entry) => entry.addrs);
    if (addrs.length) {
      const multiaddrs = addrs.flatMap((addr) => {
        try {
          return [multiaddr(addr)];
        } catch {
          return [];
        }
      });
      await this.o.host.peerStore.merge(peer, { multiaddrs }).catch(() => undefined);
    }
    return { claim: { provider: owner, machineId, model, units: machine.units, vramMiB: machine.vramMiB }, peer };
  }

  private async run(machineId: number, trigger: ChallengeTrigger, round?: ChallengeRound): Promise<ChallengeRecord> {
    try {
      return await this.runOne(machineId, trigger, round);
    } finally {
      round?.leave(machineId);
    }
  }

  private async runOne(machineId: number, trigger: ChallengeTrigger, round?: ChallengeRound): Promise<ChallengeRecord> {
    const startedAtMs = this.now();
    const base = { machineId, trigger, startedAtMs, ...(round ? { round: round.ref } : {}) };
    let record: ChallengeRecord;
    try {
      const target = await this.target(machineId);
      if ("reason" in target) {
        record = this.errorRecord(base, target.reason, target.detail);
      } else {
        // The machine's own backoff, forced requests included (issue 35 item 3: a failure must cost a
        // try); an in-lease check is never held back (a provider must not be able to switch them
        // off by failing a challenge, of this machine or another, on purpose).
        const held = trigger === "lease" ? undefined : await this.machineFailure(machineId, this.now(), target.claim.provider);
        // What a pass will carry: this machine's own failures, which only time clears.
        const own = await this.o.failures.ofMachine(machineId, this.now());
        target.claim.history = { failures: own.failures, lastFailureAt: own.latest ? Math.floor(own.latest.finishedAtMs / 1000) : 0 };
        // Then connect: a provider this node cannot reach is "unreachable", said at once, never a
        // late commit after the whole challenge window (the clock starts once connected).
        // A machine of the round other than the one asked for, in its own backoff, sits the round out: nothing is recorded.
        if (held && round && machineId !== round.ref.machines[0]) return this.errorRecord(base, "backoff", "in its backoff: not in this round", target.claim);
        const unreachable = held ? undefined : await connectTo(this.o.host, target);
        if (held || unreachable) round?.leave(machineId);
        const issuedAtMs = round && !held && !unreachable ? await round.ready(machineId) : undefined;
        record = held
          ? this.errorRecord(
              base,
              "backoff",
              held.failure.machineId === machineId
                ? `machine ${machineId} failed a challenge (${held.failure.reason}; ${held.failures} held); no challenge of it before the backoff ends`
                : `provider ${held.failure.provider} failed a challenge of machine ${held.failure.machineId} (${held.failure.reason}); machine ${machineId}, never passed here, waits for the backoff to end`,
              target.claim,
            )
          : unreachable
            ? this.errorRecord(base, "unreachable", unreachable, target.claim)
            : await this.session.run(
                target,
                base,
                trigger === "lease" ? { rateShare: this.o.lightRateShare ?? 1 } : round ? { issuedAtMs, onAnswer: (committed) => round.answer(machineId, committed) } : {},
              );
        if (round) record = await round.judge(record);
      }
    } catch (error) {
      this.o.logger.error("Challenge could not run", { machineId }, error);
      record = this.errorRecord(base, "internal", errorText(error));
    }
    await this.o.results.add(record);
    // A light check's failure under a renter's load is judged over several checks (lease-checks/in-lease.ts), not put in the failure history; wrong rows are.
    if (!record.light || record.reason === "wrong_rows") await this.o.failures.add(record, this.now());
    if (trigger === "schedule") this.noteBusy(record);
    await Promise.resolve(this.o.onResult?.(record)).catch((error: unknown) => this.o.logger.warn("A challenge result's listener failed", { machineId }, error));
    this.o.metrics.attestChallenges.inc({ outcome: record.outcome, reason: record.reason ?? "", trigger });
    this.o.logger.info("Challenge recorded", {
      machineId,
      provider: record.provider,
      outcome: record.outcome,
      reason: record.reason,
      measuredThroughput: record.measuredThroughput,
      trigger,
      ...(round ? { round: round.ref.id } : {}),
    });
    return record;
  }

  /** A scheduled challenge answered `busy` is tried again after a short jittered wait (BUSY_RETRY_BASE_MS), at most BUSY_RETRIES times in a row. */
  private noteBusy(record: ChallengeRecord): void {
    if (record.outcome !== "error" || record.reason !== "busy") {
      this.busyRetries.delete(record.machineId);
      return;
    }
    const count = (this.busyRetries.get(record.machineId)?.count ?? 0) + 1;
    const delayMs = Math.round(BUSY_RETRY_BASE_MS * count * (0.5 + Math.random()));
    this.busyRetries.set(record.machineId, { count, atMs: this.now() + delayMs });
    if (this.busyRetries.size > 10_000) this.busyRetries.delete(this.busyRetries.keys().next().value!);
    if (count > BUSY_RETRIES || !this.running) return;
    const timer = setTimeout(() => this.kick(), delayMs);
    timer.unref();
  }

  /**
   * A challenge that could not run (no verdict on the machine): recorded with the claim when the
   * machine was resolved, with no provider (the zero address) when it was not.
   */
  private errorRecord(
    base: Pick<ChallengeRecord, "machineId" | "trigger" | "startedAtMs" | "round">,
    reason: ChallengeErrorReason,
    detail: string,
    claim?: Pick<Target["claim"], "provider" | "model" | "units">,
  ): ChallengeRecord {
    return {
      ...base,
      provider: claim?.provider ?? "0x0000000000000000000000000000000000000000",
      model: claim?.model ?? "",
      units: claim?.units ?? 0,
      challengeId: null,
      finishedAtMs: this.now(),
      outcome: "error",
      reason,
      detail,
      measuredThroughput: null,
      attestation: null,
    };
  }
}
