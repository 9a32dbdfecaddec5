/**
 * Task inputs on the provider (issue 36, docs/data.md): before a task is prepared, each input's
 * CID is had through the node's data plane (InputCache: fetched once, cached across leases) and
 * handed to the runtime, which binds it read-only at its mount. A provider that cannot mount
 * inputs (data plane off, or tasks unsandboxed) refuses a task with inputs when it arrives, before
 * the lease is activated: the renter's SDK then closes the lease with its whole deposit back.
 */
import { SuanliError } from "../../../common/errors.js";
import { InputCache } from "../../data/inputs.js";
import type { DataStore } from "../../data/store.js";
import { silentLogger, type Logger } from "../../log/logger.js";
import type { TaskInputMount, TaskResume, TaskSpec } from "../runtime/task.js";
import { CheckpointBook } from "./checkpoints.js";

/** The provider cannot give a task its inputs; the task was not accepted (the lease is still Open). */
export class TaskInputsUnavailableError extends SuanliError {
  override name = "TaskInputsUnavailableError";
}

/** How this node gives tasks their inputs (and checkpoints, checkpoints.ts), or why it cannot; `data`: its data plane when on (outputs are pinned there too). */
export type ProviderInputs = ({ cache: InputCache; fetchTimeoutMs: number; checkpoints: CheckpointBook } | { refusal: string }) & { data?: DataStore };

/** From the node's data plane (undefined when data.enabled is false) and whether its tasks are sandboxed. */
export function providerInputs(data: DataStore | undefined, dataDir: string, sandboxed: boolean, logger: Logger = silentLogger()): ProviderInputs {
  if (!data) return { refusal: "its data plane is off (data.enabled is false)" };
  if (!sandboxed) return { refusal: 'it runs tasks unsandboxed (provider.runtime.sandbox "none"): there is no mount namespace to mount inputs in', data };
  const checkpoints = new CheckpointBook({
    data,
    dataDir,
    maxBytes: data.options.checkpointMaxBytes,
    retentionSeconds: data.options.checkpointRetentionSeconds,
    logger: logger.child({ part: "checkpoints" }),
  });
  return { cache: new InputCache(data, dataDir), fetchTimeoutMs: data.options.fetchTimeoutMs, checkpoints, data };
}

/** The node's checkpoint book, when it has a data plane its tasks can use. */
export function checkpointBook(inputs: ProviderInputs | undefined): CheckpointBook | undefined {
  return inputs && "checkpoints" in inputs ? inputs.checkpoints : undefined;
}

/**
 * The spec's resumeFrom checkpoint as a read-only host folder (fetched like an input, cached),
 * which the runtime copies, writable, into the task's checkpoint folder. Undefined without one.
 */
export async function prepareResume(inputs: ProviderInputs | undefined, spec: Pick<TaskSpec, "resumeFrom" | "resumeHints">, signal: AbortSignal): Promise<TaskResume | undefined> {
  if (!spec.resumeFrom) return undefined;
  const checkpoint = { inputs: [{ cid: spec.resumeFrom, mount: "/data/checkpoint" }] };
  refuseUnmountableInputs(inputs, checkpoint);
  // The hints name the providers that took the checkpoint (the SDK sets them on a resume): this
  // node need not be connected to them already.
  const [prepared] = await prepareInputs(inputs, checkpoint, signal, spec.resumeHints);
  return { cid: spec.resumeFrom, hostPath: prepared!.hostPath };
}

/** Throws TaskInputsUnavailableError when the spec has inputs this node cannot mount. */
export function refuseUnmountableInputs(inputs: ProviderInputs | undefined, spec: Pick<TaskSpec, "inputs">): void {
  if (!spec.inputs?.length) return;
  const refusal = inputs === undefined ? "it has no data plane" : "refusal" in inputs ? inputs.refusal : undefined;
  if (refusal === undefined) return;
  throw new TaskInputsUnavailableError(`This provider cannot mount task inputs: ${refusal}. The task was not accepted and the lease was not activated`, {
    metaMessages: ["Close the lease (the SDK does, and the whole deposit comes back) and submit to another provider."],
  });
}

/**
 * Each input of `spec` as a read-only host folder and its mount, fetching what is not cached yet
 * (from connected peers, and `providers`' multiaddrs when given).
 * Throws DataNotFoundError (blame: renter) when an input cannot be had within data.fetchTimeoutMs,
 * and the abort reason when `signal` aborts first (a fetch in flight finishes into the cache).
 */
export async function prepareInputs(inputs: ProviderInputs | undefined, spec: Pick<TaskSpec, "inputs">, signal: AbortSignal, providers?: string[]): Promise<TaskInputMount[]> {
  if (!spec.inputs?.length) return [];
  refuseUnmountableInputs(inputs, spec);
  const { cache, fetchTimeoutMs } = inputs as Extract<ProviderInputs, { cache: InputCache }>;
  const all = Promise.all(spec.inputs.map((input) => cache.prepare(input.cid, { timeoutMs: fetchTimeoutMs, ...(providers?.length ? { providers } : {}) })));
  const aborted = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason as Error);
    signal.addEventListener("abort", () => reject(signal.reason as Error), { once: true });
  });
  all.catch(() => undefined);
  aborted.catch(() => undefined);
  const prepared = await Promise.race([all, aborted]);
  return spec.inputs.map((input, index) => ({ mount: input.mount, hostPath: prepared[index]!.path }));
}
