/**
 * One challenge session with a provider's node over `/suanli/attest/1.0.0`, on an open
 * connection: challenge → commit (stamped on arrival), open → rows, the memory phase when the
 * attestor runs it, then the result delivered to the provider. Returns the record to keep.
 */
import type { PeerId } from "@libp2p/interface";
import { unitDeviceMismatch } from "../../../common/attest/units.js";
import { MAX_ATTESTOR_SLOT_MS, challengeBoundsViolation } from "../../../common/attest/bounds.js";
import { isSignedRefusalReason, recoverRefusalSigner } from "../../../common/attest/refusal.js";
import { refusalMessageSchema, type ChallengeMessage, type RefusalMessage } from "../../../common/attest/messages.js";
import { getAddress } from "viem";
import {
  MAX_COMMIT_MESSAGE_BYTES,
  MAX_CONTROL_MESSAGE_BYTES,
  maxOpenResponseBytes,
  ATTEST_PROTOCOL_VERSION,
  LEGACY_V1_MESSAGE,
  legacyV1MessageSchema,
  type FailureReason,
} from "../../../common/attest/messages.js";
import { attestAnswerSchema, type ResultMessageInput } from "../../../common/attest/wire.js";
import { SuanliError } from "../../../common/errors.js";
import type { SuanliHost } from "../../../common/p2p/host.js";
import { ATTEST_PROTOCOL } from "../../../common/p2p/protocols.js";
import { request } from "../../../common/p2p/reqresp.js";
import type { Logger } from "../../log/logger.js";
import type { Attestor, AttestorChallenge, ChallengeOutcome, MachineClaim } from "./attestor.js";
import { runMemoryPhase, type MemoryOptions } from "../memory/index.js";
import type { ChallengeRecord, ChallengeResults } from "./results.js";

/** How long connecting to the provider's node may take before the challenge starts; the challenge clock starts after. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Extra wait beyond a challenge's own deadlines, for the network. */
const NETWORK_GRACE_MS = 2_000;

/** A machine to challenge: its on-chain claim and the provider's node. */
export type Target = { claim: MachineClaim; peer: PeerId };

export type ChallengeSessionOptions = {
  host: SuanliHost;
  attestor: Attestor;
  results: ChallengeResults;
  logger: Logger;
  now: () => number;
  memory?: MemoryOptions;
};

/** Records read back to check a `lease_budget` refusal, and the slack allowed per record (clock skew, rounding). */
const REFUSAL_HISTORY = 100;
const REFUSAL_SLACK_MS = 1_000;

export class ChallengeSession {
  private readonly now: () => number;

  constructor(private readonly o: ChallengeSessionOptions) {
    this.now = o.now;
  }

  /**
   * `rateShare` < 1: a light check (in-lease): sized to that share of the GPUs, no memory phase, and
   * its pass is recorded without an attestation. A round's challenge (rounds.ts) is issued at the
   * round's `issuedAtMs` and tells `onAnswer` whether the provider's first answer was a commit.
   */
  async run(
    target: Target,
    base: Pick<ChallengeRecord, "machineId" | "trigger" | "startedAtMs" | "round">,
    options: { rateShare?: number; issuedAtMs?: number; onAnswer?: (committed: boolean) => void } = {},
  ): Promise<ChallengeRecord> {
    const { claim, peer } = target;
    // run() connected first: the challenge's clock (issuedAtMs) starts when it is sent over an
    // open connection, so the dial and the handshake are never inside the deadline.
    const challenge = await this.o.attestor.startChallenge(claim, options);
    const known = { ...base, provider: claim.provider, model: claim.model, units: claim.units, challengeId: challenge.id, ...(challenge.light ? { light: true } : {}) };
    const finish = (outcome: ChallengeOutcome): ChallengeRecord => ({
      ...known,
      finishedAtMs: this.now(),
      outcome: outcome.outcome === "light_pass" ? "pass" : outcome.outcome,
      reason: outcome.outcome === "fail" ? outcome.reason : null,
      detail: outcome.outcome === "fail" ? outcome.detail : null,
      measuredThroughput: outcome.measuredThroughput ?? null,
      attestation: outcome.outcome === "pass" ? outcome.attestation : null,
      ...(outcome.outcome === "fail" && outcome.evidence ? { evidence: outcome.evidence } : {}),
      ...(outcome.outcome === "pass" ? { commit: outcome.commit } : {}),
      ...(outcome.outcome === "pass" && outcome.cc ? { cc: outcome.cc } : {}),
    });
    const failed = (reason: FailureReason, detail: string): ChallengeRecord => ({
      ...known,
      finishedAtMs: this.now(),
      outcome: "fail",
      reason,
      detail,
      measuredThroughput: null,
      attestation: null,
    });
    const unreachable = (error: unknown): ChallengeRecord => ({
      ...known,
      finishedAtMs: this.now(),
      outcome: "error",
      reason: "unreachable",
      detail: errorText(error),
      measuredThroughput: null,
      attestation: null,
    });

    // Challenge → commit. The provider computes inside this exchange, up to the cutoff.
    let commit: unknown;
    try {
      commit = await request(this.o.host, peer, ATTEST_PROTOCOL, challenge.message, {
        responseSchema: attestAnswerSchema,
        timeoutMs: Math.max(1, challenge.message.cutoffAtMs - this.now()) + NETWORK_GRACE_MS,
        // One root and one GPU UUID per unit: up to 64 of each.
        maxMessageBytes: MAX_COMMIT_MESSAGE_BYTES,
      });
    } catch (error) {
      const receivedAtMs = this.now();
      options.onAnswer?.(false);
      const mapped = this.mapError(error, challenge, receivedAtMs);
      if (mapped === "unreachable") return unreachable(error);
      return mapped.kind === "outcome" ? finish(mapped.outcome) : failed(mapped.reason, mapped.detail);
    }
    // Stamped before anything else reads it: the measured throughput counts from issue to here.
    const commitAtMs = this.now();
    const answer = commit as { type: string; reason?: string; message?: string };
    options.onAnswer?.(answer.type === "commit");
    if (legacyV1MessageSchema.safeParse(commit).success) return this.deliver(peer, failed("malformed", `the provider answered in attest protocol v1: ${LEGACY_V1_MESSAGE}`));
    if (answer.type === "refused") {
      const refusal = challenge.onRefused(commit);
      // Busy (another attestor's challenge is running, or a requested one) is never the provider's
      // failure: anyone can make a machine busy by asking an attestor to challenge it. It is an
      // error, tried again at the next scan.
      if (answer.reason === "busy") return { ...finish(refusal), outcome: "error", reason: "busy", detail: answer.message ?? "busy" };
      // A signed refusal for a bound the attestor hit (issue 35 items 5, 8) is an error once it
      // checks out; one that does not is the provider's failure (`refused`).
      const signed = refusalMessageSchema.safeParse(commit);
      if (signed.success && isSignedRefusalReason(signed.data.reason)) {
        const wrong = await this.judgeRefusal(signed.data, challenge.message, claim.provider, claim.machineId);
        if (!wrong) return { ...finish(refusal), outcome: "error", reason: signed.data.reason, detail: signed.data.message };
        return this.deliver(peer, { ...finish(refusal), detail: `${signed.data.reason} refusal that does not check out: ${wrong}` });
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
    if (legacyV1MessageSchema.safeParse(rows).success) return this.deliver(peer, failed("malformed", `the provider answered in attest protocol v1: ${LEGACY_V1_MESSAGE}`));
    if ((rows as { type: string }).type === "refused") return this.deliver(peer, finish(challenge.onRefused(rows)));
    const outcome = await challenge.onOpen(rows, rowsAtMs);
    // A light pass is not delivered: there is no attestation to hand over, and the provider learns nothing it needs.
    if (outcome.outcome === "light_pass") return finish(outcome);
    if (outcome.outcome !== "pass" || !this.o.memory?.enabled) return this.deliver(peer, finish(outcome));
    // The memory phase, in the same session: the attestation signed above is handed over only if it passes too.
    const memory = await runMemoryPhase({
      host: this.o.host,
      peer,
      profile: this.o.memory.profile,
      domain: this.o.attestor.settings.domain,
      claim,
      challengeId: challenge.id,
      now: this.now,
    });
    // Unit by unit: the GPU that held unit u's buffer is the one that computed unit u's rows.
    const mismatch = memory.outcome === "pass" ? unitDeviceMismatch(outcome.commit.devices, memory.gpus) : undefined;
    if (memory.outcome === "pass" && mismatch === undefined) return this.deliver(peer, finish(outcome));
    const detail = memory.outcome === "fail" ? `${memory.reason}: ${memory.detail}` : `the memory phase named other GPUs than the GEMM commit (${mismatch})`;
    return this.deliver(peer, { ...finish(outcome), outcome: "fail", reason: "memory_phase", detail: detail.slice(0, 1_000), attestation: null });
  }

  /**
   * Why a signed refusal does not check out, or undefined when it does: the provider signed it; an
   * `out_of_bounds` challenge is out of bounds by its fields; an `attestor_share` names the
   * protocol's limit; a `lease_budget` claims no more of this attestor's time on the machine than
   * its own records show (its measure, connect to result, covers the provider's, accept to commit).
   */
  private async judgeRefusal(refusal: RefusalMessage, message: ChallengeMessage, provider: string, machineId: number): Promise<string | undefined> {
    const reason = refusal.reason;
    if (!isSignedRefusalReason(reason) || !refusal.usage || !refusal.signature) return "it is not signed";
    const signer = await recoverRefusalSigner(this.o.attestor.settings.domain, message.id, reason, refusal.usage, refusal.signature);
    if (!signer || getAddress(signer) !== getAddress(provider)) return "its signature is not the provider's";
    if (reason === "out_of_bounds") return challengeBoundsViolation(message) ? undefined : "the challenge is within the protocol's bounds";
    const { attestorMs, limitMs } = refusal.usage;
    if (attestorMs <= 0 || attestorMs < limitMs) return `it counts ${attestorMs} ms against a limit of ${limitMs} ms`;
    if (reason === "attestor_share") return limitMs === MAX_ATTESTOR_SLOT_MS ? undefined : `its limit ${limitMs} ms is not the protocol's ${MAX_ATTESTOR_SLOT_MS} ms`;
    const own = (await this.o.results.history(machineId, REFUSAL_HISTORY)).filter((record) => record.challengeId && record.provider.toLowerCase() === provider.toLowerCase());
    const ownMs = own.reduce((sum, record) => sum + Math.max(0, record.finishedAtMs - record.startedAtMs) + REFUSAL_SLACK_MS, 0);
    return attestorMs <= ownMs ? undefined : `it counts ${attestorMs} ms of this attestor's checks; its own records show ${ownMs} ms at most`;
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
        : {
            v: ATTEST_PROTOCOL_VERSION,
            type: "result",
            challengeId: record.challengeId,
            outcome: "fail",
            reason: (record.reason as FailureReason) ?? "malformed",
            detail: (record.detail ?? "").slice(0, 1_000),
          };
    try {
      await request(this.o.host, peer, ATTEST_PROTOCOL, message, { responseSchema: attestAnswerSchema, timeoutMs: 10_000, maxMessageBytes: MAX_CONTROL_MESSAGE_BYTES });
    } catch (error) {
      this.o.logger.warn("Could not deliver a challenge result to the provider", { machineId: record.machineId, outcome: record.outcome }, error);
    }
    return record;
  }
}

export function errorText(error: unknown): string {
  if (error instanceof SuanliError) return `${error.name}: ${error.shortMessage}`.slice(0, 1_000);
  return (error instanceof Error ? `${error.name}: ${error.message}` : String(error)).slice(0, 1_000);
}

/** Connects to the provider's node; returns why it cannot be reached, or undefined when connected. */
export async function connectTo(host: SuanliHost, target: Target): Promise<string | undefined> {
  const { peer } = target;
  if (host.getConnections(peer).length > 0) return undefined;
  const known = (await host.peerStore.get(peer).catch(() => undefined))?.addresses ?? [];
  if (!known.length) {
    return `no address known for the provider's node ${peer.toString()}: it has no offer in this attestor's offer book; connect this attestor to the provider's network (p2p.bootstrap)`;
  }
  try {
    await host.dial(peer, { signal: AbortSignal.timeout(CONNECT_TIMEOUT_MS) });
    return undefined;
  } catch (error) {
    return `cannot connect to the provider's node ${peer.toString()} at ${known.map((address) => address.multiaddr.toString()).join(", ")}: ${errorText(error)}`;
  }
}
