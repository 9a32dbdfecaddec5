/**
 * What a renter asks a provider to run (the task spec, validated at the boundary) and what the
 * provider adds when it runs it (the launch: leased devices, lease time). Environment values can
 * be marked secret: `env: { TOKEN: { value: "...", secret: true } }`. Secret values reach the
 * child process and nothing else: log lines, error messages, results and anything stored get
 * them replaced (see {@link Redactor}).
 */

import { openTaskFile, readTaskFile, TaskFileError } from "./task-files.js";
export { taskSpecSchema, type TaskSpec } from "../../../common/protocols/task-spec.js";
import type { TaskSpec } from "../../../common/protocols/task-spec.js";

/** What the provider adds to a spec when a lease starts it. */
export type TaskLaunch = {
  /** Names the workspace and the container; letters, digits, `.`, `_`, `-` (a lease id fits). */
  taskId: string;
  spec: TaskSpec;
  /** CUDA_VISIBLE_DEVICES entries of the leased units (GPU or MIG UUIDs). Empty for CPU-only runs. */
  devices: string[];
  /** How long the task may run: the lease time left. It is stopped (SIGTERM, grace, SIGKILL) after. */
  durationMs: number;
  /** For rank 0 of a group job: this machine's rendezvous address (provider.groupJobs). */
  master?: { addr: string; port: number };
  /** The spec's inputs, prepared (node/data/inputs.ts): each host folder is bound read-only at its mount. */
  inputs?: TaskInputMount[];
  /** The checkpoint to resume from (spec.resumeFrom), fetched: copied, writable, into the task's checkpoint folder. */
  resume?: TaskResume;
};

/** A fetched checkpoint: its CID (the task's SUANLI_RESUMED_FROM) and the read-only host folder holding it. */
export type TaskResume = { cid: string; hostPath: string };

/** A prepared task input: the read-only host folder (or file) holding a CID, and where the task sees it (under /data). */
export type TaskInputMount = { mount: string; hostPath: string };

export const TASK_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Plain values of the env as the child gets them (secrets in clear). */
export function childEnv(spec: TaskSpec): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(spec.env)) {
    // The provider agent opens sealed values when the task arrives (leases.ts); one left sealed here is a bug.
    if (typeof value !== "string" && !("value" in value)) throw new TypeError(`The secret ${name} is still sealed`);
    out[name] = typeof value === "string" ? value : value.value;
  }
  return out;
}

/** The file, in the task's workspace, a task with task liveness writes its nonce into. */
export const LIVENESS_FILE_NAME = ".suanli-liveness";

/**
 * SUANLI_LIVENESS_NONCE and SUANLI_LIVENESS_FILE of a task whose renter asked for task liveness
 * (none otherwise); `workspace` is the workspace as the task sees it.
 */
export function livenessEnvironment(spec: Pick<TaskSpec, "taskLiveness">, workspace: string): Record<string, string> {
  if (!spec.taskLiveness) return {};
  return { SUANLI_LIVENESS_NONCE: spec.taskLiveness.nonce, SUANLI_LIVENESS_FILE: `${workspace}/${LIVENESS_FILE_NAME}` };
}

/** Bytes of the liveness file read at most: a nonce and a newline fit many times over. */
const LIVENESS_READ_BYTES = 4096;

/**
 * Whether the task's liveness file (host side: in `workspace`) holds `nonce`. A missing or other
 * file does not. The task owns that name: it is opened without following a link and only as a
 * regular file (a link to a host file, a FIFO or /dev/zero is "does not hold it"), and only its
 * first 4 KiB are read.
 */
export async function echoesNonce(workspace: string, nonce: string): Promise<boolean> {
  const bytes = await readTaskFile(workspace, LIVENESS_FILE_NAME, LIVENESS_READ_BYTES).catch(() => undefined);
  return bytes !== undefined && bytes.toString("utf8").trim() === nonce;
}

/**
 * When the task last wrote its heartbeat: the liveness file's modification time (ms) while the
 * file holds `nonce`, else undefined. Opened like {@link echoesNonce} (no link followed, a regular
 * file only, 4 KiB read), and the time is the opened file's own (fstat), never a second lookup.
 */
export async function livenessHeartbeatAt(workspace: string, nonce: string): Promise<number | undefined> {
  let handle;
  try {
    handle = await openTaskFile(workspace, LIVENESS_FILE_NAME);
  } catch (error) {
    if (error instanceof TaskFileError || (error as NodeJS.ErrnoException).code !== undefined) return undefined;
    throw error;
  }
  try {
    const { mtimeMs } = await handle.stat();
    const buffer = Buffer.alloc(LIVENESS_READ_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, LIVENESS_READ_BYTES, 0);
    return buffer.subarray(0, bytesRead).toString("utf8").trim() === nonce ? mtimeMs : undefined;
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** The env as it may be stored or shown: secret values replaced by `[secret]`. */
export function storableEnv(spec: TaskSpec): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(spec.env)) out[name] = typeof value === "string" ? value : "[secret]";
  return out;
}

/** The spec as it may be stored (the store keeps this, never the raw spec). */
export function storableSpec(spec: TaskSpec): Omit<TaskSpec, "env"> & { env: Record<string, string> } {
  return { ...spec, env: storableEnv(spec) };
}

/** Secret values of a spec, by variable name. */
export function secretsOf(spec: TaskSpec): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, value] of Object.entries(spec.env)) if (typeof value !== "string" && "value" in value) out.set(name, value.value);
  return out;
}

/**
 * Replaces secret values in text. Each value is replaced wherever it appears, longest first (so a
 * secret containing another is replaced whole), and so is each line of a multi-line secret, since
 * output is read line by line.
 */
export class Redactor {
  private readonly patterns: { needle: string; label: string }[];

  constructor(secrets: ReadonlyMap<string, string>) {
    const patterns: { needle: string; label: string }[] = [];
    for (const [name, value] of secrets) {
      if (value === "") continue;
      patterns.push({ needle: value, label: `[secret:${name}]` });
      if (value.includes("\n")) {
        for (const part of value.split(/\r?\n/)) if (part.trim().length >= 4) patterns.push({ needle: part, label: `[secret:${name}]` });
      }
    }
    patterns.sort((a, b) => b.needle.length - a.needle.length);
    this.patterns = patterns;
  }

  get empty(): boolean {
    return this.patterns.length === 0;
  }

  redact(text: string): string {
    let out = text;
    for (const { needle, label } of this.patterns) if (out.includes(needle)) out = out.split(needle).join(label);
    return out;
  }
}

/**
 * Replaces every given secret value in `text`.
 *
 * @example
 * import { redact } from "./task.js";
 * redact("token=abc123", new Map([["TOKEN", "abc123"]])); // "token=[secret:TOKEN]"
 */
export function redact(text: string, secrets: ReadonlyMap<string, string>): string {
  return new Redactor(secrets).redact(text);
}

/**
 * Redacts secret values in an error's message, short message and details, in place, and returns
 * it. For errors raised while preparing a task, before they reach a log or the renter.
 */
export function redactError<E>(error: E, redactor: Redactor): E {
  if (redactor.empty || !(error instanceof Error)) return error;
  const target = error as unknown as Record<string, unknown>;
  for (const key of ["message", "shortMessage", "details"]) {
    if (typeof target[key] === "string") target[key] = redactor.redact(target[key] as string);
  }
  return error;
}
