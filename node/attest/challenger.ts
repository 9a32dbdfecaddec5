/**
 * The attestor's proof-of-capacity challenges over libp2p. Targets are the machines in the
 * node's offer book (scheduled: each machine once its last attestation by this attestor nears
 * expiry, or its backoff after a failure has passed) and any machine someone asks for over
 * `/suanli/attest-request/1.0.0`. Each challenge:
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
import { MAX_CONTROL_MESSAGE_BYTES, maxOpenResponseBytes, type FailureReason } from "../../common/attest/messages.js";
import {
  attestAnswerSchema,
  challengeOutcomeSchema,
  challengeRequestSchema,
  type ChallengeErrorReason,
  type ChallengeOutcomeMessageInput,
  type ResultMessageInput,
} from "../../common/attest/wire.js";
import { ATTEST_PROTOCOL_VERSION } from "../../common/attest/messages.js";
import { readMachine, readProvider } from "../../common/chain/market.js";
import { SuanliError } from "../../common/errors.js";
import { GPU_MODELS, modelHash } from "../../common/gpu.js";
import type { SuanliHost } from "../../common/p2p/host.js";
import { ATTEST_PROTOCOL, ATTEST_REQUEST_PROTOCOL } from "../../common/p2p/protocols.js";
import { handleProtocol, request } from "../../common/p2p/reqresp.js";
import type { Logger } from "../log/logger.js";
import type { Metrics } from "../metrics/metrics.js";
import type { OfferBook } from "../offers/book.js";
import type { Attestor, AttestorChallenge, ChallengeOutcome, MachineClaim } from "./attestor.js";
import type { AttestorRoleOptions, MemoryOptions } from "./options.js";
import { gpusHash } from "../../common/attest/commit.js";
import { runMemoryPhase } from "./memory-exchange.js";
import type { ChallengeRecord, ChallengeResults, ChallengeTrigger } from "./results.js";
import { runDetached } from "../../common/detached.js";

/** Extra wait beyond a challenge's own deadlines, for the network. */
const NETWORK_GRACE_MS = 2_000;
/** How long connecting to the provider's node may take before the challenge starts; the challenge clock starts after. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Forced challenges (`suanli attestor challenge --force`) run at most this often per machine. */
const FORCE_MIN_INTERVAL_MS = 60_000;
/** Requests waiting for a challenge slot before new ones are answered `busy`. */
const MAX_WAITING = 32;
/** How long a challenge-request exchange may stay open (a challenge at the gpu preset takes about a minute at worst). */
const REQUEST_EXCHANGE_TIMEOUT_MS = 10 * 60_000;

export type ChallengerOptions = {
  host: SuanliHost;
  chainId: number;
  publicClient: PublicClient<Transport, Chain>;
  registry: Address;
  book: OfferBook;
  attestor: Attestor;
  results: ChallengeResults;
  options: AttestorRoleOptions;
  metrics: Metrics;
  logger: Logger;
  /** Told of every recorded result (the in-lease checker turns a leased machine's failure into a capacity fault). */
  onResult?: (record: ChallengeRecord) => void | Promise<void>;
  /** Clock in unix ms. */
  now?: () => number;
  /** `attest.memory`: run the memory phase after a passed GEMM phase. */
  memory?: MemoryOptions;
};

class BusyError extends SuanliError {
  override name = "AttestorBusyError";
}

type Target = { claim: MachineClaim; peer: PeerId };

/** Full-GPU model names by hash, for machines asked about without an offer in the book. */
const MODEL_BY_HASH = new Map(GPU_MODELS.map((model) => [modelHash(model.name), model.name]));

export class Challenger {
  private readonly inflight = new Map<number, Promise<ChallengeRecord>>();
  private active = 0;
  private readonly waiters: (() => void)[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;
  private kickTimer: ReturnType<typeof setTimeout> | undefined;
  private unhandle: (() => Promise<void>) | undefined;
  /** When each machine last had a forced challenge (unix ms). */
  private readonly forcedAt = new Map<number, number>();
  private running = false;
  private readonly now: () => number;
  private readonly onOffer = (_entry: unknown, previous: unknown) => {
    if (!previous) this.kick();
  };

  constructor(private readonly o: ChallengerOptions) {
    this.now = o.now ?? Date.now;
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
      handler: (body) => this.answerRequest(body.chainId, body.machineId, body.force ?? false),
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
    await Promise.allSettled([...this.inflight.values()]);
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
      if (!this.running || this.active >= this.o.options.maxConcurrentChallenges) break;
      if (this.inflight.has(machineId) || !(await this.isDue(machineId, nowMs))) continue;
      started.push(machineId);
      runDetached(this.challenge(machineId, "schedule"), undefined, "A scheduled challenge");
    }
    return started;
  }

  /**
   * The failure that holds the machine's provider in backoff (per provider, not per machine id:
   * a fresh machine id costs only gas), or undefined. The provider is the one the book or the
   * machine's last result names.
   */
  private async providerBackoff(machineId: number, nowMs: number, latest?: ChallengeRecord): Promise<ChallengeRecord | undefined> {
    const providers = new Set(this.o.book.byMachine(machineId).map((entry) => entry.provider.toLowerCase()));
    if (latest && latest.provider !== "0x0000000000000000000000000000000000000000") providers.add(latest.provider.toLowerCase());
    for (const provider of providers) {
      const failure = await this.providerFailure(provider, nowMs);
      if (failure) return failure;
    }
    return undefined;
  }

  /** The provider's failure within the backoff, if any. */
  private async providerFailure(provider: string, nowMs: number): Promise<ChallengeRecord | undefined> {
    const failure = await this.o.results.latestProviderFailure(provider);
    return failure && nowMs - failure.finishedAtMs < this.o.options.retryAfterFailureSeconds * 1000 ? failure : undefined;
  }

  /** Whether this attestor should challenge the machine now. */
  async isDue(machineId: number, nowMs = this.now()): Promise<boolean> {
    const latest = await this.o.results.latest(machineId);
    if (await this.providerBackoff(machineId, nowMs, latest)) return false;
    if (!latest) return true;
    if (latest.outcome === "pass" && latest.attestation) {
      return latest.attestation.attestation.expiry - nowMs / 1000 <= this.o.options.refreshBeforeExpirySeconds;
    }
    // An error (unreachable, busy) says nothing about the machine: try again at the next scan.
    if (latest.outcome === "error") return nowMs - latest.finishedAtMs >= this.o.options.scheduleIntervalMs;
    return nowMs - latest.finishedAtMs >= this.o.options.retryAfterFailureSeconds * 1000;
  }

  /**
   * Challenges a machine now (one challenge per machine at a time: a second call joins the first).
   * Resolves with the recorded result; throws AttestorBusyError when too many wait for a slot.
   */
  challenge(machineId: number, trigger: ChallengeTrigger = "request", forced = false): Promise<ChallengeRecord> {
    const running = this.inflight.get(machineId);
    if (running) return running;
    const work = (async () => {
      await this.acquire(trigger === "request");
      try {
        return await this.run(machineId, trigger, forced);
      } finally {
        this.release();
      }
    })();
    this.inflight.set(machineId, work);
    runDetached(work.finally(() => this.inflight.delete(machineId)), undefined, "A challenge");
    return work;
  }

  private async acquire(wait: boolean): Promise<void> {
    if (this.active < this.o.options.maxConcurrentChallenges) {
      this.active++;
      return;
    }
    if (!wait || this.waiters.length >= MAX_WAITING) throw new BusyError("Too many challenges are waiting; try again later");
    // The releasing challenge hands its slot over: `active` stays the same.
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  private release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.active--;
  }

  private async answerRequest(chainId: number, machineId: number, force: boolean): Promise<ChallengeOutcomeMessageInput> {
    if (chainId !== this.o.chainId) {
      return { v: 1, machineId, outcome: "error", reason: "wrong_chain", detail: `this attestor serves chain ${this.o.chainId}`, retryAfter: null };
    }
    if (force) {
      // A forced challenge skips the recorded result (an operator fixed the cause of a failure
      // and wants to know now), bounded so that nobody can keep the attestor computing.
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
    // A pass not yet due for renewal is answered from the record (a provider that restarted gets
    // its attestation back at once), and so is a failure within its backoff; an error (the
    // provider was unreachable...) was no verdict on the machine, so it is tried again.
    const latest = await this.o.results.latest(machineId);
    const held = await this.providerBackoff(machineId, this.now(), latest);
    if (held && held.machineId !== machineId) {
      const retryAfter = Math.ceil(held.finishedAtMs / 1000) + this.o.options.retryAfterFailureSeconds;
      return { v: 1, machineId, outcome: "error", reason: "backoff", detail: `provider ${held.provider} failed a challenge of machine ${held.machineId} (${held.reason}); its machines are challenged again after ${retryAfter}`, retryAfter };
    }
    if (!force && latest && latest.outcome !== "error" && !(await this.isDue(machineId))) return outcomeMessage(latest, true);
    let record: ChallengeRecord;
    try {
      record = await this.challenge(machineId, "request", force);
    } catch (error) {
      if (error instanceof BusyError) return { v: 1, machineId, outcome: "error", reason: "busy", detail: error.shortMessage, retryAfter: null };
      throw error;
    }
    if (record.outcome === "error" && record.reason === "backoff") {
      const held = await this.providerFailure(record.provider, this.now());
      if (held) return { ...outcomeMessage(record, false), retryAfter: Math.ceil(held.finishedAtMs / 1000) + this.o.options.retryAfterFailureSeconds } as ChallengeOutcomeMessageInput;
    }
    return outcomeMessage(record, false);
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

  private async run(machineId: number, trigger: ChallengeTrigger, forced: boolean): Promise<ChallengeRecord> {
    const startedAtMs = this.now();
    const base = { machineId, trigger, startedAtMs };
    let record: ChallengeRecord;
    try {
      const target = await this.target(machineId);
      if ("reason" in target) {
        record = { ...base, provider: "0x0000000000000000000000000000000000000000", model: "", units: 0, challengeId: null, finishedAtMs: this.now(), outcome: "error", reason: target.reason, detail: target.detail, measuredThroughput: null, attestation: null };
      } else {
        // The owner on-chain, whatever the book said: a machine the book does not know yet is held
        // too; a forced request (`--force`) for the failed machine itself is the operator's retry.
        const failure = await this.providerFailure(target.claim.provider, this.now());
        const held = failure && !(forced && failure.machineId === machineId) ? failure : undefined;
        // Then connect: a provider this node cannot reach is "unreachable", said at once, never a
        // late commit after the whole challenge window (the clock starts once connected).
        const unreachable = held ? undefined : await this.connect(target);
        record = held
          ? { ...base, provider: target.claim.provider, model: target.claim.model, units: target.claim.units, challengeId: null, finishedAtMs: this.now(), outcome: "error", reason: "backoff", detail: `provider ${held.provider} failed a challenge of machine ${held.machineId} (${held.reason}); no challenge of its machines before the backoff ends`, measuredThroughput: null, attestation: null }
          : unreachable
          ? { ...base, provider: target.claim.provider, model: target.claim.model, units: target.claim.units, challengeId: null, finishedAtMs: this.now(), outcome: "error", reason: "unreachable", detail: unreachable, measuredThroughput: null, attestation: null }
          : await this.exchange(target, base);
      }
    } catch (error) {
      this.o.logger.error("Challenge could not run", { machineId }, error);
      record = { ...base, provider: "0x0000000000000000000000000000000000000000", model: "", units: 0, challengeId: null, finishedAtMs: this.now(), outcome: "error", reason: "internal", detail: errorText(error), measuredThroughput: null, attestation: null };
    }
    await this.o.results.add(record);
    await Promise.resolve(this.o.onResult?.(record)).catch((error: unknown) => this.o.logger.warn("A challenge result's listener failed", { machineId }, error));
    this.o.metrics.attestChallenges.inc({ outcome: record.outcome, reason: record.reason ?? "", trigger });
    this.o.logger.info("Challenge recorded", { machineId, provider: record.provider, outcome: record.outcome, reason: record.reason, measuredThroughput: record.measuredThroughput, trigger });
    return record;
  }

  /** Connects to the provider's node; returns why it cannot be reached, or undefined when connected. */
  private async connect(target: Target): Promise<string | undefined> {
    const { peer } = target;
    if (this.o.host.getConnections(peer).length > 0) return undefined;
    const known = (await this.o.host.peerStore.get(peer).catch(() => undefined))?.addresses ?? [];
    if (!known.length) {
      return `no address known for the provider's node ${peer.toString()}: it has no offer in this attestor's offer book; connect this attestor to the provider's network (p2p.bootstrap)`;
    }
    try {
      await this.o.host.dial(peer, { signal: AbortSignal.timeout(CONNECT_TIMEOUT_MS) });
      return undefined;
    } catch (error) {
      return `cannot connect to the provider's node ${peer.toString()} at ${known.map((address) => address.multiaddr.toString()).join(", ")}: ${errorText(error)}`;
    }
  }

  private async exchange(target: Target, base: Pick<ChallengeRecord, "machineId" | "trigger" | "startedAtMs">): Promise<ChallengeRecord> {
    const { claim, peer } = target;
    // run() connected first: the challenge's clock (issuedAtMs) starts when it is sent over an
    // open connection, so the dial and the handshake are never inside the deadline.
    const challenge = await this.o.attestor.startChallenge(claim);
    const known = { ...base, provider: claim.provider, model: claim.model, units: claim.units, challengeId: challenge.id };
    const finish = (outcome: ChallengeOutcome): ChallengeRecord => ({
      ...known,
      finishedAtMs: this.now(),
      outcome: outcome.outcome,
      reason: outcome.outcome === "fail" ? outcome.reason : null,
      detail: outcome.outcome === "fail" ? outcome.detail : null,
      measuredThroughput: outcome.measuredThroughput ?? null,
      attestation: outcome.outcome === "pass" ? outcome.attestation : null,
      ...(outcome.outcome === "fail" && outcome.evidence ? { evidence: outcome.evidence } : {}),
    });
    const failed = (reason: FailureReason, detail: string): ChallengeRecord => ({
      ...known, finishedAtMs: this.now(), outcome: "fail", reason, detail, measuredThroughput: null, attestation: null,
    });
    const unreachable = (error: unknown): ChallengeRecord => ({
      ...known, finishedAtMs: this.now(), outcome: "error", reason: "unreachable", detail: errorText(error), measuredThroughput: null, attestation: null,
    });

    // Challenge → commit. The provider computes inside this exchange, up to the cutoff.
    let commit: unknown;
    try {
      commit = await request(this.o.host, peer, ATTEST_PROTOCOL, challenge.message, {
        responseSchema: attestAnswerSchema,
        timeoutMs: Math.max(1, challenge.message.cutoffAtMs - this.now()) + NETWORK_GRACE_MS,
        maxMessageBytes: MAX_CONTROL_MESSAGE_BYTES,
      });
    } catch (error) {
      const receivedAtMs = this.now();
      const mapped = this.mapError(error, challenge, receivedAtMs);
      if (mapped === "unreachable") return unreachable(error);
      return mapped.kind === "outcome" ? finish(mapped.outcome) : failed(mapped.reason, mapped.detail);
    }
    // Stamped before anything else reads it: the measured throughput counts from issue to here.
    const commitAtMs = this.now();
    const answer = commit as { type: string; reason?: string; message?: string };
    if (answer.type === "refused") {
      const refusal = challenge.onRefused(commit);
      if (answer.reason === "busy") {
        // Busy with another attestor's challenge is no verdict on the machine, once; a machine
        // that is busy every time (a GPU time-shared between machine ids) fails after a bound.
        const bound = this.o.options.maxBusyRefusals;
        const previous = bound > 1 ? await this.o.results.history(claim.machineId, bound - 1) : [];
        const streak = previous.length === bound - 1 && previous.every((record) => record.outcome === "error" && record.reason === "busy");
        if (!streak) return { ...finish(refusal), outcome: "error", reason: "busy", detail: answer.message ?? "busy" };
        return this.deliver(peer, { ...finish(refusal), reason: "busy_too_often", detail: `the machine answered busy to ${bound} challenges in a row: ${answer.message ?? "busy"}`.slice(0, 1_000) });
      }
      return this.deliver(peer, finish(refusal));
    }
    const next = challenge.onCommit(commit, commitAtMs);
    if (next.outcome === "fail") return this.deliver(peer, finish(next));

    // Open → rows. Checked after the answer is in: the root fixed every row before the indices were drawn.
    let rows: unknown;
    try {
      rows = await request(this.o.host, peer, ATTEST_PROTOCOL, next.request, {
        responseSchema: attestAnswerSchema,
        timeoutMs: challenge.params.openTimeoutMs + NETWORK_GRACE_MS,
        maxMessageBytes: maxOpenResponseBytes(challenge.message.cols, challenge.params.openRows),
      });
    } catch (error) {
      const mapped = this.mapError(error, challenge, this.now());
      if (mapped === "unreachable") return this.deliver(peer, failed("late_open", `the provider went away before opening rows: ${errorText(error)}`));
      return this.deliver(peer, mapped.kind === "outcome" ? finish(mapped.outcome) : failed(mapped.reason, mapped.detail));
    }
    const rowsAtMs = this.now();
    if ((rows as { type: string }).type === "refused") return this.deliver(peer, finish(challenge.onRefused(rows)));
    const outcome = await challenge.onOpen(rows, rowsAtMs);
    if (outcome.outcome !== "pass" || !this.o.memory?.enabled) return this.deliver(peer, finish(outcome));
    // The memory phase, in the same session: the attestation signed above is handed over only if it passes too.
    const memory = await runMemoryPhase({ host: this.o.host, peer, profile: this.o.memory.profile, domain: this.o.attestor.settings.domain, claim, challengeId: challenge.id, now: this.now });
    const sameGpus = memory.outcome === "pass" && gpusHash(memory.gpus) === outcome.attestation.attestation.gpus;
    if (memory.outcome === "pass" && sameGpus) return this.deliver(peer, finish(outcome));
    const detail = memory.outcome === "fail" ? `${memory.reason}: ${memory.detail}` : "the memory phase named other GPUs than the GEMM commit";
    return this.deliver(peer, { ...finish(outcome), outcome: "fail", reason: "memory_phase", detail: detail.slice(0, 1_000), attestation: null });
  }

  /** Maps a request failure to the challenge's verdict, or `unreachable` when nothing was learnt about the machine. */
  private mapError(
    error: unknown,
    challenge: AttestorChallenge,
    nowMs: number,
  ): "unreachable" | { kind: "outcome"; outcome: ChallengeOutcome } | { kind: "fail"; reason: FailureReason; detail: string } {
    const name = (error as Error)?.name;
    if (name === "RequestTimeoutError") {
      const timedOut = challenge.onTimeout(Math.max(nowMs, challenge.timeoutAtMs ?? nowMs) + 1);
      return timedOut ? { kind: "outcome", outcome: timedOut } : { kind: "fail", reason: "late_commit", detail: errorText(error) };
    }
    if (name === "PeerUnreachableError" || name === "ProtocolNotSupportedError" || name === "TooManyStreamsError") return "unreachable";
    if (name === "InvalidMessageError" || name === "MessageTooLargeError") return { kind: "fail", reason: "malformed", detail: errorText(error) };
    return { kind: "fail", reason: "refused", detail: errorText(error) };
  }

  /** Tells the provider how its challenge ended (best effort: the verdict stands either way). */
  private async deliver(peer: PeerId, record: ChallengeRecord): Promise<ChallengeRecord> {
    if (!record.challengeId) return record;
    const message: ResultMessageInput =
      record.outcome === "pass" && record.attestation
        ? { v: ATTEST_PROTOCOL_VERSION, type: "result", challengeId: record.challengeId, outcome: "pass", attestation: record.attestation }
        : { v: ATTEST_PROTOCOL_VERSION, type: "result", challengeId: record.challengeId, outcome: "fail", reason: (record.reason as FailureReason) ?? "malformed", detail: (record.detail ?? "").slice(0, 1_000) };
    try {
      await request(this.o.host, peer, ATTEST_PROTOCOL, message, { responseSchema: attestAnswerSchema, timeoutMs: 10_000, maxMessageBytes: MAX_CONTROL_MESSAGE_BYTES });
    } catch (error) {
      this.o.logger.warn("Could not deliver a challenge result to the provider", { machineId: record.machineId, outcome: record.outcome }, error);
    }
    return record;
  }
}

/** A record as the attest-request protocol answers it. */
export function outcomeMessage(record: ChallengeRecord, cached: boolean): ChallengeOutcomeMessageInput {
  if (record.outcome === "pass" && record.attestation) {
    return { v: 1, machineId: record.machineId, outcome: "pass", attestation: record.attestation, measuredThroughput: record.measuredThroughput ?? 0n, cached };
  }
  if (record.outcome === "fail") {
    return {
      v: 1,
      machineId: record.machineId,
      outcome: "fail",
      reason: record.reason as FailureReason,
      detail: (record.detail ?? "").slice(0, 1_000),
      measuredThroughput: record.measuredThroughput,
      cached,
    };
  }
  return { v: 1, machineId: record.machineId, outcome: "error", reason: record.reason as ChallengeErrorReason, detail: (record.detail ?? "").slice(0, 1_000), retryAfter: null };
}

function errorText(error: unknown): string {
  if (error instanceof SuanliError) return `${error.name}: ${error.shortMessage}`.slice(0, 1_000);
  return (error instanceof Error ? `${error.name}: ${error.message}` : String(error)).slice(0, 1_000);
}
