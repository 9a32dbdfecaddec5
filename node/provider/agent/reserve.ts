/**
 * The provider's side of the reserve protocol (`/suanli/reserve/1.0.0`): a renter asks to hold
 * units of a machine for a lease; the provider checks the signed request and its own capacity,
 * holds the units, writes the hold to level and answers with an Offer bound to the renter
 * (single-use on-chain, expiring with the hold), plus the interruptible leases the lease must
 * preempt when the free units do not suffice. It never holds more than it has.
 */
import { isDiskFull } from "../../store/store.js";
import { LRUCache } from "lru-cache";
import { erc20Abi, getAddress, recoverTypedDataAddress, type Address, type Chain, type PublicClient, type Transport, type TypedDataDomain } from "viem";
import { computeCollateral, computeDeposit, readMachine, readProvider } from "../../../common/chain/market.js";
import type { Deployment } from "../../../common/deployment.js";
import { suanliDomain, suanliTypes, type Offer } from "../../../common/eip712.js";
import { modelHash } from "../../../common/gpu.js";
import { signOffer, type LocalSigner } from "../../../common/chain/sign.js";
import { RENTER_REQUEST_MAX_AGE_SECONDS, type ReserveBody, type ReserveReply } from "../../../common/protocols/lease.js";
import type { RefusalReason } from "../../../common/matching/handshake.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { ProviderOptions } from "../options.js";
import type { HoldThrottle } from "./hold-throttle.js";
import type { SealingKey } from "../../../common/sealed.js";
import { SessionDelegationError } from "../../../common/sessions.js";
import type { DelegationVerifier } from "../../sessions/delegations.js";
import type { MachineMarket } from "./offers.js";
import type { LeaseRecord } from "./records.js";
import type { ReservationBook } from "./reservations.js";

/** At most this many leases in one `terms.preempt` (the contract's MAX_PREEMPT). */
const MAX_PREEMPT = 16;
const UINT96_MAX = 2n ** 96n - 1n;
/**
 * Balances and the provider's free stake are read at most this often per key: a burst of reserve
 * requests costs a chain read or two, not two per request. The contract checks both again when
 * the lease opens, so a reading this old only decides whether a hold is worth making.
 */
const CHAIN_READ_TTL_MS = 2_000;

/** Short-lived, de-duplicated chain reads (concurrent requests share one read). */
export class ChainReadCache {
  private readonly entries = new LRUCache<string, Promise<unknown>>({ max: 10_000, ttl: CHAIN_READ_TTL_MS });
  /** Chain reads actually sent (for tests and metrics). */
  reads = 0;

  get<T>(key: string, read: () => Promise<T>): Promise<T> {
    const cached = this.entries.get(key) as Promise<T> | undefined;
    if (cached) return cached;
    this.reads++;
    const pending = read();
    this.entries.set(key, pending);
    pending.catch(() => this.entries.delete(key));
    return pending;
  }
}

export type ReserveContext = {
  deployment: Deployment;
  domain: TypedDataDomain;
  market: Address;
  registry: Address;
  /** Checks reserve requests signed by a renter's session key (body.delegation). */
  delegations?: DelegationVerifier;
  /** The provider's wallet: signs the renter-bound offers. */
  account: LocalSigner;
  publicClient: PublicClient<Transport, Chain>;
  machines: MachineMarket;
  reservations: ReservationBook;
  /** The provider's running leases (for the preemption list). */
  leases: () => LeaseRecord[];
  options: ProviderOptions;
  metrics: Metrics;
  logger: Logger;
  /** The chain's clock, unix seconds (offers expire in chain time). */
  chainNow: () => Promise<number>;
  /** Wallets and peers whose holds keep expiring unopened. */
  throttle: HoldThrottle;
  reads: ChainReadCache;
  /** Unix ms. */
  now?: () => number;
  /** The current sealing key (it rotates), sent with every acceptance: renters seal secret env values to it. */
  sealingKey?: () => SealingKey;
};

function refuse(reason: RefusalReason, message: string, availableUnits?: number): ReserveReply {
  return { accepted: false, reason, message, ...(availableUnits === undefined ? {} : { availableUnits }) };
}

/**
 * Leases on the machine the opener may free, in the order the contract should try them: leases
 * past their end first (finalizing them costs nobody anything), then interruptible leases by
 * ascending price. An interruptible opener may only preempt lower bids.
 */
export function preemptionCandidates(leases: readonly LeaseRecord[], machineId: number, opener: { interruptible: boolean; bid: bigint }, nowSeconds: number): LeaseRecord[] {
  const running = leases.filter((lease) => lease.machineId === machineId && (lease.chain.status === "Open" || lease.chain.status === "Active"));
  const expired = running.filter((lease) => lease.chain.status === "Active" && lease.chain.end > 0 && lease.chain.end <= nowSeconds);
  const preemptible = running
    .filter((lease) => !expired.includes(lease) && lease.interruptible && (!opener.interruptible || lease.pricePerUnitSecond < opener.bid))
    .sort((a, b) => (a.pricePerUnitSecond < b.pricePerUnitSecond ? -1 : a.pricePerUnitSecond > b.pricePerUnitSecond ? 1 : Number(a.leaseId - b.leaseId)));
  return [...expired, ...preemptible].slice(0, MAX_PREEMPT);
}

/** Answers one reserve request (the protocol layer has parsed it with reserveBodySchema). */
export async function answerReserve(ctx: ReserveContext, body: ReserveBody, peer?: string): Promise<ReserveReply> {
  const reply = await decide(ctx, body, peer);
  ctx.metrics.providerReservations.inc({ outcome: reply.accepted ? "accepted" : reply.reason });
  ctx.logger.debug("Reserve request answered", {
    renter: body.request.renter,
    machineId: body.request.machineId,
    units: body.request.units,
    accepted: reply.accepted,
    reason: reply.accepted ? undefined : reply.reason,
  });
  return reply;
}

async function decide(ctx: ReserveContext, body: ReserveBody, peer: string | undefined): Promise<ReserveReply> {
  const { request, signature } = body;
  const { options, machines, reservations } = ctx;
  const nowMs = ctx.now?.() ?? Date.now();
  const nowSeconds = Math.floor(nowMs / 1000);
  const provider = getAddress(ctx.account.address);

  if (body.chainId !== ctx.deployment.chainId) return refuse("invalid-request", `This provider serves chain ${ctx.deployment.chainId}, not ${body.chainId}`);
  if (getAddress(request.provider) !== provider) return refuse("invalid-request", `The request is for provider ${request.provider}; this is ${provider}`);
  if (Math.abs(nowSeconds - request.issuedAt) > RENTER_REQUEST_MAX_AGE_SECONDS) {
    return refuse("invalid-request", `The request was issued at ${request.issuedAt}, more than ${RENTER_REQUEST_MAX_AGE_SECONDS} s from this node's clock (${nowSeconds})`);
  }
  // Holds that expired since the last look count against their wallet and peer now.
  reservations.collectUnopened();
  const throttled = ctx.throttle.refusal(request.renter, peer);
  if (throttled) return refuse("busy", throttled);
  if (reservations.isNonceUsed(request.nonce)) return refuse("invalid-request", "The request's nonce was already used: sign a fresh request");
  let signer: Address;
  try {
    signer = await recoverTypedDataAddress({ domain: ctx.domain, types: suanliTypes, primaryType: "ReserveRequest", message: request, signature });
  } catch {
    return refuse("invalid-request", "The request's signature cannot be read");
  }
  if (body.delegation) {
    // Signed by a session key: the renter is whoever delegated "reserve" to it; the chain is asked
    // (revocation, a smart account's approval) only once that renter is the request's.
    if (!ctx.delegations) return refuse("invalid-request", "This provider accepts no session keys: sign the request with the renter's wallet");
    try {
      const pending = await ctx.delegations.local(body.delegation, { requestSigner: signer, action: "reserve", leaseId: undefined });
      if (getAddress(pending.renter) !== getAddress(request.renter)) {
        return refuse("invalid-request", `The request's delegation is from ${pending.renter}, not from the renter ${request.renter}`);
      }
      await ctx.delegations.confirm(pending);
      signer = pending.renter;
    } catch (error) {
      if (error instanceof SessionDelegationError) return refuse("invalid-request", error.shortMessage);
      throw error;
    }
  }
  if (getAddress(signer) !== getAddress(request.renter)) return refuse("invalid-request", `The request is signed by ${signer}, not by the renter ${request.renter}`);
  // Check and mark in one synchronous step, before any await: of concurrent copies of one signed
  // request exactly one gets past here (the replay race of issue #23).
  if (!reservations.claimNonce(request.nonce, (request.issuedAt + 2 * RENTER_REQUEST_MAX_AGE_SECONDS) * 1000)) {
    return refuse("invalid-request", "The request's nonce was already used: sign a fresh request");
  }

  const machine = machines.machine(request.machineId);
  // The terms of the reserved-term tier the duration qualifies for (on-demand when none).
  const terms = machines.terms(request.machineId, request.duration);
  if (!machine || !terms) return refuse("offer-withdrawn", `Machine ${request.machineId} is not sold by this provider`);
  if (request.duration < terms.minDuration || request.duration > terms.maxDuration) {
    return refuse("duration-out-of-range", `Duration ${request.duration} s is outside ${terms.minDuration}..${terms.maxDuration} s`);
  }
  let price = terms.pricePerUnitSecond;
  if (request.interruptible) {
    if (terms.minBidPerUnitSecond === 0n) return refuse("offer-withdrawn", `Machine ${request.machineId} sells no interruptible capacity`);
    if (request.bidPerUnitSecond < terms.minBidPerUnitSecond) {
      return refuse("price-changed", `The bid ${request.bidPerUnitSecond} is below the minimum of ${terms.minBidPerUnitSecond} per unit-second`);
    }
    price = request.bidPerUnitSecond;
  }
  if (request.units > machine.units) return refuse("insufficient-units", `Machine ${request.machineId} has ${machine.units} units`, machine.units);
  if (reservations.live().length >= options.reserve.maxHolds) return refuse("busy", "Too many reservations in flight; try again shortly or another provider");
  const capRefusal = holdCapRefusal(ctx, request.renter, peer);
  if (capRefusal) return capRefusal;

  const deposit = computeDeposit(request.units, price, request.duration);
  if (deposit > UINT96_MAX) return refuse("duration-out-of-range", "The deposit for this duration does not fit the contract's amounts");
  const collateral = computeCollateral(deposit, terms.collateralBps);
  const renter = getAddress(request.renter);
  const [balance, providerView] = await Promise.all([
    ctx.reads.get(`balance:${renter}`, () => ctx.publicClient.readContract({ address: ctx.deployment.contracts.token, abi: erc20Abi, functionName: "balanceOf", args: [renter] })),
    ctx.reads.get("provider", () => readProvider(ctx.publicClient, ctx.registry, provider)),
  ]);
  const fundsRefusal = unfundedRefusal(ctx, renter, balance, deposit);
  if (fundsRefusal) return fundsRefusal;
  if (BigInt(providerView.free) < reservations.pendingCollateral() + collateral) {
    return refuse("busy", "This provider's free stake cannot cover the collateral of another lease right now");
  }

  // The contract checks the offer's expiry against block time, which may run ahead of this
  // node's clock (a devnet mines a block per transaction): the offer expires in chain time, and
  // the hold lasts until the chain gets there.
  if (request.units > reservations.table.available(request.machineId, false)) {
    // Our counts follow the chain's events a poll behind: a lease that just ended may have freed
    // units we do not know about yet. Read them before saying no.
    const view = await readMachine(ctx.publicClient, ctx.registry, request.machineId);
    machines.setChainCapacity(request.machineId, { onDemand: view.onDemandUnits, interruptible: view.interruptibleUnits, idle: view.idleUnits });
  }
  const chainNow = await ctx.chainNow();
  const holdUntil = chainNow + options.reserve.holdSeconds;

  // Synchronous from here to the hold: concurrent requests see each other's holds. The renter's
  // caps are checked again here: its other requests may have taken holds while we awaited.
  const again = holdCapRefusal(ctx, request.renter, peer) ?? unfundedRefusal(ctx, renter, balance, deposit);
  if (again) return again;
  const table = reservations.table;
  const freeRoom = table.available(request.machineId, false);
  let preempt = false;
  let candidates: LeaseRecord[] = [];
  if (request.units > freeRoom) {
    candidates = preemptionCandidates(ctx.leases(), request.machineId, { interruptible: request.interruptible, bid: price }, chainNow);
    const eligibleUnits = candidates.reduce((sum, lease) => sum + lease.units, 0);
    preempt = request.units - freeRoom <= Math.min(eligibleUnits, table.available(request.machineId, true) - freeRoom);
    if (!preempt) return refuse("insufficient-units", `${freeRoom} units of machine ${request.machineId} are free now`, freeRoom);
  }
  const offerNonce = reservations.allocateOfferNonce();
  const holdId = offerNonce.toString();
  // The hold lasts as long as the offer it signs: holdUntil is in chain time, the table counts on
  // this host's clock, so the span is measured on the chain's (a chain minutes behind the wall
  // clock once made every hold a 1 s one: the units went to the next renter while the first could
  // still open its lease).
  const ttlMs = Math.min(3_600_000, Math.max(1_000, (holdUntil + 1 - chainNow) * 1000));
  const held = table.hold({ id: holdId, machineId: request.machineId, units: request.units, preempt, renter: request.renter, ttlMs });
  if (!held.ok) return refuse("insufficient-units", `${held.available} units of machine ${request.machineId} can be held now`, held.available);
  reservations.addTerms({
    holdId,
    reserveNonce: request.nonce,
    renter: request.renter,
    peer,
    machineId: request.machineId,
    units: request.units,
    duration: request.duration,
    interruptible: request.interruptible,
    pricePerUnitSecond: price,
    deposit,
    collateral,
    expiresAt: held.hold.expiresAt,
  });

  const offer: Offer = {
    provider,
    machineId: request.machineId,
    model: modelHash(machine.model),
    pricePerUnitSecond: terms.pricePerUnitSecond,
    minBidPerUnitSecond: terms.minBidPerUnitSecond,
    minDuration: terms.minDuration,
    maxDuration: terms.maxDuration,
    collateralBps: terms.collateralBps,
    startWindow: terms.startWindow,
    nonce: offerNonce,
    expiry: holdUntil,
    renter: getAddress(request.renter),
  };
  try {
    // The hold, its terms, the used nonce and the nonce counter reach the disk before the answer.
    await reservations.persist();
  } catch (error) {
    reservations.release(holdId);
    // Nothing promised that the node could forget: the renter is told plainly and goes elsewhere.
    if (isDiskFull(error)) return refuse("busy", "This provider cannot record a reservation right now (its data dir's disk is full); try again later or another provider");
    throw error;
  }
  const offerSignature = await signOffer(ctx.account, suanliDomain(ctx.deployment.chainId, ctx.market), offer);
  machines.markDirty(request.machineId);
  return {
    accepted: true,
    offer,
    signature: offerSignature,
    units: request.units,
    holdUntil,
    preempt: held.hold.fromPreemptible > 0 ? candidates.map((lease) => lease.leaseId.toString()) : [],
    ...(ctx.sealingKey ? { sealingKey: ctx.sealingKey() } : {}),
  };
}

/** The renter's (or its peer's) live holds are at their cap: a refusal, or undefined. */
function holdCapRefusal(ctx: ReserveContext, renter: Address, peer: string | undefined): ReserveReply | undefined {
  const { maxHoldsPerRenter, maxHoldsPerPeer } = ctx.options.reserve;
  const mine = ctx.reservations.holdsOfRenter(renter);
  if (mine.count >= maxHoldsPerRenter) {
    return refuse("busy", `Renter ${renter} already holds ${mine.count} reservations here (at most ${maxHoldsPerRenter}): open a lease with one, or let one expire`);
  }
  if (peer && ctx.reservations.holdsOfPeer(peer) >= maxHoldsPerPeer) {
    return refuse("busy", `Peer ${peer} already holds ${maxHoldsPerPeer} reservations here: open leases with them, or let them expire`);
  }
  return undefined;
}

/** The renter's balance cannot cover this deposit on top of the deposits of its live holds here. */
function unfundedRefusal(ctx: ReserveContext, renter: Address, balance: bigint, deposit: bigint): ReserveReply | undefined {
  const held = ctx.reservations.holdsOfRenter(renter);
  if (balance >= held.deposits + deposit) return undefined;
  const promised = held.count > 0 ? `, and ${held.deposits} of it is promised to its ${held.count} live holds here` : "";
  return refuse("renter-unfunded", `The deposit is ${deposit} base units; the renter holds ${balance}${promised}`);
}
