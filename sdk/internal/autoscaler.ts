/**
 * The scaling loop of deployEndpoint (docs/endpoints.md "Autoscaling"). Each tick: read every
 * replica's lease (one that ended leaves the record), read the gateway's stats (requests in flight
 * over the live records), add a replica while the load per replica stays above target or below
 * `min`, release one when one fewer would do for long enough, register a new signed record when
 * the set changed, and retire superseded records: deleted at the gateway once their requests in
 * flight are done (or after the drain time), and only then the leases they released closed.
 */
import { readLease } from "../../common/chain/market.js";
import { formatUsd, perHour } from "../../common/matching/money.js";
import { cancelTask } from "../actions/cancelTask.js";
import { createEndpoint, deleteEndpoint, getEndpointStats } from "../actions/endpoints.js";
import { submitTask } from "../actions/submitTask.js";
import type { SubmitTaskParameters } from "../types.js";
import type { SuanliContext } from "./context.js";

/**
 * One replica the autoscaler rented: its task, lease, provider, what it costs an hour and what its
 * lease escrowed when rented (token base units).
 *
 * @example
 * import type { AutoscaledReplica } from "suanli/sdk";
 * const replicas: AutoscaledReplica[] = deployed.replicas();
 * console.log(replicas.map((r) => `${r.taskId} on ${r.provider}`));
 */
export type AutoscaledReplica = { taskId: string; leaseId: bigint; provider: `0x${string}`; interruptible: boolean; perHour: bigint; deposit: bigint };

/**
 * What the autoscaler tells `onEvent`:
 * - `endpoint`: a new record is registered (its id and URL are the handle's from now on; a token is per id);
 * - `replica-added`: a lease rented (`reason`: `min` to reach replicas.min, `load`, `replace` after one ended);
 * - `replica-ended`: a replica's lease ended by itself (`endReason`: Preempted, Faulted, Expired...): out of the record;
 * - `replica-removed`: a replica released for low load (or by stop): out of the record, then its lease closed (`refunded`, base units);
 * - `spend-capped`: a replica was wanted but would pass maxSpendPerHour (nothing rented; told once until the replica set changes);
 * - `error`: a step failed (the loop goes on and tries again next tick).
 *
 * @example
 * import type { AutoscalerEvent } from "suanli/sdk";
 * const log = (event: AutoscalerEvent) => event.type === "endpoint" && console.log(`now at ${event.url}`);
 */
export type AutoscalerEvent =
  | { type: "endpoint"; endpointId: string; url: string; leaseIds: bigint[] }
  | { type: "replica-added"; reason: "min" | "load" | "replace"; replica: AutoscaledReplica; replicas: number }
  | { type: "replica-ended"; replica: AutoscaledReplica; endReason: string; replicas: number }
  | { type: "replica-removed"; reason: "load" | "stop"; replica: AutoscaledReplica; refunded: bigint }
  | { type: "spend-capped"; reason: "min" | "load" | "replace"; spendPerHour: bigint; replicaPerHour: bigint; maxSpendPerHour: bigint }
  | { type: "error"; step: string; error: unknown };

export type AutoscalerOptions = {
  gatewayUrl: string;
  task: SubmitTaskParameters;
  port: number;
  healthPath: string;
  public: boolean;
  ttlSeconds: number;
  min: number;
  max: number;
  targetConcurrency: number;
  scaleUpAfterMs: number;
  scaleDownAfterMs: number;
  intervalMs: number;
  drainMs: number;
  maxSpendPerHour: bigint;
  /** A replica not rented yet, counted at the task's price cap (base units an hour). */
  replicaCapPerHour: bigint;
  onEvent?: (event: AutoscalerEvent) => void;
};

/** A record registered at the gateway: its id, URL, leases, and since when it is in its present role (ms). */
type RegisteredRecord = { endpointId: string; url: string; leaseIds: bigint[]; since: number };

/** What a record's stats say this tick: requests in flight, replicas ready; null once the gateway has it no more. */
type RecordLoad = { inFlight: number; ready: number } | null;

export class Autoscaler {
  private live: AutoscaledReplica[] = [];
  /** Taken out of the set: each lease is closed once no record at the gateway names it. */
  private releasing: AutoscaledReplica[] = [];
  /** Registered over the present set, not serving yet: the handle moves to it once its replicas are ready (the gateway checks a new record's replicas afresh). */
  private next: RegisteredRecord | undefined;
  /** Superseded: deleted once their requests in flight are done (or after the drain time). */
  private retiring: RegisteredRecord[] = [];
  private dirty = true;
  /** Whether the spend cap refused a replica since the set last changed (it is told once, not every tick). */
  private capped = false;
  /** A replica ended and the set is below `min` until one is rented in its place. */
  private replacing = false;
  private aboveSince: number | undefined;
  private belowSince: number | undefined;
  private stopped = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private running: Promise<void> = Promise.resolve();
  /** The record the handle names (serving). */
  current: RegisteredRecord = { endpointId: "", url: "", leaseIds: [], since: 0 };

  constructor(
    private readonly ctx: SuanliContext,
    private readonly options: AutoscalerOptions,
  ) {}

  replicas(): AutoscaledReplica[] {
    return this.live.map((replica) => ({ ...replica }));
  }

  private emit(event: AutoscalerEvent): void {
    try {
      this.options.onEvent?.(event);
    } catch {
      // A listener's failure is its own; the loop goes on.
    }
  }

  /** Rents `min` replicas and registers the first record; on a failure closes what it rented and throws. */
  async start(): Promise<void> {
    try {
      while (this.live.length < this.options.min) {
        if (!(await this.add("min"))) throw new Error("unreachable: the spend cap was checked against replicas.min");
      }
      await this.register();
      this.promote();
    } catch (error) {
      await this.closeAll(this.live, "stop");
      this.live = [];
      throw error;
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick().finally(() => this.schedule());
    }, this.options.intervalMs);
  }

  /** Rents one replica unless it would pass the spend cap (then says so and returns false). */
  private async add(reason: "min" | "load" | "replace"): Promise<boolean> {
    const spend = this.live.reduce((sum, replica) => sum + replica.perHour, 0n);
    const { maxSpendPerHour, replicaCapPerHour } = this.options;
    if (spend + replicaCapPerHour > maxSpendPerHour) {
      if (this.capped) return false;
      this.capped = true;
      this.ctx.progress(
        `Autoscaler: not renting a replica (${reason}): ${formatUsd(spend)} USD/h now + up to ${formatUsd(replicaCapPerHour)} USD/h would pass the cap of ${formatUsd(maxSpendPerHour)} USD/h`,
      );
      this.emit({ type: "spend-capped", reason, spendPerHour: spend, replicaPerHour: replicaCapPerHour, maxSpendPerHour });
      return false;
    }
    const submitted = await submitTask(this.ctx, this.options.task);
    const { attempt } = submitted;
    const replica: AutoscaledReplica = {
      taskId: submitted.taskId,
      leaseId: submitted.leaseId,
      provider: submitted.provider,
      interruptible: attempt.interruptible,
      perHour: perHour(attempt.pricePerUnitSecond) * BigInt(attempt.units),
      deposit: attempt.deposit,
    };
    this.live.push(replica);
    this.dirty = true;
    this.ctx.progress(`Autoscaler: rented replica ${replica.taskId} (lease ${replica.leaseId}, ${reason}); ${this.live.length} replica(s)`);
    this.emit({ type: "replica-added", reason, replica, replicas: this.live.length });
    return true;
  }

  /** Registers a record over the live replicas as `next` (one registered before it that never served retires at once). */
  private async register(): Promise<void> {
    const created = await createEndpoint(this.ctx, {
      gatewayUrl: this.options.gatewayUrl,
      taskIds: this.live.map((replica) => replica.taskId),
      port: this.options.port,
      healthPath: this.options.healthPath || undefined,
      public: this.options.public,
      ttlSeconds: this.options.ttlSeconds,
    });
    if (this.next) this.retiring.push({ ...this.next, since: Date.now() });
    this.next = { endpointId: created.endpointId, url: created.url, leaseIds: [...created.endpoint.leaseIds], since: Date.now() };
    this.dirty = false;
    this.capped = false;
  }

  /** `next` serves from now on: the handle names it, and the record before it retires. */
  private promote(): void {
    const next = this.next!;
    if (this.current.endpointId) this.retiring.push({ ...this.current, since: Date.now() });
    this.current = { ...next, since: Date.now() };
    this.next = undefined;
    this.ctx.progress(`Autoscaler: endpoint ${next.endpointId} over ${next.leaseIds.length} replica(s): ${next.url}`);
    this.emit({ type: "endpoint", endpointId: next.endpointId, url: next.url, leaseIds: [...next.leaseIds] });
  }

  private async recordLoad(endpointId: string): Promise<RecordLoad> {
    try {
      const stats = await getEndpointStats(this.options.gatewayUrl, endpointId);
      return {
        inFlight: stats.replicas.reduce((sum, replica) => sum + replica.outstanding, 0),
        ready: stats.replicas.filter((replica) => replica.state === "ready").length,
      };
    } catch (error) {
      if (error instanceof Error && /\(404\b/.test(error.message)) return null;
      throw error;
    }
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.step();
    } catch (error) {
      this.ctx.progress(`Autoscaler: ${error instanceof Error ? error.message : String(error)}`);
      this.emit({ type: "error", step: "tick", error });
    }
  }

  private async step(): Promise<void> {
    const now = Date.now();
    const { min, max, targetConcurrency } = this.options;
    for (const replica of [...this.live]) {
      const lease = await readLease(this.ctx.publicClient, this.ctx.market, replica.leaseId);
      if (lease.status === "Open" || lease.status === "Active") continue;
      this.live = this.live.filter((r) => r !== replica);
      this.dirty = true;
      this.replacing = true;
      this.ctx.progress(`Autoscaler: replica ${replica.taskId} ended (${lease.endReason}); out of the endpoint`);
      this.emit({ type: "replica-ended", replica, endReason: lease.endReason, replicas: this.live.length });
    }
    const retiring = [...this.retiring];
    const next = this.next;
    const [current, nextLoad, ...retiringLoad] = await Promise.all([this.current, next, ...retiring].map((record) => (record ? this.recordLoad(record.endpointId) : null)));
    // A replica that cannot be rented (no offer matches, the chain refuses) fails the tick after the set as it stands is registered.
    let failure: unknown;
    try {
      const total = [current, nextLoad, ...retiringLoad].reduce((sum, load) => sum + (load?.inFlight ?? 0), 0);
      const desired = Math.max(min, Math.min(max, Math.ceil(total / targetConcurrency)));
      if (this.live.length < min) {
        while (this.live.length < min && (await this.add(this.replacing ? "replace" : "min")));
        if (this.live.length >= min) this.replacing = false;
        this.aboveSince = this.belowSince = undefined;
      } else if (desired > this.live.length) {
        this.belowSince = undefined;
        this.aboveSince ??= now;
        if (now - this.aboveSince >= this.options.scaleUpAfterMs && (await this.add("load"))) this.aboveSince = undefined;
      } else if (desired < this.live.length) {
        this.aboveSince = undefined;
        this.belowSince ??= now;
        if (now - this.belowSince >= this.options.scaleDownAfterMs) {
          // The newest goes first: the oldest have shown they serve.
          const victim = this.live.at(-1)!;
          this.live = this.live.slice(0, -1);
          this.releasing.push(victim);
          this.dirty = true;
          this.belowSince = undefined;
          this.ctx.progress(`Autoscaler: ${total} request(s) in flight over ${this.live.length + 1} replicas: releasing ${victim.taskId}`);
        }
      } else {
        this.aboveSince = this.belowSince = undefined;
      }
    } catch (error) {
      failure = error;
    }
    // The next record serves once it has as many replicas ready as the current one (or all its own), or after the drain time.
    if (next && next === this.next && nextLoad) {
      const ready = current?.ready ?? 0;
      if ((nextLoad.ready >= 1 && nextLoad.ready >= ready) || nextLoad.ready === next.leaseIds.length || ready === 0 || now - next.since >= this.options.drainMs) this.promote();
    }
    if (this.dirty && this.live.length > 0) await this.register();
    await this.retire(retiring, retiringLoad);
    if (failure !== undefined) throw failure;
  }

  /** Deletes each superseded record (as read this tick) whose requests in flight are done or whose drain time passed; then closes each released lease that no record names any more. */
  private async retire(records: RegisteredRecord[], loads: RecordLoad[]): Promise<void> {
    const now = Date.now();
    for (const [index, record] of records.entries()) {
      if ((loads[index]?.inFlight ?? 0) > 0 && now - record.since < this.options.drainMs) continue;
      await this.deleteRecord(record.endpointId);
      this.retiring = this.retiring.filter((r) => r !== record);
    }
    const named = new Set([this.current, this.next, ...this.retiring].flatMap((record) => record?.leaseIds ?? []));
    const free = this.releasing.filter((replica) => !named.has(replica.leaseId));
    this.releasing = this.releasing.filter((replica) => named.has(replica.leaseId));
    await this.closeAll(free, "load");
  }

  private async deleteRecord(endpointId: string): Promise<void> {
    await deleteEndpoint(this.ctx, { gatewayUrl: this.options.gatewayUrl, endpointId }).catch((error: unknown) => {
      if (error instanceof Error && /\(404\b/.test(error.message)) return;
      this.emit({ type: "error", step: `delete endpoint ${endpointId}`, error });
    });
  }

  private async closeAll(replicas: AutoscaledReplica[], reason: "load" | "stop"): Promise<void> {
    for (const replica of replicas) {
      try {
        const receipt = await cancelTask(this.ctx, replica.taskId);
        this.ctx.progress(`Autoscaler: closed lease ${replica.leaseId} of ${replica.taskId} (${reason})`);
        this.emit({ type: "replica-removed", reason, replica, refunded: receipt.totalRefunded });
      } catch (error) {
        this.emit({ type: "error", step: `close lease ${replica.leaseId}`, error });
      }
    }
  }

  /** Stops the loop, deletes its records at the gateway, and closes the leases it rented when asked. */
  async stop(closeLeases: boolean): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    for (const record of [this.current, this.next, ...this.retiring]) if (record?.endpointId) await this.deleteRecord(record.endpointId);
    const rented = [...this.releasing, ...this.live];
    this.retiring = [];
    this.next = undefined;
    this.releasing = [];
    if (closeLeases) await this.closeAll(rented, "stop");
  }
}
