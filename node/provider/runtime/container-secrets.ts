/**
 * How a container task gets its secret env values without the engine keeping a copy (issue #33,
 * item 8). Whatever goes into the engine's configuration of a container — `--env`, `--env-file`,
 * Podman's own secrets — is written to its state: `podman inspect` shows it while the container
 * runs, the OCI spec (`userdata/config.json`) holds it on disk, and Podman's
 * `libpod/bolt_state.db` keeps the plaintext in free pages after the container is removed.
 *
 * Instead the node writes each secret, after the container is created and before it starts, to a
 * file in a per-task directory on a RAM filesystem of the host (tmpfs: `$XDG_RUNTIME_DIR`,
 * `/dev/shm` or `/run`, the first that is one), bind-mounted read-only at `/run/secrets` in the
 * container; the directory is removed when the task ends. The engine only ever sees the
 * directory's path. Inside the container:
 *
 * - `/run/secrets/<NAME>`: each secret's value, byte for byte (the Docker and Kubernetes habit);
 * - the environment, as the process runtime gives it: the task's command runs under the image's
 *   `/bin/sh`, which loads `/run/secrets/.suanli-env` (shell-quoted `NAME='value'` lines) and then
 *   execs the command. A string command ran under `/bin/sh -c` already; an argv command gets the
 *   loader too when the image has `/bin/sh`. With Podman the node asks first (imageHasShell) and,
 *   in an image without one, runs the argv as it is: its secrets are then the files only. Docker
 *   is not asked: there an argv command with secrets needs /bin/sh in its image.
 */
import { chmod, lstat, mkdir, rm, statfs, writeFile } from "node:fs/promises";
import path from "node:path";
import { removeContainers, runEngine, type ContainerEngine } from "./container-engine.js";
import type { TaskSpec } from "./task.js";
import { shellQuote } from "./tty.js";

/** Where a container task finds its secrets. */
export const TASK_SECRETS_DIR = "/run/secrets";
/** The file of shell-quoted assignments the loader sources. */
export const SECRETS_ENV_FILE = ".suanli-env";

/** statfs(2) magic numbers of the RAM filesystems (linux/magic.h). */
const RAM_FILESYSTEMS = new Set([0x01021994 /* tmpfs */, 0x858458f6 /* ramfs */]);

/** Where the node looks for a RAM filesystem to keep secrets on, in order. */
export function defaultSecretsBases(): string[] {
  return [process.env.XDG_RUNTIME_DIR, "/dev/shm", "/run"].filter((dir): dir is string => typeof dir === "string" && path.isAbsolute(dir));
}

/** Whether `dir` lives on a RAM filesystem (what is written there never reaches a disk, short of swap). */
export async function onRamFilesystem(dir: string): Promise<boolean> {
  try {
    return RAM_FILESYSTEMS.has((await statfs(dir)).type);
  } catch {
    return false;
  }
}

/**
 * The node's own directory for task secrets: `<base>/suanli-secrets-<owner>` on the first base
 * that is a RAM filesystem, created 0700 (with `create`, the default: a node makes it only for a
 * task with secrets). One that exists but is not a directory of this user with mode 0700 (a link,
 * or made by another user of a shared /dev/shm) is never written to. Undefined when no base
 * qualifies.
 */
export async function findSecretsRoot(owner: string, bases: readonly string[] = defaultSecretsBases(), options: { create?: boolean } = {}): Promise<string | undefined> {
  const create = options.create ?? true;
  for (const base of bases) {
    if (!(await onRamFilesystem(base))) continue;
    const dir = path.join(base, `suanli-secrets-${owner}`);
    if (create) {
      try {
        await mkdir(dir, { mode: 0o700 });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") continue;
      }
    }
    const info = await lstat(dir).catch(() => undefined);
    if (!info && !create) return dir;
    if (!info || !info.isDirectory() || info.uid !== process.getuid?.() || (info.mode & 0o777) !== 0o700) continue;
    return dir;
  }
  return undefined;
}

/** The lines the loader sources: `NAME='value'`, quoted for /bin/sh (any byte but NUL survives). */
export function secretsEnvText(secrets: ReadonlyMap<string, string>): string {
  return [...secrets].map(([name, value]) => `${name}=${shellQuote(value)}\n`).join("");
}

/** One task's secrets directory on the host: written after the container is created, removed when the task ends. */
export class TaskSecrets {
  private constructor(
    /** The directory on the host (mounted read-only at TASK_SECRETS_DIR). */
    readonly hostDir: string,
    private readonly secrets: ReadonlyMap<string, string>,
  ) {}

  /** Creates the (empty) directory `<root>/<taskId>`; the container is created with it mounted. */
  static async create(root: string, taskId: string, secrets: ReadonlyMap<string, string>): Promise<TaskSecrets> {
    const hostDir = path.join(root, taskId);
    await removeSecretsDir(hostDir);
    await mkdir(hostDir, { mode: 0o700 });
    return new TaskSecrets(hostDir, secrets);
  }

  /**
   * Writes one file per secret and the loader's file, then opens the directory for reading: the
   * image's user may be anyone. The root it is in stays 0700, so no other user of the host
   * reaches it.
   */
  async write(): Promise<void> {
    for (const [name, value] of this.secrets) await writeFile(path.join(this.hostDir, name), value, { mode: 0o444, flag: "wx" });
    await writeFile(path.join(this.hostDir, SECRETS_ENV_FILE), secretsEnvText(this.secrets), { mode: 0o444, flag: "wx" });
    await chmod(this.hostDir, 0o555);
  }

  remove(): Promise<void> {
    return removeSecretsDir(this.hostDir);
  }
}

/** Removes a task's secrets directory (made writable first: it is left read-only while the task runs). */
export async function removeSecretsDir(hostDir: string): Promise<void> {
  await chmod(hostDir, 0o700).catch(() => undefined);
  await rm(hostDir, { recursive: true, force: true });
}

/** Sources the secrets into the environment (exported), or fails. */
const LOAD = `set -a && . ${TASK_SECRETS_DIR}/${SECRETS_ENV_FILE} && set +a`;

/**
 * The argv that loads the secrets into the environment with the image's /bin/sh and then runs the
 * task's command exactly as it would have run: a string command under `/bin/sh -c`, an argv
 * command by exec. The command travels as arguments, never pasted into the script.
 */
export function withSecretsLoader(command: TaskSpec["command"]): string[] {
  if (typeof command === "string") return ["/bin/sh", "-c", `${LOAD} && exec /bin/sh -c "$1"`, "suanli-task", command];
  return ["/bin/sh", "-c", `${LOAD} && exec "$@"`, "suanli-task", ...command];
}

/** Whether an engine's message says the loader's /bin/sh is missing from the image. */
export function isLoaderShellMissing(message: string): boolean {
  return /"\/bin\/sh"/.test(message) && /not found|no such file/i.test(message);
}

/**
 * Whether the image has a /bin/sh, asked of Podman without running anything in it: a throwaway
 * container with /bin/sh as its process and no init is created and initialised (`podman init`:
 * the OCI runtime resolves the executable in the image's filesystem and stops before running it),
 * then removed. Anything but "/bin/sh not found" counts as yes: the task's own create and init
 * then say what is wrong.
 */
export async function imageHasShell(engine: ContainerEngine, imageId: string, flags: readonly string[]): Promise<boolean> {
  const name = `suanli-shprobe-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  try {
    const created = await runEngine(engine.path, ["create", "--name", name, "--network", "none", ...flags, "--entrypoint", "/bin/sh", imageId, "-c", ":"], 120_000);
    if (created.code !== 0) return true;
    const init = await runEngine(engine.path, ["init", name], 120_000);
    return init.code === 0 || !isLoaderShellMissing(init.stderr || init.stdout);
  } finally {
    await removeContainers(engine, [name]).catch(() => 0);
  }
}
