/**
 * Builders for matching tests: offer messages in the wire schema's output form (a test checks
 * that they pass offerMessageSchema; building them without parsing keeps property tests fast),
 * and the engine entries built from them with the real offerEntryFromMessage.
 */
import { type Address, getAddress } from "viem";
import { ANY_RENTER } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import { type OfferEntry, NO_CLUSTER, offerEntryFromMessage } from "../../common/matching/entry.js";
import { type OfferMessage, offerMessageSchema } from "../../common/offers/message.js";

export const NOW = 1_800_000_000;
export const SIGNATURE = `0x${"11".repeat(65)}` as const;

const addresses = new Map<number, Address>();
export function providerAddress(n: number): Address {
  let address = addresses.get(n);
  if (!address) {
    address = getAddress(`0x${n.toString(16).padStart(40, "0")}`);
    addresses.set(n, address);
  }
  return address;
}

const hashes = new Map<string, `0x${string}`>();
function cachedModelHash(model: string): `0x${string}` {
  let hash = hashes.get(model);
  if (!hash) {
    hash = modelHash(model);
    hashes.set(model, hash);
  }
  return hash;
}

export function clusterId(n: number): `0x${string}` {
  return `0x${n.toString(16).padStart(64, "0")}`;
}

export type OfferSpec = {
  provider?: number;
  machineId: number;
  model?: string;
  units?: number;
  vramMiB?: number;
  region?: string;
  cluster?: number;
  interconnect?: "none" | "nvlink" | "fabric";
  /** Base units per unit-second: 500 = 1.80 USD/GPU-h. */
  price?: number;
  minBid?: number;
  minDuration?: number;
  maxDuration?: number;
  expiry?: number;
  free?: number;
  onDemand?: number;
  interruptible?: number;
  lowestBid?: number | null;
  /** Attested at NOW - attestedAgo (default 3600) until NOW + 86400; null = never attested. */
  attestedAgo?: number | null;
  attestationExpiry?: number;
  /** Until when the quorum verified the GPUs by confidential-computing evidence (unix s); absent: not verified. */
  ccExpiry?: number;
  completed?: number;
  faults?: number;
  latencyMs?: number | null;
  seq?: number;
  /** CPU cores, memory and disk per unit the offer declares; absent: none declared. */
  resources?: { cpuCoresPerUnit: number; memoryMiBPerUnit: number; diskMiBPerUnit: number };
};

/** The wire (JSON) form of an offer message. */
export function offerWire(spec: OfferSpec) {
  const model = spec.model ?? "A100-80GB";
  const units = spec.units ?? 8;
  const provider = providerAddress(spec.provider ?? spec.machineId);
  const interruptible = spec.interruptible ?? 0;
  const onDemand = spec.onDemand ?? 0;
  return {
    v: 1 as const,
    offer: {
      provider,
      machineId: spec.machineId,
      model: cachedModelHash(model),
      pricePerUnitSecond: String(spec.price ?? 500),
      minBidPerUnitSecond: String(spec.minBid ?? 0),
      minDuration: spec.minDuration ?? 60,
      maxDuration: spec.maxDuration ?? 30 * 86_400,
      collateralBps: 1000,
      startWindow: 600,
      nonce: "1",
      expiry: spec.expiry ?? NOW + 7 * 86_400,
      renter: ANY_RENTER,
    },
    signature: SIGNATURE,
    machine: {
      model,
      units,
      vramMiB: spec.vramMiB ?? 81_920,
      interconnect: spec.interconnect ?? "nvlink",
      region: spec.region ?? "eu-west",
      cluster: spec.cluster ? clusterId(spec.cluster) : NO_CLUSTER,
    },
    capacity: {
      freeUnits: spec.free ?? units - onDemand - interruptible,
      onDemandUnits: onDemand,
      interruptibleUnits: interruptible,
      lowestInterruptibleBid: spec.lowestBid === undefined || spec.lowestBid === null ? null : String(spec.lowestBid),
    },
    attestations: [],
    peerId: `peer-${spec.provider ?? spec.machineId}`,
    addrs: ["/ip4/127.0.0.1/tcp/4001"],
    seq: spec.seq ?? 1,
    publishedAt: NOW - 10,
    ...(spec.resources ? { resources: spec.resources } : {}),
    // The engine indexes messages the offer book already verified; it never checks this field.
    peerSignature: `0x${"00".repeat(64)}`,
  };
}

/** The message as offerMessageSchema outputs it (bigints for amounts). */
export function offerMessage(spec: OfferSpec): OfferMessage {
  const wire = offerWire(spec);
  return {
    ...wire,
    v: 1,
    offer: {
      ...wire.offer,
      pricePerUnitSecond: BigInt(wire.offer.pricePerUnitSecond),
      minBidPerUnitSecond: BigInt(wire.offer.minBidPerUnitSecond),
      nonce: BigInt(wire.offer.nonce),
    },
    machine: { ...wire.machine, cluster: wire.machine.cluster },
    capacity: {
      ...wire.capacity,
      lowestInterruptibleBid: wire.capacity.lowestInterruptibleBid === null ? null : BigInt(wire.capacity.lowestInterruptibleBid),
    },
  };
}

/** The same message through the real schema (slow: checksums addresses). */
export function parsedOfferMessage(spec: OfferSpec): OfferMessage {
  return offerMessageSchema.parse(offerWire(spec));
}

export function entry(spec: OfferSpec): OfferEntry {
  const attestedAgo = spec.attestedAgo === undefined ? 3600 : spec.attestedAgo;
  return offerEntryFromMessage(offerMessage(spec), {
    attestation:
      attestedAgo === null
        ? null
        : { attestedAt: NOW - attestedAgo, expiry: spec.attestationExpiry ?? NOW + 86_400, ...(spec.ccExpiry !== undefined ? { ccExpiry: spec.ccExpiry } : {}) },
    reputation: { leasesCompleted: spec.completed ?? 20, faults: spec.faults ?? 0, unitSecondsDelivered: 1_000_000n },
    latencyMs: spec.latencyMs === undefined ? 50 : spec.latencyMs,
  });
}

/** A minimal on-demand request (input form), overridable. */
export function requestInput(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { gpuType: "A100", gpuCount: 1, duration: 3600, maxPricePerGpuHour: "3.60", ...overrides };
}
