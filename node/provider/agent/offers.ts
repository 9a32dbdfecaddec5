/**
 * The provider's machines as a market: what each machine sells (terms from the config), what it
 * has free (the chain's counts less the units held for renters), and its offer on the gossip
 * topic, republished whenever one of those changes and withdrawn when the machine must not be
 * sold.
 */
import type { HostResources, SignedAttestation } from "../../../common/offers/message.js";
import type { ReservationTable } from "../../../common/matching/reservations.js";
import type { Logger } from "../../log/logger.js";
import { OfferRejectedError } from "../../offers/gossip.js";
import type { OfferPublisher } from "../../offers/publisher.js";
import { minBidForModel, priceForModel, type ProviderOptions } from "../options.js";
import type { PublishedPrice } from "../pricing/policy.js";
import type { DeclaredMachine } from "./setup.js";
import { runDetached } from "../../../common/detached.js";

/** A machine's units by mode, as the registry counts them. */
export type ChainCapacity = { onDemand: number; interruptible: number; idle: number };

export type MachineTerms = {
  /** 0: on-demand; 1..8: the reserved-term tier (provider.terms.tiers[tier - 1]) these terms are of. */
  tier: number;
  pricePerUnitSecond: bigint;
  /** Zero: no interruptible capacity. */
  minBidPerUnitSecond: bigint;
  minDuration: number;
  maxDuration: number;
  collateralBps: number;
  startWindow: number;
};

export type MachineMarketOptions = {
  machines: readonly DeclaredMachine[];
  table: ReservationTable;
  publisher: OfferPublisher;
  options: ProviderOptions;
  tokenDecimals: number;
  /** The price a model sells at now (the pricing engine); without it, the configured prices. */
  prices?: (model: string) => PublishedPrice | undefined;
  /** The idle earnings floor of a model (the pricing engine): tier discounts never go under it. */
  floor?: (model: string) => bigint | null;
  /** Lowest bid among the machine's running interruptible leases. */
  lowestBid: (machineId: number) => bigint | null;
  /** CPU cores, memory and disk per unit the runtime enforces, declared in every offer; absent: none. */
  resources?: HostResources;
  /** How long a lease's checkpoints stay after its task ends (data.checkpointRetentionSeconds); absent: this node's tasks cannot checkpoint. */
  checkpointRetentionSeconds?: number;
  logger: Logger;
};

export class MachineMarket {
  private readonly machines = new Map<number, DeclaredMachine>();
  private readonly capacity = new Map<number, ChainCapacity>();
  /** Units the chain counts free that a running task still holds (its lease shrank): not sold yet. */
  private readonly draining = new Map<number, number>();
  private readonly attestations = new Map<number, SignedAttestation[]>();
  private readonly dirty = new Set<number>();
  private scheduled: NodeJS.Immediate | undefined;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly ctx: MachineMarketOptions) {
    for (const machine of ctx.machines) this.machines.set(machine.machineId, machine);
  }

  machine(machineId: number): DeclaredMachine | undefined {
    return this.machines.get(machineId);
  }

  all(): DeclaredMachine[] {
    return [...this.machines.values()];
  }

  /**
   * The terms a machine is sold on, or undefined when it is not sold (no price, declaration
   * blocked). With a duration: the terms of the longest reserved-term tier that duration
   * qualifies for (the cheapest), else the on-demand terms.
   */
  terms(machineId: number, duration?: number): MachineTerms | undefined {
    const base = this.baseTerms(machineId);
    if (!base || duration === undefined) return base;
    const tiers = this.tierTerms(machineId, base);
    for (let i = tiers.length - 1; i >= 0; i--) {
      if (duration >= tiers[i]!.minDuration && duration <= tiers[i]!.maxDuration) return { ...tiers[i]!, minBidPerUnitSecond: base.minBidPerUnitSecond };
    }
    return base;
  }

  /**
   * The reserved-term tiers of a machine as offers: the tier's minimum duration, its maximum, the
   * price less the tier's discount (never under the idle earnings floor), and no interruptible
   * capacity (interruptible leases bid on the on-demand offer).
   */
  tierTerms(machineId: number, base = this.baseTerms(machineId)): MachineTerms[] {
    const machine = this.machines.get(machineId);
    if (!base || !machine) return [];
    const { terms } = this.ctx.options;
    const floor = this.ctx.floor?.(machine.model) ?? null;
    return terms.tiers.map((tier, i) => {
      const discounted = (base.pricePerUnitSecond * BigInt(10_000 - tier.discountBps)) / 10_000n;
      const price = discounted < 1n ? 1n : floor !== null && discounted < floor ? floor : discounted;
      return {
        ...base,
        tier: i + 1,
        pricePerUnitSecond: price,
        minBidPerUnitSecond: 0n,
        minDuration: tier.minDurationSeconds,
        maxDuration: tier.maxDurationSeconds ?? terms.maxDurationSeconds,
      };
    });
  }

  private baseTerms(machineId: number): MachineTerms | undefined {
    const machine = this.machines.get(machineId);
    if (!machine || machine.blocked) return undefined;
    const { options, tokenDecimals } = this.ctx;
    const priced = this.ctx.prices
      ? this.ctx.prices(machine.model)
      : priceForModel(options, machine.model, tokenDecimals) === undefined
        ? undefined
        : { pricePerUnitSecond: priceForModel(options, machine.model, tokenDecimals)!, minBidPerUnitSecond: minBidForModel(options, machine.model, tokenDecimals) ?? 0n };
    if (priced === undefined) return undefined;
    return {
      tier: 0,
      pricePerUnitSecond: priced.pricePerUnitSecond,
      minBidPerUnitSecond: priced.minBidPerUnitSecond,
      minDuration: options.terms.minDurationSeconds,
      maxDuration: options.terms.maxDurationSeconds,
      collateralBps: options.terms.collateralBps,
      startWindow: options.terms.startWindowSeconds,
    };
  }

  /** Units of a model under lease (on-demand + interruptible, as the chain counts them) and in all. */
  usage(model: string): { usedUnits: number; totalUnits: number } {
    let usedUnits = 0;
    let totalUnits = 0;
    for (const machine of this.machines.values()) {
      if (machine.model !== model || machine.blocked) continue;
      totalUnits += machine.units;
      const capacity = this.capacity.get(machine.machineId);
      if (capacity) usedUnits += capacity.onDemand + capacity.interruptible;
    }
    return { usedUnits, totalUnits };
  }

  /** Republishes the offers of every machine of a model (its price changed). */
  markModelDirty(model: string): void {
    for (const machine of this.machines.values()) if (machine.model === model) this.markDirty(machine.machineId);
  }

  chainCapacity(machineId: number): ChainCapacity | undefined {
    return this.capacity.get(machineId);
  }

  /** Records the registry's counts (a CapacityChanged event or a read) and the reservation table's room. */
  setChainCapacity(machineId: number, capacity: ChainCapacity): void {
    if (!this.machines.has(machineId)) return;
    this.capacity.set(machineId, capacity);
    const freeUnits = Math.max(0, capacity.idle - (this.draining.get(machineId) ?? 0));
    const dropped = this.ctx.table.setCapacity(machineId, { freeUnits, preemptibleUnits: Math.max(0, capacity.interruptible) });
    if (dropped.length > 0) this.ctx.logger.info("Reservations dropped: the machine's free units shrank under them", { machineId, holds: dropped.map((hold) => hold.id) });
    this.markDirty(machineId);
  }

  /**
   * Units of a machine that running tasks still hold though their leases released them on-chain
   * (shrink): neither offered nor reserved until those tasks end.
   */
  setDraining(machineId: number, units: number): void {
    if ((this.draining.get(machineId) ?? 0) === units) return;
    if (units > 0) this.draining.set(machineId, units);
    else this.draining.delete(machineId);
    const capacity = this.capacity.get(machineId);
    if (capacity) this.setChainCapacity(machineId, capacity);
  }

  /** The hardware attestations published with a machine's offer (from the attestor). */
  setAttestations(machineId: number, attestations: readonly SignedAttestation[]): void {
    if (!this.machines.has(machineId)) return;
    this.attestations.set(machineId, attestations.slice(0, 8));
    this.markDirty(machineId);
  }

  /** Republishes a machine's offer (all machines without an id) soon; changes coalesce. */
  markDirty(machineId?: number): void {
    if (this.closed) return;
    if (machineId === undefined) for (const id of this.machines.keys()) this.dirty.add(id);
    else this.dirty.add(machineId);
    if (this.scheduled) return;
    this.scheduled = setImmediate(() => {
      this.scheduled = undefined;
      runDetached(this.flush(), this.ctx.logger, "Publishing the offers");
    });
  }

  /** Publishes every pending change; resolves when they are out. */
  flush(): Promise<void> {
    const run = this.chain.then(async () => {
      const ids = [...this.dirty];
      this.dirty.clear();
      for (const id of ids) await this.publish(id);
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** Withdraws every offer and stops publishing (the node is stopping). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.scheduled) clearImmediate(this.scheduled);
    await this.chain;
    for (const id of this.machines.keys()) {
      await this.ctx.publisher.withdraw(id).catch((error: unknown) => this.ctx.logger.warn("Cannot withdraw an offer", { machineId: id }, error));
    }
  }

  private async publish(machineId: number): Promise<void> {
    const machine = this.machines.get(machineId)!;
    const terms = this.terms(machineId);
    const capacity = this.capacity.get(machineId);
    const { publisher, table, logger } = this.ctx;
    try {
      if (!terms || !capacity) {
        await publisher.withdraw(machineId);
        return;
      }
      const { tier: _tier, ...onDemand } = terms;
      const offerOf = (tier: number, tierTerms: Omit<MachineTerms, "tier">) => ({
        tier,
        machine: {
          machineId,
          model: machine.model,
          units: machine.units,
          vramMiB: machine.vramMiB,
          interconnect: machine.interconnect,
          region: machine.region,
          cluster: machine.cluster,
        },
        terms: { ...tierTerms, nonce: 0n },
        capacity: {
          freeUnits: Math.min(machine.units, table.available(machineId, false)),
          onDemandUnits: capacity.onDemand,
          interruptibleUnits: capacity.interruptible,
          lowestInterruptibleBid: this.ctx.lowestBid(machineId),
        },
        attestations: this.attestations.get(machineId) ?? [],
        leaseChecks: { shareBps: this.ctx.options.terms.leaseCheckShareBps },
        ...(this.ctx.resources ? { resources: this.ctx.resources } : {}),
        retention: {
          outputSeconds: this.ctx.options.outputs.retentionSeconds,
          ...(this.ctx.checkpointRetentionSeconds !== undefined ? { checkpointSeconds: this.ctx.checkpointRetentionSeconds } : {}),
        },
      });
      await publisher.set(offerOf(0, onDemand));
      // Reserved terms: one signed offer per tier, with the same free units.
      const tiers = this.tierTerms(machineId, terms);
      for (const { tier, ...tierTerms } of tiers) await publisher.set(offerOf(tier, tierTerms));
      for (const stale of publisher.liveTiers(machineId)) if (stale > tiers.length) await publisher.withdraw(machineId, stale);
    } catch (error) {
      if (error instanceof OfferRejectedError && error.reason === "bad_attestation" && (this.attestations.get(machineId)?.length ?? 0) > 0) {
        // One bad attestation would keep the whole offer off the network: sell without them.
        logger.warn("Attestations refused; offering the machine without them", { machineId, detail: error.details });
        this.attestations.delete(machineId);
        return this.publish(machineId);
      }
      // The network would refuse it (stake below the collateral, a stale chain view): the next
      // change or re-announcement tries again.
      logger.warn("Cannot publish an offer", { machineId }, error);
    }
  }
}
