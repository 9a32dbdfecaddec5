import type { ValidatedOffer } from "../offers/validate.js";
import type { OfferKnowledge } from "./entry.js";

/** A provider's on-chain reputation counters (ProviderRegistry.getProvider). */
export type ReputationCounters = { leasesCompleted: bigint | number; faults: bigint | number; unitSecondsDelivered: bigint | number };

/**
 * What the matching engine needs to know about a validated offer beyond its message: the
 * attestation that counts under the quorum rule (issued at the newest of the counted attestors'
 * attestations, expiring when the offer falls below the quorum) and the provider's reputation.
 * Shared by the node's services and the SDK so both rank offers the same way.
 */
export function knowledgeFromValidated(offer: ValidatedOffer, reputation: ReputationCounters, latencyMs: number | null = null): OfferKnowledge {
  const { attestors, attestedUntil } = offer.attestation;
  let attestation: OfferKnowledge["attestation"] = null;
  if (attestedUntil !== null && attestors.length) {
    const counted = new Set(attestors.map((a) => a.toLowerCase()));
    // The signer of each attestation is known to the validator only; every carried attestation
    // of this machine is about the same hardware, so the newest issuedAt is the freshness.
    const issued = offer.message.attestations.map((signed) => signed.attestation.issuedAt);
    const attestedAt = issued.length ? Math.max(...issued) : 0;
    if (counted.size) attestation = { attestedAt: Math.min(attestedAt, attestedUntil), expiry: attestedUntil };
  }
  return {
    attestation,
    reputation: {
      leasesCompleted: Number(reputation.leasesCompleted),
      faults: Number(reputation.faults),
      unitSecondsDelivered: BigInt(reputation.unitSecondsDelivered),
    },
    latencyMs,
  };
}
