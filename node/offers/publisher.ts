/**
 * The provider side of the offers topic: keeps one offer per machine announced. An offer is
 * published when it changes (terms, capacity, attestations, addresses) and re-announced on an
 * interval so that peers that missed it, and its expiry, stay current. Every publication takes
 * the next sequence number of its machine, written to level before the message leaves, so a
 * restarted provider always continues above what the network holds.
 */
import type { SealingKey } from "../../common/sealed.js";
import type { PrivateKey } from "@libp2p/interface";
import type { Address } from "viem";
import { z } from "zod";
import { signOffer, type LocalSigner } from "../../common/chain/sign.js";
import { ANY_RENTER, suanliDomain, type Offer } from "../../common/eip712.js";
import { InvalidInputError } from "../../common/errors.js";
import { canonicalGpuName, knownGpuNames, modelHash } from "../../common/gpu.js";
import { stringifyPlain } from "../../common/json.js";
import { MAX_OFFER_TIER, dataRetentionSchema, hostResourcesSchema, interconnectSchema, offerKey, signedAttestationSchema, type OfferMessage } from "../../common/offers/message.js";
import { leaseChecksSchema } from "../../common/attest/lease-checks.js";
import { signOfferMessage } from "../../common/offers/sign.js";
import { bytes32Schema } from "../../common/schemas.js";
import { parseInput } from "../../common/validation.js";
import type { Logger } from "../log/logger.js";
import type { Metrics } from "../metrics/metrics.js";
import { Bucket } from "../store/buckets.js";
import type { Repository, Store } from "../store/store.js";
import type { OffersGossip } from "./gossip.js";
import { runDetached } from "../../common/detached.js";

const uint = (max: number) => z.number().int().min(0).max(max);
const amount = z
  .union([z.bigint(), z.string().regex(/^\d{1,29}$/), z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)])
  .transform((value) => BigInt(value))
  .refine((value) => value < 2n ** 96n, { message: "must fit in uint96" });

/** What the provider agent says about one machine; the publisher turns it into signed messages. */
export const machineOfferSchema = z.strictObject({
  /** 0: the machine's on-demand offer; 1..8: a reserved-term tier published beside it (its own key). */
  tier: z.number().int().min(0).max(MAX_OFFER_TIER).default(0),
  machine: z.strictObject({
    machineId: uint(2 ** 32 - 1).min(1),
    model: z
      .string()
      .min(1)
      .max(64)
      .refine((value) => canonicalGpuName(value) === value, { message: `expected a canonical GPU model name (${knownGpuNames().join(", ")})` }),
    units: uint(65_535).min(1),
    vramMiB: uint(2 ** 32 - 1),
    interconnect: interconnectSchema,
    region: z.string().min(1).max(32),
    cluster: bytes32Schema,
  }),
  terms: z.strictObject({
    pricePerUnitSecond: amount,
    /** 0: the machine sells no interruptible capacity. */
    minBidPerUnitSecond: amount.default(0n),
    minDuration: uint(2 ** 32 - 1),
    maxDuration: uint(2 ** 32 - 1),
    collateralBps: uint(65_535),
    startWindow: uint(2 ** 32 - 1),
    /** The revocation nonce (revokeNonce / revokeNoncesBelow on-chain kill offers carrying it). */
    nonce: z
      .union([z.bigint(), z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)])
      .transform((value) => BigInt(value))
      .default(0n),
  }),
  capacity: z.strictObject({
    freeUnits: uint(65_535),
    onDemandUnits: uint(65_535).default(0),
    interruptibleUnits: uint(65_535).default(0),
    lowestInterruptibleBid: amount.nullable().default(null),
  }),
  attestations: z.array(signedAttestationSchema).max(8).default([]),
  /** The in-lease checks announced with the offer (docs/attestation.md, "In-lease checks"); absent: the default share. */
  leaseChecks: leaseChecksSchema.optional(),
  /** CPU cores, memory and disk per unit the runtime enforces (node/provider/runtime/host-resources.ts); absent: none declared. */
  resources: hostResourcesSchema.optional(),
  /** How long the provider keeps a lease's output after its task ends (provider.outputs.retentionSeconds); absent: not stated. */
  retention: dataRetentionSchema.optional(),
});
export type MachineOffer = z.output<typeof machineOfferSchema>;
export type MachineOfferInput = z.input<typeof machineOfferSchema>;

type MachineState = {
  input: MachineOffer;
  fingerprint: string;
  signed?: { offer: Offer; signature: `0x${string}`; termsFingerprint: string };
  last?: OfferMessage;
  withdrawn: boolean;
};

export type OfferPublisherOptions = {
  gossip: OffersGossip;
  store: Store;
  /** The provider's wallet: signs the EIP-712 Offers. */
  account: LocalSigner;
  /** The node's libp2p key: signs the messages. Its peer id is the one registered on-chain. */
  peerKey: PrivateKey;
  peerId: string;
  chainId: number;
  market: Address;
  /** The node's dialable addresses, as announced in each message. */
  addrs: () => string[];
  /** The seq the local book holds for a book key (after a sync it may be ahead of ours). */
  heldSeq?: (key: string) => number | undefined;
  /** Lifetime of a signed Offer; it is re-signed when less than half remains. */
  ttlSec: number;
  reannounceIntervalMs: number;
  metrics: Metrics;
  logger: Logger;
  now?: () => number;
};

/**
 * @example
 * const publisher = new OfferPublisher({ gossip, store, account, peerKey, peerId, chainId, market,
 *   addrs: () => host.getMultiaddrs().map(String), ttlSec: 3_600, reannounceIntervalMs: 30_000, metrics, logger });
 * await publisher.start();
 * await publisher.set({ machine, terms, capacity: { freeUnits: 8 } });
 */
export class OfferPublisher {
  /** By `<machineId>:<tier>`. */
  private readonly machines = new Map<string, MachineState>();
  private readonly seqs: Repository<number>;
  private queue: Promise<unknown> = Promise.resolve();
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly now: () => number;

  /** The provider's signed sealing key, published with every offer once set (setSealingKey). */
  private sealingKey: SealingKey | undefined;

  constructor(private readonly options: OfferPublisherOptions) {
    this.seqs = options.store.repository<number>(Bucket.offerSeq);
    this.now = options.now ?? (() => Math.floor(Date.now() / 1000));
  }

  /**
   * Publishes the provider's sealing key (signed by its wallet) with its offers from now on, so
   * renters can seal secrets to it before reserving; offers already out carry it from their next
   * announcement.
   */
  setSealingKey(key: SealingKey): void {
    this.sealingKey = key;
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      runDetached(this.reannounce(), this.options.logger, "Re-announcing the offers");
    }, this.options.reannounceIntervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.queue.catch(() => undefined);
  }

  /**
   * Sets the offer of one machine and publishes it if anything changed. Returns the message
   * published, or undefined when nothing changed. Throws InvalidInputError for a bad offer and
   * OfferRejectedError when the network would refuse it (unregistered, under-staked, ...).
   */
  async set(input: MachineOfferInput): Promise<OfferMessage | undefined> {
    const offer = parseInput(machineOfferSchema, input, "machine offer");
    if (offer.terms.minDuration > offer.terms.maxDuration) {
      throw parseInputError("terms.minDuration", "must not exceed terms.maxDuration");
    }
    if (offer.capacity.freeUnits > offer.machine.units) {
      throw parseInputError("capacity.freeUnits", `must not exceed machine.units (${offer.machine.units})`);
    }
    return this.serialize(async () => {
      const fingerprint = stringifyPlain(offer) + stringifyPlain(this.options.addrs());
      const id = stateKey(offer.machine.machineId, offer.tier);
      const state = this.machines.get(id);
      if (state && !state.withdrawn && state.fingerprint === fingerprint) return undefined;
      const next: MachineState = { ...state, input: offer, fingerprint, withdrawn: false };
      this.machines.set(id, next);
      return this.publish(next, "change");
    });
  }

  /**
   * Stops offering a machine: announces it with no free units (so books stop matching it at
   * once) and stops re-announcing it, so it expires everywhere. Without `tier`, every offer of
   * the machine (on-demand and tiers); with it, that one. Returns the on-demand offer's message.
   */
  withdraw(machineId: number, tier?: number): Promise<OfferMessage | undefined> {
    return this.serialize(async () => {
      let result: OfferMessage | undefined;
      for (const state of this.machines.values()) {
        if (state.input.machine.machineId !== machineId || (tier !== undefined && state.input.tier !== tier) || state.withdrawn) continue;
        state.input = { ...state.input, capacity: { ...state.input.capacity, freeUnits: 0 } };
        state.fingerprint = "";
        state.withdrawn = true;
        const message = await this.publish(state, "withdraw");
        if (state.input.tier === 0) result = message;
      }
      return result;
    });
  }

  /** The last message published for a machine (its on-demand offer, or a tier's). */
  current(machineId: number, tier = 0): OfferMessage | undefined {
    return this.machines.get(stateKey(machineId, tier))?.last;
  }

  /** The tiers (1..8) with a live offer of a machine. */
  liveTiers(machineId: number): number[] {
    return [...this.machines.values()].filter((state) => state.input.machine.machineId === machineId && state.input.tier > 0 && !state.withdrawn).map((state) => state.input.tier);
  }

  /** Publishes every offered machine again (called on the interval). */
  reannounce(): Promise<void> {
    return this.serialize(async () => {
      for (const state of this.machines.values()) {
        if (state.withdrawn) continue;
        try {
          // Addresses can change (a new listen address, an announce change): re-fingerprint.
          state.fingerprint = stringifyPlain(state.input) + stringifyPlain(this.options.addrs());
          await this.publish(state, "interval");
        } catch (error) {
          this.options.logger.warn("Cannot re-announce an offer", { machineId: state.input.machine.machineId }, error);
        }
      }
    });
  }

  private serialize<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async nextSeq(machineId: number, tier: number): Promise<number> {
    // One counter per machine for all its offers (on-demand and tiers): each key's seqs increase.
    const last = (await this.seqs.get(String(machineId))) ?? 0;
    // A data dir restored from a backup may be behind what the network (and so our synced book)
    // holds for this machine: continue above both.
    const held = this.options.heldSeq?.(offerKey(this.options.account.address, machineId, tier)) ?? 0;
    const seq = Math.max(last, held) + 1;
    // Persisted before the message exists: a crash right after still never reuses this number.
    await this.seqs.put(String(machineId), seq);
    return seq;
  }

  private async publish(state: MachineState, trigger: "change" | "interval" | "withdraw"): Promise<OfferMessage> {
    const { machine, terms, capacity, attestations } = state.input;
    const now = this.now();
    const termsFingerprint = stringifyPlain(terms);
    if (!state.signed || state.signed.termsFingerprint !== termsFingerprint || state.signed.offer.expiry - now < this.options.ttlSec / 2) {
      const offer: Offer = {
        provider: this.options.account.address,
        machineId: machine.machineId,
        model: modelHash(machine.model),
        pricePerUnitSecond: terms.pricePerUnitSecond,
        minBidPerUnitSecond: terms.minBidPerUnitSecond,
        minDuration: terms.minDuration,
        maxDuration: terms.maxDuration,
        collateralBps: terms.collateralBps,
        startWindow: terms.startWindow,
        nonce: terms.nonce,
        expiry: now + this.options.ttlSec,
        renter: ANY_RENTER,
      };
      const signature = await signOffer(this.options.account, suanliDomain(this.options.chainId, this.options.market), offer);
      state.signed = { offer, signature, termsFingerprint };
    }
    const seq = await this.nextSeq(machine.machineId, state.input.tier);
    const message = await signOfferMessage(
      {
        v: 1,
        offer: state.signed.offer,
        signature: state.signed.signature,
        machine: {
          model: machine.model,
          units: machine.units,
          vramMiB: machine.vramMiB,
          interconnect: machine.interconnect,
          region: machine.region,
          cluster: machine.cluster,
        },
        capacity,
        attestations,
        peerId: this.options.peerId,
        addrs: this.options.addrs().slice(0, 8),
        seq,
        publishedAt: now,
        ...(state.input.tier > 0 ? { tier: state.input.tier } : {}),
        ...(this.sealingKey ? { sealingKey: this.sealingKey } : {}),
        ...(state.input.leaseChecks ? { leaseChecks: state.input.leaseChecks } : {}),
        ...(state.input.resources ? { resources: state.input.resources } : {}),
        ...(state.input.retention ? { retention: state.input.retention } : {}),
      },
      this.options.peerKey,
    );
    await this.options.gossip.publish(message);
    state.last = message;
    this.options.metrics.offersPublished.inc({ trigger });
    this.options.logger.debug("Offer published", { machineId: machine.machineId, tier: state.input.tier, seq, trigger });
    return message;
  }
}

function stateKey(machineId: number, tier: number): string {
  return `${machineId}:${tier}`;
}

function parseInputError(path: string, message: string): InvalidInputError {
  return new InvalidInputError("machine offer", [{ path, message }]);
}
