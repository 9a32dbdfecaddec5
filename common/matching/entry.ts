/**
 * What the matching engine indexes: one entry per live offer (one per provider machine), built
 * from a gossiped OfferMessage that the offer book has already verified, plus what the node
 * knows about it from elsewhere: the attestation state under the on-chain attestor quorum, the
 * provider's on-chain reputation counters and the latency the node measured to the provider.
 */
import type { Address, Hex } from "viem";
import { z } from "zod";
import type { Offer } from "../eip712.js";
import { ANY_RENTER } from "../eip712.js";
import { failuresAt, MAX_COUNTED_FAILURES } from "../attest/failure-notice.js";
import { SuanliError } from "../errors.js";
import { canonicalGpuName, modelHash } from "../gpu.js";
import type { HostResources, Interconnect, OfferMessage } from "../offers/message.js";
import { offerKey } from "../offers/message.js";
import { parseInput } from "../validation.js";

/** bytes32 zero: a machine that belongs to no cluster. */
export const NO_CLUSTER: Hex = "0x0000000000000000000000000000000000000000000000000000000000000000";

export type Reputation = {
  leasesCompleted: number;
  faults: number;
  unitSecondsDelivered: bigint;
};

export type OfferEntry = {
  /** `offerKey(provider, machineId, tier)`: the book key, one live offer per machine and tier. */
  readonly key: string;
  /** 0: the on-demand offer; 1..8: a reserved-term tier (a longer minimum duration, a lower price). */
  readonly tier: number;
  /** The message's sequence number; a newer one replaces the entry. */
  readonly seq: number;
  readonly provider: Address;
  readonly machineId: number;
  /** libp2p peer id and addresses for the reserve protocol. */
  readonly peerId: string;
  readonly addrs: readonly string[];
  /** The signed public offer (renter = 0) and its signature, as the LeaseMarket verifies them. */
  readonly offer: Offer;
  readonly signature: Hex;
  readonly machine: {
    /** Canonical model name (a MIG slice keeps its `/profile`). */
    readonly model: string;
    readonly units: number;
    /** Memory per unit, MiB. */
    readonly vramMiB: number;
    readonly interconnect: Interconnect;
    readonly region: string;
    /** Machines sharing a declared fast interconnect share this id; NO_CLUSTER when standalone. */
    readonly cluster: Hex;
  };
  /** CPU cores, memory and disk per unit the provider's node declares and enforces; null when it declares none. */
  readonly resources: HostResources | null;
  /** How long the provider keeps a lease's output after its task ends (the offer's `retention`); null when it states none. */
  readonly outputRetentionSeconds: number | null;
  /** How long it keeps a lease's checkpoints after its task ends (`retention.checkpointSeconds`); null when it states none (no checkpoints, or an older node). */
  readonly checkpointRetentionSeconds: number | null;
  readonly capacity: {
    /** Units with no lease. */
    readonly freeUnits: number;
    readonly onDemandUnits: number;
    /** Units held by interruptible leases (an on-demand lease, or a higher bid, may preempt them). */
    readonly interruptibleUnits: number;
    readonly lowestInterruptibleBid: bigint | null;
  };
  /** When the attestor quorum last attested this machine (unix s), or null if never. */
  readonly attestedAt: number | null;
  /** When that attestation expires (unix s), or null if never attested. */
  readonly attestationExpiry: number | null;
  /**
   * Until when the attestor quorum's attestations verified the machine's GPUs by their
   * confidential-computing evidence (unix s; docs/attestation.md), or null when they did not.
   */
  readonly ccExpiry: number | null;
  /**
   * The machine's signed failures within the failure window (failed challenges its attestations
   * carry and attestors' failure notices; common/attest/failure-notice.ts), as the time until which
   * each counts (unix s, ascending): the count the request's `maxAttestFailures` bounds is the
   * number still ahead at match time (attestFailuresAt), so failures age out without a new offer.
   */
  readonly attestFailuresUntil: readonly number[];
  /** The provider's on-chain reputation counters. */
  readonly reputation: Reputation;
  /** Round-trip latency this node measured to the provider, ms; null when unknown. */
  readonly latencyMs: number | null;
};

/** What the node knows about an offer beyond its message. */
export const offerKnowledgeSchema = z.strictObject({
  /** The attestation that counts under the quorum rule, or null when the machine has none. */
  attestation: z
    .strictObject({
      attestedAt: z.number().int().nonnegative(),
      expiry: z.number().int().nonnegative(),
      /** Until when a quorum of them verified the GPUs by confidential-computing evidence; absent when not. */
      ccExpiry: z.number().int().nonnegative().optional(),
    })
    .nullable(),
  reputation: z.strictObject({
    leasesCompleted: z.number().int().nonnegative(),
    faults: z.number().int().nonnegative(),
    unitSecondsDelivered: z.union([z.bigint().nonnegative(), z.number().int().nonnegative()]).transform((v) => BigInt(v)),
  }),
  latencyMs: z.number().nonnegative().max(600_000).nullable().default(null),
  /** Until when each of the machine's signed failures counts (OfferEntry.attestFailuresUntil), in any order. */
  attestFailuresUntil: z
    .array(z.number().int().nonnegative())
    .max(MAX_COUNTED_FAILURES)
    .default([])
    .transform((until) => [...until].sort((a, b) => a - b)),
});
export type OfferKnowledge = z.input<typeof offerKnowledgeSchema>;

/** The message cannot be indexed (private offer, model mismatch...). */
export class UnindexableOfferError extends SuanliError {
  override name = "UnindexableOfferError";
}

const hashCache = new Map<string, Hex>();
function cachedModelHash(name: string): Hex {
  let hash = hashCache.get(name);
  if (hash === undefined) {
    hash = modelHash(name);
    hashCache.set(name, hash);
  }
  return hash;
}

/**
 * Builds the engine's entry from a verified offer message and what the node knows about it.
 * The message's signatures are the offer book's business; this checks only what the engine
 * relies on: a public offer, a canonical model name that hashes to the offer's model, and a
 * capacity snapshot that fits the machine.
 *
 * @example
 * import { offerEntryFromMessage } from "suanli/common/matching";
 * const entry = offerEntryFromMessage(message, {
 *   attestation: { attestedAt: 1_700_000_000, expiry: 1_700_086_400 },
 *   reputation: { leasesCompleted: 12, faults: 0, unitSecondsDelivered: 86_400n },
 *   latencyMs: 35,
 * });
 * engine.upsert(entry);
 */
export function offerEntryFromMessage(message: OfferMessage, knowledge: OfferKnowledge): OfferEntry {
  const known = parseInput(offerKnowledgeSchema, knowledge, "offer knowledge");
  const { offer, machine, capacity } = message;
  const key = offerKey(offer.provider, offer.machineId, message.tier ?? 0);
  if (offer.renter !== ANY_RENTER) {
    throw new UnindexableOfferError(`Offer ${key} is bound to renter ${offer.renter}; only public offers are matched.`);
  }
  const canonical = canonicalGpuName(machine.model);
  if (canonical !== machine.model) {
    throw new UnindexableOfferError(`Offer ${key} declares model ${JSON.stringify(machine.model)}, which is not a canonical GPU name.`, {
      metaMessages: canonical ? [`The canonical spelling is ${canonical}.`] : undefined,
    });
  }
  if (cachedModelHash(machine.model) !== offer.model) {
    throw new UnindexableOfferError(`Offer ${key}: offer.model is not keccak256(${JSON.stringify(machine.model)}).`);
  }
  const held = capacity.freeUnits + capacity.onDemandUnits + capacity.interruptibleUnits;
  if (held > machine.units) {
    throw new UnindexableOfferError(`Offer ${key}: capacity snapshot accounts for ${held} units but the machine has ${machine.units}.`);
  }
  return {
    key,
    tier: message.tier ?? 0,
    seq: message.seq,
    provider: offer.provider,
    machineId: offer.machineId,
    peerId: message.peerId,
    addrs: message.addrs,
    offer,
    signature: message.signature,
    machine: {
      model: machine.model,
      units: machine.units,
      vramMiB: machine.vramMiB,
      interconnect: machine.interconnect,
      region: machine.region,
      cluster: machine.cluster,
    },
    resources: message.resources ?? null,
    outputRetentionSeconds: message.retention?.outputSeconds ?? null,
    checkpointRetentionSeconds: message.retention?.checkpointSeconds ?? null,
    capacity: {
      freeUnits: capacity.freeUnits,
      onDemandUnits: capacity.onDemandUnits,
      interruptibleUnits: capacity.interruptibleUnits,
      lowestInterruptibleBid: capacity.lowestInterruptibleBid,
    },
    attestedAt: known.attestation?.attestedAt ?? null,
    attestationExpiry: known.attestation?.expiry ?? null,
    ccExpiry: known.attestation?.ccExpiry ?? null,
    attestFailuresUntil: known.attestFailuresUntil,
    reputation: known.reputation,
    latencyMs: known.latencyMs,
  };
}

/** How many of an entry's signed failures still count at `now` (what `maxAttestFailures` bounds). */
export function attestFailuresAt(entry: Pick<OfferEntry, "attestFailuresUntil">, now: number): number {
  return failuresAt(entry.attestFailuresUntil, now);
}

/**
 * The reputation score in [0, 1] from on-chain counters: Laplace's rule of succession over
 * completed leases and faults, (completed + 1) / (completed + faults + 2). A provider with no
 * history scores 0.5; 99 completions and no fault score 0.99; as many faults as completions 0.5.
 */
export function reputationScore(reputation: Pick<Reputation, "leasesCompleted" | "faults">): number {
  return (reputation.leasesCompleted + 1) / (reputation.leasesCompleted + reputation.faults + 2);
}
