/**
 * Liveness probes: every `probeIntervalMs` the attestor sends each active lease's provider a
 * fresh random challenge, signed, over `/suanli/liveness/1.0.0` and expects a Heartbeat {leaseId,
 * challenge, respondedAt} signed by the lease's provider. Per lease it remembers when it last got
 * one and since when the provider has been failing; the fault coordinator decides from that.
 *
 * The state is kept in level (Bucket.attestProbes) and written after every probe, so a restarted
 * attestor still knows when it last heard from a provider. An outage is only as long as this
 * attestor watched it without a gap: a failed probe that starts more than `maxProbeGapMs` after
 * the previous one (a restart, a stalled process) starts a new outage.
 *
 * Receipts: when a heartbeat verifies, the attestor takes the time once (receivedMs), records
 * lastSuccessAt from it, saves the state, and only then signs a ProbeReceipt {leaseId, challenge,
 * receivedAtMs} that it sends with its next probe of the lease. The provider keeps it as evidence
 * against a liveness fault the same attestor signs (docs/attestation.md, "A false liveness
 * fault"). The same clock (`now`, wall time) stamps receipts, lastSuccessAt and the fault signer's
 * "now", so a receipt never contradicts what the saved state says. An honest attestor signs a
 * liveness fault only when its last success is no later than observedAt's second and the whole
 * fault window after observedAt has passed (mayFaultAt), so no receipt it holds or gives later
 * falls inside that window.
 */
import type { PeerId } from "@libp2p/interface";
import { peerIdFromString } from "@libp2p/peer-id";
import { multiaddr } from "@multiformats/multiaddr";
import { bytesToHex, type Hex, type LocalAccount, type TypedDataDomain } from "viem";
import { signLivenessProbe, signProbeReceipt } from "../../../common/attest/liveness.js";
import { signedHeartbeatSchema } from "../../../common/attest/wire.js";
import type { TypedDataRecoverer } from "../../../common/eip712-recover.js";
import type { CachedChainView } from "../../../common/offers/chain-view.js";
import type { SuanliHost } from "../../../common/p2p/host.js";
import { LIVENESS_PROTOCOL } from "../../../common/p2p/protocols.js";
import { request } from "../../../common/p2p/reqresp.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { OfferBook } from "../../offers/book.js";
import { Bucket } from "../../store/buckets.js";
import type { Repository, Store } from "../../store/store.js";
import type { TrackedLease, LeaseTracker } from "./leases.js";
import type { LivenessOptions } from "./options.js";
import { runDetached } from "../../../common/detached.js";

/** A heartbeat whose respondedAt is further than this from our clock is not trusted (a replay or a broken clock). */
const MAX_HEARTBEAT_SKEW_SECONDS = 300;

/** What one attestor knows about one lease's provider. Times are unix seconds on the attestor's clock. */
export type ProbeState = {
  /** The last heartbeat that verified. */
  lastSuccessAt: number | undefined;
  /**
   * That heartbeat's probe challenge and its exact arrival (unix ms, the receipt's receivedAtMs):
   * saved with the state before the receipt is signed, so the receipt can be signed again to back
   * a `seen_alive` answer to a fault proposal (fault-evidence.ts), after a restart too. Absent in
   * state saved by an older version.
   */
  lastSuccessChallenge?: Hex;
  lastSuccessAtMs?: number;
  /** Start of the first failed probe since the last success. */
  firstFailureAt: number | undefined;
  /** Failed probes in a row. */
  failures: number;
  /** When probing of this lease began in this process (the outage clock starts no earlier). */
  trackedSince: number;
  lastProbeAtMs: number;
};

export type ProbeResult = { ok: true } | { ok: false; error: string };

/** A signed receipt waiting to go out with the next probe of its lease (the wire form). */
export type PendingReceipt = { challenge: Hex; receivedAtMs: string; signature: Hex };

/**
 * Whether an attestor may sign a liveness fault observed at `observedAt` (unix s) at `nowMs`: the
 * last heartbeat it counted was no later than observedAt's second, and the whole fault window
 * after observedAt has passed, so any receipt it gives from now on is later than
 * (observedAt + windowSeconds)·1000 ms and cannot contradict the fault (receiptContradictsFault).
 * Check it right before signing: a probe that succeeds afterwards is stamped later still.
 */
export function mayFaultAt(state: Pick<ProbeState, "lastSuccessAt"> | undefined, observedAt: number, nowMs: number, windowSeconds: number): boolean {
  if (state?.lastSuccessAt !== undefined && state.lastSuccessAt > observedAt) return false;
  return nowMs > (observedAt + windowSeconds) * 1000;
}

/** AttestorStaking.MAX_FAULT_WINDOW: no fault window governance sets is longer. */
export const MAX_FAULT_WINDOW_SECONDS = 86_400;
/** A fault window read longer ago than this is not trusted (the contract gives a raise a day's notice). */
export const FAULT_WINDOW_STALE_MS = 12 * 3_600_000;

/**
 * The window W a liveness fault waits out after its observedAt: max(qosWindowSeconds, the staking's
 * faultWindow). A faultWindow not read within FAULT_WINDOW_STALE_MS (the chain unreachable for
 * half a day, or never read) may have been raised since, and a raise reaches faults observed a
 * day after it: the attestor then assumes the longest window the contract allows, so no fault it
 * signs can be contradicted by a receipt it gave.
 */
export function livenessFaultWindow(o: { qosWindowSeconds: number; staking?: { windowSeconds: number; readAtMs: number }; nowMs: number }): number {
  if (!o.staking) return o.qosWindowSeconds;
  const fresh = o.staking.readAtMs > 0 && o.nowMs - o.staking.readAtMs <= FAULT_WINDOW_STALE_MS;
  return Math.max(o.qosWindowSeconds, fresh ? o.staking.windowSeconds : MAX_FAULT_WINDOW_SECONDS);
}

/**
 * The attestor's liveness clock: `clock` (wall time, ms), never read lower than it was read before
 * in this process. Receipts, lastSuccessAt and every fault signer's "now" come from it, so a wall
 * clock stepped backwards (NTP stepping a large offset) cannot stamp a receipt given after a fault
 * was signed with a time inside that fault's window, which would make an honest signature
 * slashable (AttestorStaking.disputeFault). While the wall clock is behind, this one stands still:
 * probes pause until it catches up, and no fault is signed that the pause would make false.
 */
export function nonDecreasingClock(clock: () => number): () => number {
  let latest = -Infinity;
  return () => {
    const reading = clock();
    if (reading > latest) latest = reading;
    return latest;
  };
}

/** The first whole second at which mayFaultAt holds for `observedAt` (ignoring heartbeats). */
export function faultSignableAt(observedAt: number, windowSeconds: number): number {
  return observedAt + windowSeconds + 1;
}

/**
 * The longest time between the starts of two probes of one lease that still counts as watching
 * the provider without a break: a probe waits up to probeTimeoutMs, the next starts
 * probeIntervalMs later; twice that leaves room for a loaded machine.
 */
export function maxProbeGapMs(options: Pick<LivenessOptions, "probeIntervalMs" | "probeTimeoutMs">): number {
  return 2 * (options.probeIntervalMs + options.probeTimeoutMs);
}

/**
 * Whether this attestor holds its own evidence of an outage: at least `minFailedProbes` failed
 * probes in a row, the first of which started at least `qosWindowSeconds` ago. The same rule
 * holds for proposing a fault and for co-signing one.
 */
export function hasOutageEvidence(state: ProbeState | undefined, nowS: number, options: Pick<LivenessOptions, "minFailedProbes" | "qosWindowSeconds">): boolean {
  return state?.firstFailureAt !== undefined && state.failures >= options.minFailedProbes && nowS - state.firstFailureAt >= options.qosWindowSeconds;
}

export type LivenessProberOptions = {
  host: SuanliHost;
  chainId: number;
  /** suanliDomain(chainId, market): probes are signed in it. */
  domain: TypedDataDomain;
  /** The attestor's key: signs every probe. */
  account: Pick<LocalAccount, "address" | "signTypedData">;
  recoverer: TypedDataRecoverer;
  chainView: CachedChainView;
  book: OfferBook;
  tracker: LeaseTracker;
  options: LivenessOptions;
  metrics: Metrics;
  logger: Logger;
  /** Called after every probe, in order, with the lease's updated state. */
  onProbe?: (lease: TrackedLease, result: ProbeResult, state: ProbeState) => void | Promise<void>;
  /** Where probe state is kept across restarts. */
  store: Store;
  now?: () => number;
};

export class LivenessProber {
  private readonly states = new Map<string, ProbeState>();
  private readonly inflight = new Map<string, Promise<ProbeResult>>();
  /** Per lease: the receipt of its last answered probe, sent with the next probe until one is answered. */
  private readonly receipts = new Map<string, PendingReceipt>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly now: () => number;
  private readonly repo: Repository<ProbeState>;

  constructor(private readonly o: LivenessProberOptions) {
    this.now = o.now ?? Date.now;
    this.repo = o.store.repository<ProbeState>(Bucket.attestProbes);
  }

  /** Loads the probe state kept before a restart, then probes on schedule. */
  async start(): Promise<void> {
    if (this.timer) return;
    for await (const [key, state] of this.repo.entries()) this.states.set(key, state);
    // Ticks at a quarter of the interval so each lease is probed close to its own schedule.
    this.timer = setInterval(() => this.tick(), Math.max(50, Math.floor(this.o.options.probeIntervalMs / 4)));
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await Promise.allSettled([...this.inflight.values()]);
  }

  /** The lease's probe state, if this attestor has probed it. */
  state(leaseId: bigint): ProbeState | undefined {
    return this.states.get(leaseId.toString());
  }

  forget(leaseId: bigint): void {
    this.states.delete(leaseId.toString());
    this.receipts.delete(leaseId.toString());
    runDetached(this.repo.del(leaseId.toString()), undefined, "Forgetting a lease's liveness state");
  }

  /** Probes every active lease whose turn it is. */
  tick(): void {
    const nowMs = this.now();
    const active = this.o.tracker.active(Math.floor(nowMs / 1000));
    this.o.metrics.attestLeasesWatched.set(active.length);
    const live = new Set(active.map((lease) => lease.leaseId.toString()));
    for (const key of this.states.keys()) {
      if (live.has(key)) continue;
      this.states.delete(key);
      this.receipts.delete(key);
      runDetached(this.repo.del(key), undefined, "Forgetting a lease's liveness state");
    }
    for (const lease of active) {
      if (this.inflight.size >= this.o.options.maxConcurrentProbes) break;
      const key = lease.leaseId.toString();
      const state = this.states.get(key);
      if (this.inflight.has(key) || (state && nowMs - state.lastProbeAtMs < this.o.options.probeIntervalMs)) continue;
      runDetached(this.probe(lease), this.o.logger, "Running a probe", { leaseId: lease.leaseId });
    }
  }

  /** Probes one lease now (a probe already running for it is joined) and records the result. */
  probe(lease: Pick<TrackedLease, "leaseId" | "provider"> & Partial<TrackedLease>): Promise<ProbeResult> {
    const key = lease.leaseId.toString();
    const running = this.inflight.get(key);
    if (running) return running;
    const work = this.probeOnce(lease).finally(() => this.inflight.delete(key));
    this.inflight.set(key, work);
    return work;
  }

  private async probeOnce(lease: Pick<TrackedLease, "leaseId" | "provider"> & Partial<TrackedLease>): Promise<ProbeResult> {
    const key = lease.leaseId.toString();
    const startedMs = this.now();
    const startedAt = Math.floor(startedMs / 1000);
    let state = this.states.get(key);
    if (!state) {
      const trackedSinceMs = this.o.tracker.get(lease.leaseId)?.trackedSinceMs ?? startedMs;
      state = { lastSuccessAt: undefined, firstFailureAt: undefined, failures: 0, trackedSince: Math.floor(trackedSinceMs / 1000), lastProbeAtMs: startedMs };
      this.states.set(key, state);
    }
    const previousProbeAtMs = state.lastProbeAtMs;
    state.lastProbeAtMs = startedMs;
    const outcome = await this.exchange(lease).then(
      // One reading of the clock for lastSuccessAt and the receipt, so they never disagree.
      (challenge) => ({ ok: true as const, challenge, receivedMs: this.now() }),
      (error: unknown) => ({ ok: false as const, error: (error as Error)?.name ? `${(error as Error).name}: ${(error as Error).message.split("\n")[0]}` : String(error) }),
    );
    const result: ProbeResult = outcome.ok ? { ok: true } : { ok: false, error: outcome.error };
    const answered = outcome.ok ? outcome : undefined;
    if (outcome.ok) {
      // The receipt that went out with this probe reached the provider: it is delivered.
      this.receipts.delete(key);
      state.lastSuccessAt = Math.floor(outcome.receivedMs / 1000);
      state.lastSuccessChallenge = outcome.challenge;
      state.lastSuccessAtMs = Math.floor(outcome.receivedMs);
      state.firstFailureAt = undefined;
      state.failures = 0;
    } else {
      if (state.failures > 0 && startedMs - previousProbeAtMs > maxProbeGapMs(this.o.options)) {
        // This attestor did not watch the time in between: the outage it can vouch for starts now.
        state.failures = 0;
        state.firstFailureAt = undefined;
      }
      state.failures++;
      state.firstFailureAt ??= startedAt;
      this.o.logger.debug("Provider did not answer a probe", { leaseId: lease.leaseId, provider: lease.provider, failures: state.failures, error: outcome.error });
    }
    this.o.metrics.attestProbes.inc({ outcome: result.ok ? "ok" : "failed" });
    const saved = await this.repo.put(key, state).then(
      () => true,
      (error: unknown) => {
        this.o.logger.warn("Could not save the probe state", { leaseId: lease.leaseId }, error);
        return false;
      },
    );
    // A receipt only for an answer the saved state records: a restarted attestor must not forget
    // a heartbeat it gave a receipt for (it would then sign a fault the receipt contradicts).
    if (answered && saved) await this.signReceipt(lease.leaseId, answered.challenge, answered.receivedMs);
    const tracked = this.o.tracker.get(lease.leaseId);
    if (tracked) await this.o.onProbe?.(tracked, result, state);
    return result;
  }

  private async signReceipt(leaseId: bigint, challenge: Hex, receivedMs: number): Promise<void> {
    try {
      const receivedAtMs = BigInt(Math.floor(receivedMs));
      const signature = await signProbeReceipt(this.o.account, this.o.domain, { leaseId, challenge, receivedAtMs });
      this.receipts.set(leaseId.toString(), { challenge, receivedAtMs: receivedAtMs.toString(), signature });
    } catch (error) {
      this.o.logger.warn("Could not sign a probe receipt", { leaseId }, error);
    }
  }

  /**
   * The signed receipt of the last heartbeat this attestor counted for `leaseId` (the one it gave,
   * or gives with its next probe, to the provider), signed again from the state as saved in level
   * (never from an answer whose save failed: no receipt for what a restart would forget);
   * undefined when it never heard from the provider or the state predates the challenge being saved.
   */
  async lastReceipt(leaseId: bigint): Promise<PendingReceipt | undefined> {
    const state = await this.repo.get(leaseId.toString()).catch(() => undefined);
    if (state?.lastSuccessChallenge === undefined || state.lastSuccessAtMs === undefined) return undefined;
    const receivedAtMs = BigInt(state.lastSuccessAtMs);
    const signature = await signProbeReceipt(this.o.account, this.o.domain, { leaseId, challenge: state.lastSuccessChallenge, receivedAtMs });
    return { challenge: state.lastSuccessChallenge, receivedAtMs: receivedAtMs.toString(), signature };
  }

  /** The receipt the next probe of `leaseId` carries, if any (tests read it). */
  pendingReceipt(leaseId: bigint): PendingReceipt | undefined {
    return this.receipts.get(leaseId.toString());
  }

  /** One probe: throws unless a heartbeat signed by the lease's provider for this challenge came back in time; returns the challenge. */
  private async exchange(lease: Pick<TrackedLease, "leaseId" | "provider">): Promise<Hex> {
    const peer = await this.peerOf(lease.provider);
    const challenge = bytesToHex(globalThis.crypto.getRandomValues(new Uint8Array(32)));
    const fields = { leaseId: lease.leaseId, challenge, attestor: this.o.account.address, issuedAtMs: Math.floor(this.now()) };
    const signature = await signLivenessProbe(this.o.account, this.o.domain, fields);
    const receipt = this.receipts.get(lease.leaseId.toString());
    const body = { v: 1, chainId: this.o.chainId, ...fields, leaseId: lease.leaseId.toString(), signature, ...(receipt ? { receipt } : {}) };
    const answer = await request(this.o.host, peer, LIVENESS_PROTOCOL, body, {
      responseSchema: signedHeartbeatSchema,
      timeoutMs: this.o.options.probeTimeoutMs,
      maxMessageBytes: 1_024,
    });
    const { heartbeat, signature: heartbeatSignature } = answer;
    if (heartbeat.leaseId !== lease.leaseId || heartbeat.challenge !== challenge.toLowerCase()) throw new Error("the heartbeat is for another lease or challenge");
    const now = Math.floor(this.now() / 1000);
    if (Math.abs(heartbeat.respondedAt - now) > MAX_HEARTBEAT_SKEW_SECONDS) throw new Error(`the heartbeat's respondedAt ${heartbeat.respondedAt} is far from ${now}`);
    const digest = this.o.recoverer.digest("Heartbeat", { leaseId: heartbeat.leaseId, challenge: heartbeat.challenge as Hex, respondedAt: heartbeat.respondedAt });
    const signer = this.o.recoverer.recover(digest, heartbeatSignature);
    if (signer?.toLowerCase() !== lease.provider.toLowerCase()) throw new Error(`the heartbeat is signed by ${signer ?? "no key"}, not the provider`);
    return challenge;
  }

  /** The provider's registered peer id, with the addresses its offers announce added to the peer store. */
  private async peerOf(provider: `0x${string}`): Promise<PeerId> {
    const record = await this.o.chainView.getProvider(provider);
    if (!record?.registered) throw new Error(`${provider} is not a registered provider`);
    const peer = peerIdFromString(record.peerId);
    const addrs = this.o.book.byProvider(provider).flatMap((entry) => entry.addrs);
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
    return peer;
  }
}
