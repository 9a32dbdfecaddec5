/**
 * The client's record of its tasks: which leases each ran on, the gas each step cost. Kept in
 * memory, and in Node optionally in a JSON file so the CLI can follow a task across
 * invocations. Secret environment values are never written: the stored spec has them redacted,
 * and the full spec (needed to migrate a task) lives only in the submitting process.
 */
import type { DeploymentBinding } from "../../common/deployment.js";
import { SuanliError } from "../../common/errors.js";
import type { TaskSpec } from "../../common/protocols/task-spec.js";
import { TaskStateError } from "../errors.js";
import type { TaskAttempt } from "../types.js";

/**
 * A task as the client keeps it (`client.tasks()`): the request it was matched with, its spec
 * (secrets redacted) and every lease it ran on.
 *
 * @example
 * import { createClient, type TaskRecord } from "suanli/sdk";
 * const tasks: TaskRecord[] = await client.tasks();
 * for (const task of tasks) {
 *   const current = task.attempts[task.attempts.length - 1];
 *   console.log(task.taskId, new Date(task.createdAt).toISOString(), current.leaseId, task.attempts.length - 1, "migrations");
 * }
 */
export type TaskRecord = {
  taskId: string;
  /** When the task was submitted, unix ms. */
  createdAt: number;
  /** The match request as given (JSON-safe). */
  request: Record<string, unknown>;
  /** The spec with secret values replaced by `[secret:NAME]`. */
  spec: TaskSpec;
  autoMigrate: boolean;
  /** Every lease the task ran on, oldest first; the last is the current one. */
  attempts: TaskAttempt[];
};

/**
 * The task's current lease: the last of its attempts. A record without one (a task file edited by
 * hand) is refused with a TaskStateError that names the task.
 */
export function currentAttempt(record: Pick<TaskRecord, "taskId" | "attempts">): TaskAttempt {
  const current = record.attempts[record.attempts.length - 1];
  if (!current) throw new TaskStateError(`Task ${record.taskId} has no lease in the task file; every task keeps at least the lease it was submitted on.`);
  return current;
}

/**
 * A task file holds another deployment's tasks than the chain the client talks to (a devnet
 * restarted with the same addresses reuses lease ids: its tasks would be mixed with the old ones).
 *
 * @example
 * import { createClient, TaskStoreMismatchError } from "suanli/sdk";
 * try {
 *   await createClient({ rpcUrl, account, bootstrap, stateFile: "tasks.json" }).then((client) => client.tasks());
 * } catch (error) {
 *   if (error instanceof TaskStoreMismatchError) console.error(error.message); // names both deployments and the fix
 * }
 */
export class TaskStoreMismatchError extends SuanliError {
  override name = "TaskStoreMismatchError";
}

/** The task file: the deployment its tasks belong to, and the tasks. */
export type TaskFile = { deployment: DeploymentBinding; tasks: TaskRecord[] };

export type TaskStorage = {
  load(): Promise<TaskRecord[]>;
  save(records: TaskRecord[]): Promise<void>;
};

export function storableTaskSpec(spec: TaskSpec): TaskSpec {
  const env: TaskSpec["env"] = {};
  for (const [name, value] of Object.entries(spec.env)) env[name] = typeof value === "string" ? value : `[secret:${name}]`;
  return { ...spec, env };
}

export class TaskStore {
  private readonly records = new Map<string, TaskRecord>();
  private readonly specs = new Map<string, TaskSpec>();
  private loaded = false;
  private writing: Promise<void> = Promise.resolve();

  constructor(private readonly storage?: TaskStorage) {}

  private async load(): Promise<void> {
    if (this.loaded) return;
    this.loaded = true;
    for (const record of (await this.storage?.load()) ?? []) this.records.set(record.taskId, record);
  }

  async get(taskId: string): Promise<TaskRecord | undefined> {
    await this.load();
    return this.records.get(taskId);
  }

  async list(): Promise<TaskRecord[]> {
    await this.load();
    return [...this.records.values()].sort((a, b) => a.createdAt - b.createdAt);
  }

  /** The spec with its secrets, when this process submitted the task. */
  fullSpec(taskId: string): TaskSpec | undefined {
    return this.specs.get(taskId);
  }

  async put(record: TaskRecord, fullSpec?: TaskSpec): Promise<void> {
    await this.load();
    this.records.set(record.taskId, record);
    if (fullSpec) this.specs.set(record.taskId, fullSpec);
    const snapshot = [...this.records.values()];
    this.writing = this.writing.then(() => this.storage?.save(snapshot));
    await this.writing;
  }
}
