/**
 * An in-process market for allocation tests: providers with a real ReservationTable answering
 * reserve requests after a delay, a gossip layer that delivers their republished offers to
 * every renter's engine after a delay, and a fake chain that, like the LeaseMarket, is the
 * arbiter of capacity (never leases a unit twice) and holds deposits in escrow.
 * Delays come from a seeded generator; with real timers the interleaving still varies from run
 * to run, so the tests assert invariants that hold for every interleaving.
 */
import type { Address } from "viem";
import type { Acceptance, CandidatePart, MatchRequest, MatchingEngine, OfferEntry, ReserveReply } from "../../common/matching/index.js";
import { ReservationTable, depositFor } from "../../common/matching/index.js";
import { NOW, type OfferSpec, SIGNATURE, entry } from "./matching-fixtures.js";

/** mulberry32: a tiny seeded PRNG. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export type Lease = { id: number; renter: Address; key: string; machineId: number; units: number; deposit: bigint; status: "open" | "closed" };

export class FakeChain {
  readonly free = new Map<string, number>();
  readonly units = new Map<string, number>();
  readonly balances = new Map<string, bigint>();
  readonly leases: Lease[] = [];
  readonly usedNonces = new Set<string>();
  escrow = 0n;
  openCalls = 0;
  private readonly opened = new Set<(acceptance: Acceptance, lease: Lease) => void>();

  constructor(
    private readonly random: () => number = () => 1,
    /** Every n-th open transaction fails before changing anything (0: none). */
    private readonly failEvery = 0,
  ) {}

  addMachine(key: string, units: number, free: number): void {
    this.units.set(key, units);
    this.free.set(key, free);
  }

  fund(renter: Address, amount: bigint): void {
    this.balances.set(renter, (this.balances.get(renter) ?? 0n) + amount);
  }

  onLeaseOpened(listener: (acceptance: Acceptance, lease: Lease) => void): void {
    this.opened.add(listener);
  }

  /** openLease: checks like the contract, then moves the deposit and takes the units, atomically. */
  async open(renter: Address, acceptance: Acceptance, request: MatchRequest, key: string): Promise<Lease> {
    const call = ++this.openCalls;
    await sleep(Math.floor(this.random() * 3));
    if (this.failEvery > 0 && call % this.failEvery === 0) throw new Error("transaction reverted: simulated RPC failure");
    const offer = acceptance.offer;
    if (offer.renter !== renter) throw new Error("OfferNotForRenter");
    if (offer.expiry <= NOW) throw new Error("OfferExpired");
    const nonceKey = `${offer.provider}:${offer.nonce}`;
    if (this.usedNonces.has(nonceKey)) throw new Error("NonceUsed");
    const free = this.free.get(key) ?? 0;
    if (free < acceptance.units) throw new Error(`InsufficientUnits(${free}, ${acceptance.units})`);
    const deposit = depositFor(request, offer, acceptance.units);
    const balance = this.balances.get(renter) ?? 0n;
    if (balance < deposit) throw new Error("InsufficientBalance");
    this.usedNonces.add(nonceKey);
    this.balances.set(renter, balance - deposit);
    this.escrow += deposit;
    this.free.set(key, free - acceptance.units);
    const lease: Lease = { id: this.leases.length + 1, renter, key, machineId: offer.machineId, units: acceptance.units, deposit, status: "open" };
    this.leases.push(lease);
    for (const listener of this.opened) listener(acceptance, lease);
    return lease;
  }

  /** close of an Open lease: full refund, units back. */
  async close(renter: Address, leaseId: number): Promise<void> {
    const lease = this.leases[leaseId - 1];
    if (!lease || lease.renter !== renter || lease.status !== "open") throw new Error("NotClosable");
    lease.status = "closed";
    this.escrow -= lease.deposit;
    this.balances.set(renter, (this.balances.get(renter) ?? 0n) + lease.deposit);
    this.free.set(lease.key, (this.free.get(lease.key) ?? 0) + lease.units);
  }
}

export type ProviderBehaviour = {
  /** Never answers reserve requests (the allocator must time out). */
  silent?: boolean;
  /** Refuses every n-th reserve request with "busy", whatever its capacity. */
  refuseEvery?: number;
};

/**
 * A provider with machines, a reservation table and a gossip function that republishes each
 * machine's offer with its currently reservable units and a new seq.
 */
export class FakeProvider {
  readonly table = new ReservationTable({ ttlMs: 60_000 });
  readonly specs = new Map<number, OfferSpec>();
  private readonly seqs = new Map<number, number>();
  private nonce = 0;
  private requests = 0;
  /** Holds that ever exceeded the free units the table had (must stay 0). */
  violations = 0;

  constructor(
    readonly index: number,
    private readonly chain: FakeChain,
    private readonly gossip: (offer: OfferEntry) => void,
    private readonly random: () => number,
    private readonly behaviour: ProviderBehaviour = {},
  ) {
    chain.onLeaseOpened((acceptance) => {
      if (acceptance.offer.provider !== this.address) return;
      this.table.commit(String(acceptance.offer.nonce));
      this.publish(acceptance.offer.machineId);
    });
  }

  get address(): Address {
    return entry({ provider: this.index, machineId: 1 }).provider;
  }

  addMachine(spec: OfferSpec): void {
    const units = spec.units ?? 8;
    const free = spec.free ?? units;
    this.specs.set(spec.machineId, { ...spec, provider: this.index });
    this.table.setCapacity(spec.machineId, { freeUnits: free });
    this.chain.addMachine(entry({ ...spec, provider: this.index }).key, units, free);
    this.publish(spec.machineId);
  }

  publish(machineId: number): void {
    const spec = this.specs.get(machineId)!;
    const seq = (this.seqs.get(machineId) ?? 0) + 1;
    this.seqs.set(machineId, seq);
    const units = spec.units ?? 8;
    const free = this.table.available(machineId);
    this.gossip(entry({ ...spec, provider: this.index, free, onDemand: units - free, seq }));
  }

  async reserve(part: CandidatePart, request: MatchRequest, renter: Address, signal: AbortSignal): Promise<ReserveReply> {
    if (this.behaviour.silent) {
      return new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
    }
    await sleep(Math.floor(this.random() * 3));
    const every = this.behaviour.refuseEvery ?? 0;
    if (every > 0 && ++this.requests % every === 0) return { accepted: false, reason: "busy", message: "too many reservations in flight" };
    const machineId = part.entry.machineId;
    const id = String(++this.nonce);
    const held = this.table.hold({ id, machineId, units: part.units, renter });
    if (!held.ok) return { accepted: false, reason: "insufficient-units", availableUnits: held.available };
    const heldUnits = this.table.holds(machineId).reduce((n, h) => n + h.units, 0);
    if (heldUnits > this.table.capacity(machineId)!.freeUnits) this.violations++;
    this.publish(machineId);
    const offer = { ...part.entry.offer, renter, nonce: BigInt(id), expiry: NOW + 120 };
    return { accepted: true, offer, signature: SIGNATURE, units: part.units, holdUntil: NOW + 60, preempt: [] };
  }

  release(acceptance: Acceptance): void {
    if (this.table.release(String(acceptance.offer.nonce))) this.publish(acceptance.offer.machineId);
  }
}

/** Delivers each published entry to every engine after its own random delay (gossip is not instant). */
export function delayedGossip(engines: MatchingEngine[], random: () => number, maxDelayMs: number) {
  const pending = new Set<Promise<void>>();
  const gossip = (e: OfferEntry) => {
    for (const engine of engines) {
      const delivery = sleep(Math.floor(random() * (maxDelayMs + 1))).then(() => {
        engine.upsert(e);
        pending.delete(delivery);
      });
      pending.add(delivery);
    }
  };
  const settled = async () => {
    while (pending.size > 0) await Promise.all([...pending]);
  };
  return { gossip, settled };
}
