/**
 * The provider's leases, from the chain event that opens one to the claim that settles it.
 *
 * The controller is level-triggered: `reconcile(leaseId)` compares what level says about a lease
 * (its record) with what the chain says (readLease) and does the next step — activate, report
 * completion, terminate, stop a task whose lease ended, hand units back. Chain events, task
 * exits, renter requests, a periodic sweep and a restart all just call it, so a step missed
 * for any reason (an event seen twice, a crash between two steps) is taken on the next pass.
 *
 * A task runs at most once: the record says `starting` before the process is spawned, and a
 * task found `starting` or `running` without a live process (the node restarted) is never
 * started again: what is left of it is killed and the lease is terminated (docs/provider.md).
 */
import path from "node:path";
import { InvalidInputError } from "../../../common/errors.js";
import type { SealingKeyPair } from "../../../common/sealed.js";
import { getAddress, type Account, type Address, type Chain, type Hex, type PublicClient, type Transport, type TypedDataDomain } from "viem";
import { LRUCache } from "lru-cache";
import { leaseMarketAbi } from "../../../common/abi.js";
import { readLease, type LeaseView } from "../../../common/chain/market.js";
import { suanliTypes } from "../../../common/eip712.js";
import {
  FINAL_TASK_STATES,
  TASK_NOT_STARTED_EXIT_CODE,
  type LogLine as WireLogLine,
  type RenterAction,
  type RenterAuth,
  type TaskState,
  type TaskStatus,
} from "../../../common/protocols/lease.js";
import type { ChainEvent } from "../../chain/follower.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { CapacityManager } from "../capacity/capacity-manager.js";
import type { Inventory } from "../inventory/inventory.js";
import type { ProviderOptions } from "../options.js";
import { LogBuffer, type LogLine, type LogRead } from "../runtime/logs.js";
import { processStartTicks } from "../runtime/orphans.js";
import type { Runtime, TaskHandle, TaskResult } from "../runtime/runtime.js";
import { secretsOf, storableSpec, type TaskSpec } from "../runtime/task.js";
import type { TxSender } from "./chain-tx.js";
import { revertName } from "./chain-tx.js";
import { LeaseStateError } from "./errors.js";
import type { MachineMarket } from "./offers.js";
import { chainFields, newLeaseRecord, type EndAction, type LeaseRecord, type LeaseRecords, type TaskError } from "./records.js";
import { notAuthorized, type RenterRequestVerifier } from "./renter-auth.js";
import type { ReservationBook } from "./reservations.js";
import type { OutputStore } from "./outputs.js";

/** Errors of the renter's input: the task never runs, the lease ends with a completion report (the renter pays a second or two). */
const RENTER_INPUT_ERRORS = new Set(["FetchRefusedError", "BundleDigestMismatchError", "BundleFetchError", "BundleTooLargeError", "BundleUnpackError", "CommandNotFoundError", "InvalidInputError"]);

const ZERO_DIGEST = `0x${"0".repeat(64)}` as Hex;
/** Most bytes of log text in one logs answer (the renter asks again from nextSeq). */
export const LOGS_ANSWER_MAX_BYTES = 256 * 1024;
/** Finished tasks whose logs stay readable in memory. */
const FINISHED_TASKS_KEPT = 64;
/** How long one read of the market's lease counter answers for unknown lease ids. */
const NEXT_LEASE_ID_MAX_AGE_MS = 250;
/**
 * A lease id this close above the last counter read may have just been opened: the counter is
 * read again before the request is refused. Farther ids are refused without a read.
 */
const NEXT_LEASE_ID_SLACK = 64n;
/** How long a chain read of one lease answers concurrent and repeated requests about it. */
const LEASE_READ_TTL_MS = 2_000;

export type LeaseControllerContext = {
  publicClient: PublicClient<Transport, Chain>;
  market: Address;
  domain: TypedDataDomain;
  /** The provider's wallet (signs completion reports). */
  account: Account & { signTypedData: NonNullable<Account["signTypedData"]> };
  tx: TxSender;
  records: LeaseRecords;
  runtime: Runtime;
  capacity: CapacityManager;
  machines: MachineMarket;
  reservations: ReservationBook;
  inventory: Inventory;
  verifier: RenterRequestVerifier;
  options: ProviderOptions;
  metrics: Metrics;
  logger: Logger;
  /** Keeps each ended task's output/ folder for its renter (node/provider/agent/outputs.ts). */
  outputs?: OutputStore;
  /** Opens secret env values sealed to this node's key (common/sealed.ts). */
  sealing?: { keyPair: SealingKeyPair; chainId: number };
};

/** What a task's log reader needs: the task's own buffer, or a one-line buffer when it never ran. */
type LogSource = { read(fromSeq: number): LogRead; follow(fromSeq: number, signal: AbortSignal): AsyncIterable<LogLine>; closed(): boolean };

type Live = {
  abort: AbortController;
  /** Why the pipeline was aborted. */
  abortReason?: "cancel" | "lease-ended" | "shutdown";
  handle?: TaskHandle;
  pipeline?: Promise<void>;
};

function taskIdOf(leaseId: bigint): string {
  return `lease-${leaseId}`;
}

function errorOf(error: unknown): TaskError {
  const e = error as { name?: string; shortMessage?: string; message?: string };
  return { name: typeof e?.name === "string" ? e.name : "Error", message: String(e?.shortMessage ?? e?.message ?? error).slice(0, 2000) };
}

function sourceOfHandle(handle: TaskHandle): LogSource {
  return {
    read: (fromSeq) => handle.readLogs(fromSeq),
    follow: (fromSeq, signal) => handle.logs(fromSeq, signal),
    closed: () => handle.state === "exited",
  };
}

function sourceOfBuffer(buffer: LogBuffer): LogSource {
  return { read: (fromSeq) => buffer.read(fromSeq), follow: (fromSeq, signal) => buffer.follow(fromSeq, signal), closed: () => buffer.isClosed };
}

export class LeaseController {
  private readonly live = new Map<bigint, Live>();
  /** Logs of tasks that ended (or never ran), for late readers. */
  private readonly finishedLogs = new Map<bigint, LogSource>();
  private readonly locks = new Map<bigint, Promise<unknown>>();
  private readonly queued = new Set<bigint>();
  /** Unit id → lease whose task uses (or is about to use) it. */
  private readonly unitOwner = new Map<string, bigint>();
  private readonly provider: Address;
  private sweepTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  /**
   * Every lease id below this one was opened on-chain and its LeaseOpened event handled here: a
   * lease below it without a record is not this provider's, and costs no chain read to say so.
   */
  private eventsNext = 1n;
  private counter: { value: bigint; at: number; pending?: Promise<bigint> | undefined } = { value: 0n, at: 0 };
  private readonly leaseReads = new LRUCache<string, Promise<LeaseView>>({ max: 10_000, ttl: LEASE_READ_TTL_MS });

  constructor(private readonly ctx: LeaseControllerContext) {
    this.provider = getAddress(ctx.account.address);
  }

  // -------------------------------------------------------------------------------------------
  // lifecycle

  /** Takes back the units of leases that hold them (before the idle workload starts) and reconciles every open lease. */
  async start(): Promise<void> {
    for (const record of this.ctx.records.all()) if (record.leaseId >= this.eventsNext) this.eventsNext = record.leaseId + 1n;
    for (const record of this.ctx.records.open()) {
      if (record.unitIds.length > 0 && !record.released) for (const unit of record.unitIds) this.unitOwner.set(unit, record.leaseId);
    }
    this.updateGauges();
    this.sweepTimer = setInterval(() => this.sweep(), this.ctx.options.leases.reconcileIntervalMs);
    this.sweepTimer.unref();
  }

  /** Reconciles every open lease now (also runs on the interval). */
  sweep(): void {
    for (const record of this.ctx.records.open()) this.schedule(record.leaseId);
  }

  /**
   * Stops the controller: running tasks are stopped and their leases terminated (best effort;
   * a restart finishes what is left), preparations are abandoned and resumed at the next start.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    const running = [...this.live.entries()];
    for (const [leaseId, live] of running) {
      live.abortReason ??= "shutdown";
      live.abort.abort();
      // A running task is stopped (SIGTERM, grace, SIGKILL); its exit terminates the lease.
      if (live.handle) void this.ctx.capacity.release(taskIdOf(leaseId)).catch(() => undefined);
    }
    await Promise.all(running.map(([, live]) => live.pipeline?.catch(() => undefined)));
    await Promise.all([...this.locks.values()].map((lock) => lock.catch(() => undefined)));
  }

  // -------------------------------------------------------------------------------------------
  // chain events

  /** Records leases opened with this provider and reconciles those an event touches. */
  async onChainEvent(event: ChainEvent): Promise<void> {
    switch (event.eventName) {
      case "LeaseOpened": {
        const leaseId = event.args.leaseId;
        if (getAddress(event.args.provider) !== this.provider) {
          this.sawLease(leaseId);
          return;
        }
        if (this.ctx.reservations.commit(event.args.offerNonce.toString())) await this.ctx.reservations.persist();
        if (!this.ctx.records.get(leaseId)) {
          const view = await readLease(this.ctx.publicClient, this.ctx.market, leaseId);
          if (view.status === "None") return;
          await this.ctx.records.put(newLeaseRecord(view, event.args.offerNonce));
          this.ctx.logger.info("Lease opened", { leaseId, renter: view.renter, machineId: view.machineId, units: view.units, interruptible: view.interruptible });
          this.updateGauges();
        }
        this.sawLease(leaseId);
        this.schedule(leaseId);
        return;
      }
      case "LeaseActivated":
      case "LeasePreempted":
      case "LeaseEnded":
      case "LeaseExtended":
      case "LeaseShrunk":
      case "LeaseSettled":
      case "LeaseClaimed":
      case "CompletionReported": {
        const leaseId = event.args.leaseId;
        if (!this.ctx.records.get(leaseId)) return;
        if (event.eventName === "LeaseClaimed") this.ctx.metrics.providerEarnings.inc(Number(event.args.amount - event.args.fee));
        this.schedule(leaseId);
        return;
      }
      default:
        return;
    }
  }

  // -------------------------------------------------------------------------------------------
  // renter requests (the protocol layer parsed the bodies)

  /** Events arrive in order: every lease up to this one has been handled. */
  private sawLease(leaseId: bigint): void {
    if (leaseId >= this.eventsNext) this.eventsNext = leaseId + 1n;
  }

  /**
   * The market's lease counter. `shared`: read at most every NEXT_LEASE_ID_MAX_AGE_MS, concurrent
   * callers sharing one read. Otherwise a read of its own, started now: a shared read that began
   * before the caller's lease was opened would not count it.
   */
  private async nextLeaseId(shared: boolean): Promise<bigint> {
    const read = () =>
      this.ctx.publicClient.readContract({ address: this.ctx.market, abi: leaseMarketAbi, functionName: "nextLeaseId" }).then((value) => {
        if (value >= this.counter.value) this.counter = { ...this.counter, value, at: Date.now() };
        return value;
      });
    if (!shared) return read();
    if (this.counter.at > 0 && Date.now() - this.counter.at <= NEXT_LEASE_ID_MAX_AGE_MS) return this.counter.value;
    this.counter.pending ??= read().finally(() => {
      this.counter.pending = undefined;
    });
    return this.counter.pending;
  }

  /**
   * What the chain says about a lease that has no record here, when it may be this provider's;
   * undefined when it is not (or does not exist). Ids below the events handled cost nothing; ids
   * at or above the market's counter cost a shared counter read; only ids of leases opened since
   * the last event handled (a short window) cost a read of the lease, shared and cached. Ids just
   * above the last counter read (a lease opened a moment ago) get a fresh counter read of their own.
   */
  private async lookupLease(leaseId: bigint): Promise<LeaseView | undefined> {
    if (leaseId < this.eventsNext) return undefined;
    let next = await this.nextLeaseId(true);
    if (leaseId >= next && leaseId - next < NEXT_LEASE_ID_SLACK) next = await this.nextLeaseId(false);
    if (leaseId >= next) return undefined;
    const key = leaseId.toString();
    let read = this.leaseReads.get(key);
    if (!read) {
      read = readLease(this.ctx.publicClient, this.ctx.market, leaseId);
      this.leaseReads.set(key, read);
      read.catch(() => this.leaseReads.delete(key));
    }
    const view = await read;
    return view.status === "None" || getAddress(view.provider) !== this.provider ? undefined : view;
  }

  /**
   * Checks a renter request and returns the lease's record: the signature first (local, cheap),
   * then whether the signer is the renter of a lease of this provider (its record, or the chain
   * read at most once per lease), then the nonce, used up in the same step as its check.
   * Strangers get one answer whether the lease exists or not.
   */
  private async authorize(auth: RenterAuth, action: RenterAction, body: unknown): Promise<LeaseRecord> {
    const leaseId = auth.request.leaseId;
    const signer = await this.ctx.verifier.authenticate(auth, { leaseId, action, body });
    const known = this.ctx.records.get(leaseId);
    const view = known ? undefined : await this.lookupLease(leaseId);
    const renter = known?.renter ?? view?.renter;
    if (!renter || getAddress(renter) !== signer) throw notAuthorized(leaseId);
    this.ctx.verifier.consume(auth);
    if (known || !view) return known!;
    return this.withLock(leaseId, async () => {
      const again = this.ctx.records.get(leaseId);
      if (again) return again;
      const record = await this.ctx.records.put(newLeaseRecord(view, 0n));
      this.updateGauges();
      return record;
    });
  }

  /**
   * The spec with its sealed env values opened (in memory only, as `{ value, secret: true }`).
   * A value that does not open for this lease, variable and key is the renter's error.
   */
  private async openSealed(leaseId: bigint, spec: TaskSpec): Promise<TaskSpec> {
    const sealed = Object.entries(spec.env).filter(([, value]) => typeof value !== "string" && "sealed" in value);
    if (sealed.length === 0) return spec;
    const sealing = this.ctx.sealing;
    const env = { ...spec.env };
    for (const [name, value] of sealed) {
      try {
        if (!sealing) throw new Error("this provider has no sealing key");
        env[name] = { value: await sealing.keyPair.open((value as { sealed: string }).sealed, { chainId: sealing.chainId, leaseId, name }), secret: true };
      } catch {
        throw new InvalidInputError("task", [{ path: `env.${name}`, message: "the sealed value does not open with this provider's key for this lease and variable; seal it again to the key in the provider's acceptance" }]);
      }
    }
    return { ...spec, env };
  }

  /** Where rank 0 of a group job on this node is reached (provider.groupJobs). */
  groupMaster(): { addr: string; port: number } {
    return { addr: this.ctx.options.groupJobs.masterAddress, port: this.ctx.options.groupJobs.masterPort };
  }

  /** The task spec of a lease: accepted once, prepared and run in the background. */
  async submitTask(
    auth: RenterAuth,
    spec: TaskSpec,
  ): Promise<{ leaseId: bigint; state: "accepted" | "already_running" | "already_done"; master?: { addr: string; port: number } }> {
    const answer = await this.acceptTask(auth, spec);
    return spec.group?.rank === 0 ? { ...answer, master: this.groupMaster() } : answer;
  }

  private async acceptTask(auth: RenterAuth, spec: TaskSpec): Promise<{ leaseId: bigint; state: "accepted" | "already_running" | "already_done" }> {
    const leaseId = auth.request.leaseId;
    await this.authorize(auth, "task", { spec });
    spec = await this.openSealed(leaseId, spec);
    return this.withLock(leaseId, async () => {
      const current = this.ctx.records.get(leaseId)!;
      if (current.phase === "ended") return { leaseId, state: "already_done" as const };
      if (current.phase !== "waiting_spec") return { leaseId, state: "already_running" as const };
      const view = await this.readChain(leaseId);
      if (view.status !== "Open" && view.status !== "Active") {
        throw new LeaseStateError(`Lease ${leaseId} is ${view.status} on-chain: it takes no task`);
      }
      if (this.stopping) throw new LeaseStateError("The provider node is shutting down; send the task again once it is back");
      // Written before anything acts on it; secrets stay in memory only.
      await this.ctx.records.update(leaseId, (r) => {
        r.chain = chainFields(view);
        r.phase = "preparing";
        r.state = "preparing";
        r.spec = storableSpec(spec);
        r.specResumable = secretsOf(spec).size === 0;
      });
      this.ctx.logger.info("Task accepted", { leaseId });
      this.updateGauges();
      this.launch(leaseId, spec);
      return { leaseId, state: "accepted" as const };
    });
  }

  async status(auth: RenterAuth): Promise<TaskStatus> {
    const leaseId = auth.request.leaseId;
    await this.authorize(auth, "status", {});
    const current = this.ctx.records.get(leaseId)!;
    const handle = this.live.get(leaseId)?.handle;
    let unitSeconds = current.result?.unitSeconds ?? 0;
    let gpus: TaskStatus["gpus"] = [];
    let nextLogSeq = current.nextLogSeq;
    if (handle && current.phase === "running") {
      const usage = await handle.usage();
      unitSeconds = usage.unitSeconds;
      const devices = new Map(this.ctx.inventory.units.map((unit) => [unit.id, unit.device]));
      gpus = (usage.gpus ?? []).slice(0, 64).map((gpu) => ({
        device: devices.get(gpu.unitId) ?? gpu.unitId,
        utilizationPct: gpu.utilizationPct,
        memoryUsedMiB: gpu.memoryUsedMiB,
        temperatureC: gpu.temperatureC,
        powerW: gpu.powerDrawW,
      }));
    }
    const logs = handle ? sourceOfHandle(handle) : this.finishedLogs.get(leaseId);
    if (logs) nextLogSeq = logs.read(Number.MAX_SAFE_INTEGER).nextSeq;
    return {
      leaseId,
      state: current.state,
      startedAt: current.startedAt,
      endedAt: current.endedAt,
      heartbeatAt: Date.now(),
      unitSeconds,
      gpus,
      exitCode: current.exitCode,
      error: current.error,
      completion: current.completion,
      nextLogSeq,
    };
  }

  async logs(
    auth: RenterAuth,
    body: { fromSeq: number; waitMs: number; limit: number },
    signal: AbortSignal,
  ): Promise<{ lines: WireLogLine[]; nextSeq: number; done: boolean; firstAvailableSeq: number }> {
    const leaseId = auth.request.leaseId;
    await this.authorize(auth, "logs", body);
    const handle = this.live.get(leaseId)?.handle;
    const source = handle ? sourceOfHandle(handle) : this.finishedLogs.get(leaseId);
    if (!source) {
      const current = this.ctx.records.get(leaseId)!;
      const ended = current.phase === "ended";
      return { lines: [], nextSeq: ended ? current.nextLogSeq : 0, done: ended, firstAvailableSeq: ended ? current.nextLogSeq : 0 };
    }
    let read = source.read(body.fromSeq);
    if (read.lines.length === 0 && !source.closed() && body.waitMs > 0) {
      const wait = AbortSignal.any([signal, AbortSignal.timeout(body.waitMs)]);
      try {
        for await (const _line of source.follow(body.fromSeq, wait)) break;
      } catch {
        // timed out or the requester left: answer with what there is
      }
      read = source.read(body.fromSeq);
    }
    const lines: WireLogLine[] = [];
    let bytes = 0;
    for (const line of read.lines) {
      if (lines.length >= body.limit) break;
      bytes += Buffer.byteLength(line.text) + 64;
      if (lines.length > 0 && bytes > LOGS_ANSWER_MAX_BYTES) break;
      lines.push({ seq: line.seq, ts: line.at, stream: line.stream, text: line.text });
    }
    const firstAvailableSeq = read.lines[0]?.seq ?? read.nextSeq;
    const nextSeq = lines.length > 0 ? lines[lines.length - 1].seq + 1 : Math.min(Math.max(body.fromSeq, firstAvailableSeq), read.nextSeq);
    return { lines, nextSeq, done: source.closed() && nextSeq >= read.nextSeq, firstAvailableSeq };
  }

  /**
   * Checks a task I/O request (output, exec, forward) against the lease's renter; returns the
   * lease's record and, while the task runs, its handle.
   */
  async authorizeIo(auth: RenterAuth, action: "output" | "exec" | "forward", body: unknown): Promise<{ record: LeaseRecord; handle: TaskHandle | undefined }> {
    const leaseId = auth.request.leaseId;
    await this.authorize(auth, action, body);
    const current = this.ctx.records.get(leaseId)!;
    const handle = this.live.get(leaseId)?.handle;
    return { record: current, handle: current.phase === "running" && handle?.state === "running" ? handle : undefined };
  }

  /**
   * The renter asks to stop its task. The task is stopped now; the renter then closes the lease
   * (`close`), and if it has not within `provider.leases.cancelGraceSeconds`, the node ends it
   * with a completion report so that the renter stops paying.
   */
  async cancel(auth: RenterAuth): Promise<{ leaseId: bigint; state: TaskState }> {
    const leaseId = auth.request.leaseId;
    await this.authorize(auth, "cancel", {});
    const stopping = await this.withLock(leaseId, async () => {
      const current = this.ctx.records.get(leaseId)!;
      if (current.phase === "ended") return undefined;
      const endAfter = Date.now() + this.ctx.options.leases.cancelGraceSeconds * 1000;
      await this.ctx.records.update(leaseId, (r) => {
        r.endAction = "await_close";
        r.endAfter = endAfter;
        if (r.phase === "waiting_spec") this.markEnded(r, "stopped", { name: "TaskCancelledError", message: "The renter cancelled the lease before sending a task" });
      });
      this.ctx.logger.info("Lease cancelled by the renter", { leaseId });
      const live = this.live.get(leaseId);
      if (!live) return undefined;
      live.abortReason ??= "cancel";
      live.abort.abort();
      // Wrapped: the lock must not wait for the task to stop (its exit needs the lock).
      return { done: live.handle ? this.ctx.capacity.release(taskIdOf(leaseId)).catch(() => undefined) : live.pipeline };
    });
    // Answer once the task has stopped, or after a few seconds (the status shows the rest).
    if (stopping?.done) await Promise.race([stopping.done.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
    if (stopping?.done) await this.withLock(leaseId, async () => undefined);
    this.updateGauges();
    return { leaseId, state: this.ctx.records.get(leaseId)!.state };
  }

  // -------------------------------------------------------------------------------------------
  // the task pipeline: units + bundle, activate, start, wait, report

  private launch(leaseId: bigint, spec: TaskSpec): void {
    const live: Live = { abort: new AbortController() };
    this.live.set(leaseId, live);
    live.pipeline = this.runPipeline(leaseId, spec, live)
      .catch((error: unknown) => this.ctx.logger.error("Task pipeline failed", { leaseId }, error))
      .finally(() => {
        if (this.live.get(leaseId) === live) this.live.delete(leaseId);
        this.schedule(leaseId);
      });
  }

  private async runPipeline(leaseId: bigint, spec: TaskSpec, live: Live): Promise<void> {
    const { runtime, capacity, logger } = this.ctx;
    const taskId = taskIdOf(leaseId);
    const picked = await this.withLock(leaseId, async () => {
      const record = this.ctx.records.get(leaseId)!;
      const units = record.unitIds.length === record.units ? record.unitIds : this.pickUnits(record);
      for (const unit of units) this.unitOwner.set(unit, leaseId);
      const devices = units.map((unit) => this.ctx.inventory.units.find((u) => u.id === unit)?.device ?? unit);
      return this.ctx.records.update(leaseId, (r) => {
        r.unitIds = units;
        r.devices = devices;
      });
    });
    const durationMs = await this.remainingMs(picked);
    const noticeMs = await this.preemptionNoticeFor(picked);
    const [prepared, assigned] = await Promise.allSettled([
      runtime.prepare(
        { taskId, spec, devices: picked.devices, durationMs, ...(spec.group?.rank === 0 ? { master: this.groupMaster() } : {}) },
        { signal: live.abort.signal },
      ),
      this.freeEndedHolders(picked.unitIds).then(() => capacity.assign(taskId, picked.unitIds, picked.interruptible ? "interruptible" : "ai", { preemptNoticeMs: noticeMs })),
    ]);
    const handle = prepared.status === "fulfilled" ? prepared.value : undefined;
    const failure = prepared.status === "rejected" ? prepared.reason : assigned.status === "rejected" ? assigned.reason : undefined;
    if (live.abort.signal.aborted || failure !== undefined) {
      await handle?.cleanup().catch(() => undefined);
      if (live.abortReason === "shutdown") return; // resumed (or waited for again) at the next start
      await this.withLock(leaseId, async () => {
        await this.releaseUnits(leaseId);
        await this.ctx.records.update(leaseId, (r) => {
          if (live.abort.signal.aborted) {
            const error =
              live.abortReason === "cancel"
                ? { name: "TaskCancelledError", message: "The renter cancelled the task before it started" }
                : { name: "LeaseEndedError", message: `The lease ended on-chain (${r.chain.endReason}) before its task started` };
            this.markEnded(r, r.chain.endReason === "Preempted" ? "preempted" : "stopped", r.error ?? error);
            return;
          }
          const error = errorOf(failure);
          this.markEnded(r, "failed", error);
          // The renter's input was bad: the lease ends with a completion report at once (the renter
          // pays for the second or two it takes). The node's own failure: it terminates and pays the penalty.
          r.endAction = RENTER_INPUT_ERRORS.has(error.name) ? "complete" : "terminate";
          r.exitCode = TASK_NOT_STARTED_EXIT_CODE;
          r.result = { status: "error", chainExitCode: TASK_NOT_STARTED_EXIT_CODE, outputDigest: ZERO_DIGEST, unitSeconds: 0 };
        });
        const buffer = new LogBuffer();
        const record = this.ctx.records.get(leaseId)!;
        buffer.push("system", `The task could not start: ${record.error?.name}: ${record.error?.message}`);
        buffer.close();
        this.keepLogs(leaseId, sourceOfBuffer(buffer));
        await this.ctx.records.update(leaseId, (r) => {
          r.nextLogSeq = buffer.nextSeq;
        });
      });
      if (failure !== undefined) {
        logger.warn("Task could not start", { leaseId }, failure);
        this.ctx.metrics.providerTasks.inc({ result: "failed" });
      }
      return;
    }
    live.handle = handle;

    // Activate (metering starts) only now that the task can start at once.
    const ready = await this.withLock(leaseId, async () => {
      let view = await this.readChain(leaseId);
      let activatedWallMs: number | null = null;
      if (view.status === "Open") {
        try {
          await this.ctx.tx.send({ address: this.ctx.market, abi: leaseMarketAbi, functionName: "activate", args: [leaseId] });
          activatedWallMs = Date.now();
          logger.info("Lease activated", { leaseId });
        } catch (error) {
          logger.warn("Cannot activate the lease", { leaseId, error: revertName(error) }, error);
        }
        view = await this.readChain(leaseId);
      }
      if (view.status !== "Active" || live.abort.signal.aborted) return undefined;
      // From here on the task is never started again, whatever happens to this process.
      const starting = await this.ctx.records.update(leaseId, (r) => {
        r.chain = chainFields(view);
        r.activatedWallMs ??= activatedWallMs;
        r.phase = "starting";
        r.state = "preparing";
      });
      // Started under the lock: a lease that ends meanwhile is seen with the task attached, so
      // stopping it reaches the process.
      await handle!.start();
      try {
        capacity.attachTask(taskId, handle!);
      } catch (error) {
        await handle!.stop(0);
        throw error;
      }
      const pid = handle!.pid ?? null;
      const pidStartTicks = pid === null ? null : ((await processStartTicks(pid)) ?? null);
      return this.ctx.records.update(leaseId, (r) => {
        r.phase = "running";
        r.state = "running";
        r.pid = pid;
        r.pidStartTicks = pidStartTicks;
        r.startedAt = Date.now();
        r.activatedWallMs ??= starting.activatedWallMs;
      });
    });
    if (!ready) {
      await handle!.cleanup().catch(() => undefined);
      if (live.abortReason === "shutdown") return;
      await this.withLock(leaseId, async () => {
        await this.releaseUnits(leaseId);
        await this.ctx.records.update(leaseId, (r) => {
          if (r.phase !== "ended") this.markEnded(r, "stopped", r.error ?? { name: "LeaseStateError", message: `The lease is ${r.chain.status} on-chain; the task was not started` });
        });
      });
      return;
    }

    logger.info("Task started", { leaseId, pid: ready.pid, units: picked.unitIds.length });
    this.updateGauges();
    handle!.setRemainingTime(await this.remainingMs(ready));
    const result = await handle!.wait();
    await this.onTaskExit(leaseId, handle!, result, live);
  }

  private async onTaskExit(leaseId: bigint, handle: TaskHandle, result: TaskResult, live: Live): Promise<void> {
    const completion = {
      leaseId,
      exitCode: result.chainExitCode,
      outputDigest: result.outputDigest,
      unitSeconds: BigInt(result.unitSeconds),
    };
    const signature = await this.ctx.account.signTypedData({
      domain: this.ctx.domain,
      types: { Completion: suanliTypes.Completion },
      primaryType: "Completion",
      message: completion,
    });
    this.keepLogs(leaseId, sourceOfHandle(handle));
    await this.withLock(leaseId, async () => {
      const view = await this.readChain(leaseId).catch(() => undefined);
      await this.ctx.records.update(leaseId, (r) => {
        if (view) r.chain = chainFields(view);
        const over = r.chain.status !== "Active";
        let state: TaskState;
        let error: TaskError | null = result.error ?? null;
        if (live.abortReason === "shutdown") {
          state = "failed";
          error = { name: "TaskLostError", message: "The provider node stopped while the task ran; the task was stopped and the lease terminated" };
        } else if (result.status === "succeeded") state = "succeeded";
        else if (result.status === "exceeded") {
          state = "exceeded";
          error = { name: "TaskExceededError", message: "The task ran past its lease time and was stopped (SIGTERM, then SIGKILL after the grace period)" };
        } else if (result.status === "stopped") state = r.chain.endReason === "Preempted" ? "preempted" : "stopped";
        else state = "failed";
        this.markEnded(r, state, error);
        r.exitCode = result.exitCode ?? result.chainExitCode;
        r.result = { status: result.status, chainExitCode: result.chainExitCode, outputDigest: result.outputDigest, unitSeconds: result.unitSeconds };
        r.completion = { report: completion, signature };
        r.nextLogSeq = handle.readLogs(Number.MAX_SAFE_INTEGER).nextSeq;
        r.startedAt = result.startedAt;
        r.endedAt = result.endedAt;
        let action: EndAction = "none";
        if (!over) action = live.abortReason === "shutdown" ? "terminate" : r.endAction === "await_close" ? "await_close" : "complete";
        r.endAction = action;
      });
      // Before the workspace goes: the output the completion report digests stays for the renter.
      await this.ctx.outputs?.keep(leaseId, path.join(handle.workspace, "output"));
      await this.releaseUnits(leaseId);
      await handle.cleanup().catch(() => undefined);
    });
    const record = this.ctx.records.get(leaseId)!;
    this.ctx.metrics.providerTasks.inc({ result: record.error?.name === "TaskLostError" ? "lost" : record.state });
    this.ctx.logger.info("Task ended", { leaseId, state: record.state, exitCode: record.exitCode, unitSeconds: result.unitSeconds });
    this.updateGauges();
    if (live.abortReason === "shutdown") await this.withLock(leaseId, () => this.reconcileNow(leaseId)).catch(() => undefined);
  }

  // -------------------------------------------------------------------------------------------
  // reconciliation

  /** Reconciles a lease soon (coalesced: one pass queued per lease at a time). */
  schedule(leaseId: bigint): void {
    if (this.queued.has(leaseId)) return;
    this.queued.add(leaseId);
    void this.withLock(leaseId, async () => {
      this.queued.delete(leaseId);
      await this.reconcileNow(leaseId);
    }).catch((error: unknown) => this.ctx.logger.warn("Lease reconciliation failed; retrying on the next pass", { leaseId }, error));
  }

  /** Reconciles one lease now and waits for it (tests, shutdown). */
  reconcile(leaseId: bigint): Promise<void> {
    return this.withLock(leaseId, () => this.reconcileNow(leaseId));
  }

  private async reconcileNow(leaseId: bigint): Promise<void> {
    let record = this.ctx.records.get(leaseId);
    if (!record || record.closed) return;
    const view = await this.readChain(leaseId);
    if (view.status === "None") return;
    const previousEnd = record.chain.end;
    record = await this.ctx.records.update(leaseId, (r) => {
      r.chain = chainFields(view);
      r.units = view.units;
    });
    if (record.unitIds.length > view.units) record = await this.shrinkUnits(record, view.units);
    const live = this.live.get(leaseId);

    if (view.status === "Open" || view.status === "Active") {
      if (live?.handle && view.status === "Active" && live.handle.state === "running" && view.end !== previousEnd && previousEnd !== 0) {
        // An extension moved the end: the task may run until the new end.
        live.handle.setRemainingTime(await this.remainingMs(record));
      }
      // While stopping, only a lease whose task is over still gets its end on-chain.
      if (this.stopping && record.phase !== "ended") return;
      if ((record.phase === "preparing" || record.phase === "starting" || record.phase === "running") && !live) {
        await this.recover(record, view);
        record = this.ctx.records.get(leaseId)!;
      }
      if (record.phase === "preparing" && view.status === "Open" && (await this.chainNow()) >= record.startDeadline - this.ctx.options.leases.activateMarginSeconds) {
        // The renter's bundle is taking long to fetch: start metering before the deadline rather
        // than be penalised for a late start; the task runs for the time left once ready.
        if (await this.send("activate", leaseId)) await this.ctx.records.update(leaseId, (r) => void (r.activatedWallMs = Date.now()));
        this.ctx.logger.info("Lease activated while its task is still being prepared (start deadline near)", { leaseId });
        return;
      }
      if (record.phase === "waiting_spec") {
        if (view.status === "Open" && (await this.chainNow()) >= record.startDeadline - this.ctx.options.leases.activateMarginSeconds) {
          // No task yet and the start deadline is near: activate anyway, so the renter keeps the
          // units it pays for and this node is not penalised for a start the renter held up.
          if (await this.send("activate", leaseId)) await this.ctx.records.update(leaseId, (r) => void (r.activatedWallMs = Date.now()));
          this.ctx.logger.info("Lease activated without a task spec (start deadline near)", { leaseId });
          await this.holdUnits(record);
        } else if (view.status === "Active" && record.unitIds.length === 0) {
          await this.holdUnits(record);
        }
        return;
      }
      if (record.phase !== "ended") return;
      let action = record.endAction;
      if (action === "await_close" && record.endAfter !== null && Date.now() >= record.endAfter) action = "complete";
      if (action === "await_close" && view.status === "Open" && (await this.chainNow()) >= record.startDeadline - this.ctx.options.leases.activateMarginSeconds) action = "complete";
      if (view.status === "Open" && action !== "terminate" && (await this.chainNow()) > record.startDeadline) {
        // Too late to activate: anyone may cancel the lease now (the renter is refunded with the
        // start penalty). Nothing is left for this node to send.
        action = "none";
      }
      if (action !== record.endAction) await this.ctx.records.update(leaseId, (r) => void (r.endAction = action));
      if (action === "terminate") {
        if (await this.send("terminate", leaseId)) this.ctx.logger.info("Lease terminated", { leaseId, reason: record.error?.name });
      } else if (action === "complete") {
        // A task stopped at the end of its time is reported once the end has come (a devnet's
        // clock can run ahead of ours): the report then covers all the time the renter paid for.
        if (record.result?.status === "exceeded" && view.status === "Active" && Date.now() / 1000 < view.end) return;
        if (view.status === "Open") await this.send("activate", leaseId);
        const report = record.completion?.report ?? { leaseId, exitCode: record.result?.chainExitCode ?? TASK_NOT_STARTED_EXIT_CODE, outputDigest: record.result?.outputDigest ?? ZERO_DIGEST, unitSeconds: 0n };
        if (!record.completion) {
          const signature = await this.ctx.account.signTypedData({ domain: this.ctx.domain, types: { Completion: suanliTypes.Completion }, primaryType: "Completion", message: report });
          await this.ctx.records.update(leaseId, (r) => void (r.completion = { report, signature }));
        }
        if (await this.send("complete", leaseId, [report.exitCode, report.outputDigest, report.unitSeconds])) {
          this.ctx.logger.info("Completion reported", { leaseId, exitCode: report.exitCode, unitSeconds: report.unitSeconds });
        }
      }
      // The transaction's events bring the next pass.
      return;
    }

    // Ended, Settled or Cancelled: stop what runs, hand the units back, close when paid out.
    if (live) {
      if (!live.abort.signal.aborted && live.abortReason !== "lease-ended") {
        const chainTime = await this.chainTime();
        const preemptedLater = view.endReason === "Preempted" && live.handle?.state === "running" && view.stopAt > chainTime;
        if (preemptedLater) {
          const noticeMs = Math.max(0, Math.round((view.stopAt - chainTime) * 1000));
          this.ctx.logger.info("Lease preempted: the task runs until the notice ends", { leaseId, stopAt: view.stopAt, noticeMs });
          void this.ctx.capacity.preempt(taskIdOf(leaseId), noticeMs).catch(() => undefined);
          live.abortReason = "lease-ended";
          // Not aborted: a preparation in flight finishes into a stopped task.
        } else {
          live.abortReason ??= "lease-ended";
          live.abort.abort();
          if (live.handle) void this.ctx.capacity.release(taskIdOf(leaseId)).catch(() => undefined);
          this.ctx.logger.info("Lease ended on-chain: stopping its task", { leaseId, reason: view.endReason });
        }
      }
      return;
    }
    if (record.phase !== "ended" || record.endAction !== "none") {
      await this.ctx.records.update(leaseId, (r) => {
        if (r.phase !== "ended") {
          this.markEnded(r, view.endReason === "Preempted" ? "preempted" : "stopped", r.error ?? { name: "LeaseEndedError", message: `The lease ended on-chain (${view.endReason}) before its task ran` });
        }
        r.endAction = "none";
      });
    }
    if (!this.ctx.records.get(leaseId)!.released) await this.releaseUnits(leaseId);
    if (view.status === "Settled" || view.status === "Cancelled") {
      await this.ctx.records.update(leaseId, (r) => void (r.closed = true));
      this.ctx.logger.info("Lease closed", { leaseId, status: view.status, reason: view.endReason, paid: view.paid });
      this.updateGauges();
    }
  }

  /** After a restart: a preparation starts over (it never ran); a task that may have started is killed and the lease terminated. */
  private async recover(record: LeaseRecord, view: LeaseView): Promise<void> {
    const leaseId = record.leaseId;
    if (record.phase === "preparing") {
      await this.ctx.runtime.reap(taskIdOf(leaseId)).catch(() => 0);
      if (record.specResumable && record.spec) {
        this.ctx.logger.info("Preparing a task again after a restart", { leaseId });
        this.launch(leaseId, record.spec as TaskSpec);
      } else {
        // The spec held secrets, which were never stored: the renter sends it again.
        await this.ctx.records.update(leaseId, (r) => {
          r.phase = "waiting_spec";
          r.state = "waiting_spec";
          r.spec = null;
        });
        this.ctx.logger.info("Waiting for the task spec again after a restart (it held secrets)", { leaseId });
      }
      return;
    }
    const killed = await this.ctx.runtime.reap(taskIdOf(leaseId), { pid: record.pid ?? undefined, startTicks: record.pidStartTicks ?? undefined });
    await this.releaseUnits(leaseId);
    await this.ctx.records.update(leaseId, (r) => {
      this.markEnded(r, "failed", {
        name: "TaskLostError",
        message: "The provider node restarted while the task ran; the task was stopped and is not run again. The lease is terminated: the renter gets the rest of its deposit back plus the early-termination penalty",
      });
      r.endAction = view.status === "Active" || view.status === "Open" ? "terminate" : "none";
    });
    this.ctx.metrics.providerTasks.inc({ result: "lost" });
    this.ctx.logger.warn("Task lost in a restart: killed what was left and terminating the lease", { leaseId, processesKilled: killed });
  }

  // -------------------------------------------------------------------------------------------
  // helpers

  private markEnded(record: LeaseRecord, state: TaskState, error: TaskError | null): void {
    record.phase = "ended";
    record.state = FINAL_TASK_STATES.has(state) ? state : "stopped";
    record.error = error;
    record.endedAt ??= Date.now();
  }

  private keepLogs(leaseId: bigint, source: LogSource): void {
    this.finishedLogs.set(leaseId, source);
    while (this.finishedLogs.size > FINISHED_TASKS_KEPT) this.finishedLogs.delete(this.finishedLogs.keys().next().value!);
  }

  /** Sends a lease transaction; false when it failed (logged; the next pass reads the lease again). */
  private async send(functionName: "activate" | "complete" | "terminate", leaseId: bigint, completion?: readonly [exitCode: number, outputDigest: Hex, unitSeconds: bigint]): Promise<boolean> {
    try {
      if (functionName === "complete") await this.ctx.tx.send({ address: this.ctx.market, abi: leaseMarketAbi, functionName, args: [leaseId, ...completion!] });
      else await this.ctx.tx.send({ address: this.ctx.market, abi: leaseMarketAbi, functionName, args: [leaseId] });
      return true;
    } catch (error) {
      // A lease that moved on (the renter closed it, a deadline passed) is read again on the next pass.
      this.ctx.logger.warn(`Cannot ${functionName} the lease`, { leaseId, error: revertName(error) }, error);
      return false;
    }
  }

  private async readChain(leaseId: bigint): Promise<LeaseView> {
    return readLease(this.ctx.publicClient, this.ctx.market, leaseId);
  }

  /** The time the next block will carry, at least: the chain's clock may run ahead of ours (a devnet mines a block per transaction). */
  async chainNow(): Promise<number> {
    const block = await this.ctx.publicClient.getBlock({ blockTag: "latest" });
    return Math.max(Math.floor(Date.now() / 1000), Number(block.timestamp) + 1);
  }

  /** The chain's time now, as well as we can tell: for notices, which must not be cut short. */
  private async chainTime(): Promise<number> {
    const block = await this.ctx.publicClient.getBlock({ blockTag: "latest" });
    return Math.max(Date.now() / 1000, Number(block.timestamp));
  }

  /**
   * How long a task of this lease may still run: the paid duration (end − activatedAt) counted
   * on this node's clock from when it saw the activation, so a chain clock that runs ahead
   * (a devnet) does not cut the renter's time short; without that moment, what the chain says is left.
   */
  private async remainingMs(record: LeaseRecord): Promise<number> {
    const { chain } = record;
    if (chain.status !== "Active" || chain.end === 0) return chain.duration * 1000;
    if (record.activatedWallMs !== null) return Math.max(0, (chain.end - chain.activatedAt) * 1000 - (Date.now() - record.activatedWallMs));
    return Math.max(0, (chain.end - (await this.chainNow())) * 1000);
  }

  /**
   * Notice for interruptible leases that hold units this lease takes: until their `stopAt`, read
   * from the chain (our record of them may not have caught up with the preemption yet, and the
   * first notice given to the capacity manager is the one it keeps).
   */
  private async preemptionNoticeFor(record: LeaseRecord): Promise<number> {
    let latest = 0;
    const holders = new Set<string>();
    for (const unit of record.unitIds) {
      const holder = this.ctx.capacity.modes()[unit]?.leaseId;
      if (holder) holders.add(holder);
    }
    for (const holder of holders) {
      const view = await this.readChain(BigInt(holder.replace(/^lease-/, "")));
      if (view.endReason === "Preempted" && view.stopAt > latest) latest = view.stopAt;
    }
    if (latest === 0) return this.ctx.options.grace.preemptionNoticeMs;
    return Math.max(0, Math.round((latest - (await this.chainTime())) * 1000));
  }

  /**
   * Units for a lease on its machine: idle ones first, then units of leases that ended on-chain
   * (still stopping), then units of interruptible leases (preempted for this one).
   */
  private pickUnits(record: LeaseRecord): string[] {
    const machine = this.ctx.machines.machine(record.machineId);
    if (!machine) return [];
    const modes = this.ctx.capacity.modes();
    const rank = (unit: string): number => {
      const owner = this.unitOwner.get(unit);
      const holder = modes[unit]?.leaseId;
      if (owner === undefined && !holder) return 0;
      const ownerRecord = this.ctx.records.get(owner ?? BigInt((holder ?? "lease-0").replace(/^lease-/, "")));
      if (!ownerRecord) return 0;
      if (ownerRecord.chain.status !== "Open" && ownerRecord.chain.status !== "Active") return 1;
      if (ownerRecord.interruptible) return 2;
      return 3;
    };
    return machine.unitIds
      .map((unit, index) => ({ unit, index, rank: rank(unit) }))
      .filter((entry) => entry.rank < 3)
      .sort((a, b) => a.rank - b.rank || a.index - b.index)
      .slice(0, record.units)
      .map((entry) => entry.unit);
  }

  /** Takes a lease's units from the idle workload without a task (activated without a spec). */
  private async holdUnits(record: LeaseRecord): Promise<void> {
    const units = record.unitIds.length === record.units ? record.unitIds : this.pickUnits(record);
    for (const unit of units) this.unitOwner.set(unit, record.leaseId);
    const devices = units.map((unit) => this.ctx.inventory.units.find((u) => u.id === unit)?.device ?? unit);
    await this.ctx.records.update(record.leaseId, (r) => {
      r.unitIds = units;
      r.devices = devices;
    });
    const noticeMs = await this.preemptionNoticeFor({ ...record, unitIds: units });
    // Not awaited: freeing the units may wait out a preemption notice.
    void this.freeEndedHolders(units)
      .then(() => this.ctx.capacity.assign(taskIdOf(record.leaseId), units, record.interruptible ? "interruptible" : "ai", { preemptNoticeMs: noticeMs }))
      .catch((error: unknown) => this.ctx.logger.warn("Cannot take the units of an activated lease", { leaseId: record.leaseId }, error));
  }

  /**
   * Waits until leases that ended on-chain have let go of these units (their tasks stop with a
   * grace period): the capacity manager refuses units an on-demand lease still holds.
   */
  private async freeEndedHolders(units: readonly string[]): Promise<void> {
    const modes = this.ctx.capacity.modes();
    const holders = new Set<string>();
    for (const unit of units) {
      const holder = modes[unit]?.leaseId;
      if (!holder) continue;
      const record = this.ctx.records.get(BigInt(holder.replace(/^lease-/, "")));
      if (record && record.chain.status !== "Open" && record.chain.status !== "Active" && record.chain.endReason !== "Preempted") holders.add(holder);
    }
    await Promise.all([...holders].map((holder) => this.ctx.capacity.release(holder).catch(() => undefined)));
  }

  /**
   * The renter released units early (`LeaseShrunk`) and stopped paying for them. Without a task
   * yet, the lease keeps its first `units` units and the others go back to idle work and the next
   * lease at once. A task being prepared or running keeps them all until it ends: its
   * environment (CUDA_VISIBLE_DEVICES, container devices) cannot change under it, and another
   * tenant must never share a GPU with it. Until then those units are neither offered nor
   * reserved (`MachineMarket.setDraining`).
   */
  private async shrinkUnits(record: LeaseRecord, units: number): Promise<LeaseRecord> {
    if (this.live.has(record.leaseId)) {
      this.updateDraining(record.machineId);
      return record;
    }
    const keep = record.unitIds.slice(0, units);
    const dropped = record.unitIds.slice(units);
    const updated = await this.ctx.records.update(record.leaseId, (r) => {
      r.unitIds = keep;
      r.devices = r.devices.slice(0, units);
    });
    for (const unit of dropped) if (this.unitOwner.get(unit) === record.leaseId) this.unitOwner.delete(unit);
    await this.ctx.capacity.shrink(taskIdOf(record.leaseId), keep);
    this.ctx.logger.info("Lease shrunk; released units go back to idle work", { leaseId: record.leaseId, kept: keep, released: dropped });
    this.updateDraining(record.machineId);
    return updated;
  }

  /** Units of a machine held by tasks beyond what their leases pay for now (after a shrink). */
  private updateDraining(machineId: number): void {
    let draining = 0;
    for (const record of this.ctx.records.open()) {
      if (record.machineId !== machineId || record.released) continue;
      draining += Math.max(0, record.unitIds.length - record.units);
    }
    this.ctx.machines.setDraining(machineId, draining);
  }

  /** Hands a lease's units back to the idle workload and forgets them. */
  private async releaseUnits(leaseId: bigint): Promise<void> {
    await this.ctx.capacity.release(taskIdOf(leaseId)).catch(() => undefined);
    for (const [unit, owner] of this.unitOwner) if (owner === leaseId) this.unitOwner.delete(unit);
    const record = this.ctx.records.get(leaseId);
    if (record && record.unitIds.length > record.units) {
      // A shrunk lease's task is over: what it kept beyond its units is for sale again.
      await this.ctx.records.update(leaseId, (r) => {
        r.unitIds = r.unitIds.slice(0, r.units);
        r.devices = r.devices.slice(0, r.units);
      });
      this.updateDraining(record.machineId);
    }
    if (record && !record.released && record.phase === "ended") {
      await this.ctx.runtime.reap(taskIdOf(leaseId)).catch(() => 0);
      await this.ctx.records.update(leaseId, (r) => void (r.released = true));
    }
    this.updateGauges();
  }

  private updateGauges(): void {
    const counts = new Map<string, number>();
    for (const record of this.ctx.records.open()) counts.set(record.state, (counts.get(record.state) ?? 0) + 1);
    for (const state of ["waiting_spec", "preparing", "running", "succeeded", "failed", "exceeded", "stopped", "preempted"]) {
      this.ctx.metrics.providerLeases.set({ state }, counts.get(state) ?? 0);
    }
  }

  private withLock<T>(leaseId: bigint, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(leaseId) ?? Promise.resolve();
    const run = previous.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.locks.set(leaseId, tail);
    void tail.then(() => {
      if (this.locks.get(leaseId) === tail) this.locks.delete(leaseId);
    });
    return run;
  }
}
