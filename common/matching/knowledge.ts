import { engineAttestation, type ValidatedOffer } from "../offers/validate.js";
import type { OfferKnowledge } from "./entry.js";

/** A provider's on-chain reputation counters (ProviderRegistry.getProvider). */
export type ReputationCounters = { leasesCompleted: bigint | number; faults: bigint | number; unitSecondsDelivered: bigint | number };

/**
 * What the matching engine needs to know about a validated offer beyond its message: the
 * attestation that counts under the quorum rule (engineAttestation) and the provider's
 * reputation. Used by the SDK's feed so it ranks offers the way a node does.
 */
export function knowledgeFromValidated(offer: ValidatedOffer, reputation: ReputationCounters, now: number, latencyMs: number | null = null): OfferKnowledge {
  return {
    attestation: engineAttestation(offer.attestation, now),
    reputation: {
      leasesCompleted: Number(reputation.leasesCompleted),
      faults: Number(reputation.faults),
      unitSecondsDelivered: BigInt(reputation.unitSecondsDelivered),
    },
    latencyMs,
  };
}
