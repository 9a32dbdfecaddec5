/**
 * Step 9 of offer validation (validate.ts): which of an offer's attestations count, and so until
 * when the offer is attested under the on-chain quorum, and the machine's signed failure count.
 * An attestation counts when it is about the offer's machine, within its class's throughput band,
 * unexpired (at most a day old), signed by a current attestor and not revoked by a later failure
 * notice of the same attestor (common/attest/failure-notice.ts).
 */
import type { Address } from "viem";
import { MAX_ATTESTATION_AGE_SECONDS } from "../attest/attestation.js";
import { NO_CC } from "../attest/cc.js";
import { failuresAt, isRevoked, machineFailures, type FailureNoticeIndex } from "../attest/failure-notice.js";
import type { ThroughputBand } from "../attest/params.js";
import type { ChainView } from "./chain-view.js";
import type { OfferMessage, SignedAttestation } from "./message.js";

/** Unexpired attestations by non-attestors a message may carry before it is refused. */
export const MAX_OUTSIDER_ATTESTATIONS = 2;

/** The attestation state of an offer: attested while `attestors.length` meets the quorum and `attestedUntil` is ahead. */
export type AttestationState = {
  /** Distinct attestors whose valid, unexpired attestation the message carries. */
  attestors: Address[];
  /** When enough of them expire for the offer to fall below the quorum; null if it never met it. */
  attestedUntil: number | null;
  /**
   * The oldest `issuedAt` among the quorum of attestations that keeps the offer attested until
   * `attestedUntil` (how fresh the weakest evidence is); null when the quorum is not met. Absent
   * in book entries stored before it existed.
   */
  attestedAt?: number | null;
  /**
   * Until when a quorum of distinct attestors' counted attestations verified the GPUs by their
   * confidential-computing evidence (`cc` not zero; docs/attestation.md); null when fewer did.
   * Absent in book entries stored before it existed.
   */
  ccUntil?: number | null;
  /**
   * The machine's signed failure count within the failure window when the state was computed
   * (attestations' `failures` and failure notices). Absent: 0. It ages: see `failuresUntil`.
   */
  failures?: number;
  /**
   * Until when each of those failures counts (unix s, ascending; machineFailures): matching counts
   * the ones still ahead at match time, so failures age out without a new offer. Absent: none
   * (or a state stored before it existed: then `failures` counts until re-validation).
   */
  failuresUntil?: number[];
  /** The latest of those failures (unix s); absent with none. */
  lastFailureAt?: number;
  /** Attestors whose attestations a later failure notice of theirs revoked (absent: none). */
  revokedBy?: Address[];
};

export type AttestationStateDeps = {
  chain: ChainView;
  /** The recovered signer of an attestation (cached by the validator), undefined when none. */
  signerOf: (signed: SignedAttestation) => Address | undefined;
  /** The throughput band of a class, when one is known. */
  band: (model: string, units: number) => ThroughputBand | undefined;
  /** The failure notices this node holds; without them nothing is revoked. */
  notices?: FailureNoticeIndex | undefined;
};

/** Computes the attestation state of a message at `now`, or the reason to refuse the message. */
export async function attestationStateOf(
  message: OfferMessage,
  now: number,
  deps: AttestationStateDeps,
): Promise<AttestationState | { reason: "bad_attestation"; detail: string }> {
  const { offer, machine } = message;
  const notices = deps.notices?.ofMachine(offer.provider, offer.machineId, now);
  // Per attestor, the one attestation that counts: its newest (latest issuedAt, then latest expiry), and with it
  // whether it verified the GPUs (cc): an older attestation's cc does not outlive the attestor's newer word.
  const newest = new Map<Address, { issuedAt: number; expiry: number; cc: boolean; failures: number; lastFailureAt: number }>();
  const revokedBy = new Set<Address>();
  let outsiders = 0;
  for (const [index, signed] of message.attestations.entries()) {
    const { attestation } = signed;
    if (
      attestation.provider !== offer.provider ||
      attestation.machineId !== offer.machineId ||
      attestation.model !== offer.model ||
      attestation.units !== machine.units ||
      attestation.vramMiB !== machine.vramMiB
    ) {
      return { reason: "bad_attestation", detail: `attestations.${index} is about another machine` };
    }
    const signer = deps.signerOf(signed);
    if (!signer) return { reason: "bad_attestation", detail: `attestations.${index} signature recovers to no key` };
    // The throughput band of the class (issue 24, item 2): a measurement above what the claimed
    // class can physically do, or below what an honest runner of it reaches, is not evidence of
    // that class. It does not count, and is not punished (the attestor signed it, not the provider).
    const band = deps.band(machine.model, machine.units);
    if (band && (attestation.throughput > band.ceiling || attestation.throughput < band.floor)) continue;
    // Neither an expired attestation nor one by an address outside the attestor set (never
    // one, or one that governance removed since) counts; neither is punished, so removing an
    // attestor un-attests nobody whom the remaining attestors still vouch for. Expiry first:
    // it costs no chain read. Counted until the earlier of its expiry and a day after its issue.
    const countsUntil = Math.min(attestation.expiry, attestation.issuedAt + MAX_ATTESTATION_AGE_SECONDS);
    if (countsUntil <= now) continue;
    if (!(await deps.chain.isAttestor(signer))) {
      // One or two are old news (removed attestors); more are a provider making every node
      // look up made-up keys.
      if (++outsiders > MAX_OUTSIDER_ATTESTATIONS) {
        return { reason: "bad_attestation", detail: `more than ${MAX_OUTSIDER_ATTESTATIONS} attestations by addresses that are not attestors` };
      }
      continue;
    }
    // Issued before a failure its own attestor announced since: revoked (issue 35 item 9). Not
    // the provider's offence to punish: the notice already costs it the attestation.
    if (isRevoked(notices, signer, attestation.issuedAt)) {
      revokedBy.add(signer);
      continue;
    }
    const held = newest.get(signer);
    if (!held || attestation.issuedAt > held.issuedAt || (attestation.issuedAt === held.issuedAt && countsUntil > held.expiry)) {
      newest.set(signer, {
        issuedAt: attestation.issuedAt,
        expiry: countsUntil,
        cc: attestation.cc !== NO_CC,
        failures: attestation.failures,
        lastFailureAt: attestation.lastFailureAt,
      });
    }
  }
  const quorum = Math.max(1, await deps.chain.attestationQuorum());
  // Newest first by expiry: the offer stays attested until the quorum-th latest expiry passes.
  const sorted = [...newest.values()].sort((a, b) => b.expiry - a.expiry);
  const met = sorted.length >= quorum;
  const ccExpiries = sorted.filter((a) => a.cc).map((a) => a.expiry);
  const counted = machineFailures(notices, newest, now);
  const failures = failuresAt(counted.until, now);
  return {
    attestors: [...newest.keys()],
    attestedUntil: met ? sorted[quorum - 1]!.expiry : null,
    attestedAt: met ? Math.min(...sorted.slice(0, quorum).map((a) => a.issuedAt)) : null,
    // The same quorum rule over the attestations that verified the GPUs.
    ccUntil: ccExpiries.length >= quorum ? ccExpiries[quorum - 1]! : null,
    ...(failures > 0 ? { failures, failuresUntil: counted.until, ...(counted.lastAt !== null ? { lastFailureAt: counted.lastAt } : {}) } : {}),
    ...(revokedBy.size > 0 ? { revokedBy: [...revokedBy] } : {}),
  };
}

/**
 * Until when each of the machine's failures counts, from a state (`failuresUntil`); a state stored
 * before that field existed counts its `failures` until `fallbackUntil` (its next re-validation).
 */
export function failuresUntilOf(state: Pick<AttestationState, "failures" | "failuresUntil">, fallbackUntil = Number.MAX_SAFE_INTEGER): number[] {
  if (state.failuresUntil) return state.failuresUntil;
  return Array.from({ length: state.failures ?? 0 }, () => fallbackUntil);
}
