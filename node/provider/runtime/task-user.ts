/**
 * The unprivileged host user renter tasks run as (issue #33 item 5: with the node run as root, a
 * task's uid 0 was host uid 0 and read every root-only file a bound path showed).
 *
 * - Process runtime (bubblewrap): a node run as root starts each task's bubblewrap as the system
 *   user `provider.runtime.taskUser` (default `suanli-task`, created by the node at its start
 *   when missing). bubblewrap then runs unprivileged: the task's user namespace maps only that
 *   uid, so the task holds no host uid 0, no root group, and no capability anywhere but its own
 *   namespace. The workspace is handed to that user (chownTree) before the task starts.
 * - Container runtime (rootful Podman): containers get `--uidmap 0:<start>:65536` (and the same
 *   for gids) from that user's subordinate range in /etc/subuid and /etc/subgid, added by the node
 *   (usermod) when missing: uid 0 in the container is host uid `<start>`, owner of nothing on the
 *   host.
 *
 * Each running task gets its own such user, `<taskUser>-<slot>` with its own subordinate range
 * (task-user-slots.ts); the base user runs only the start checks.
 *
 * A node not run as root needs none of this: its tasks already run as its own unprivileged uid
 * (bubblewrap maps only that uid; rootless Podman maps the container's root to it).
 */
import { chmod, lstat, lchown, mkdir, mkdtemp, readdir, readFile, realpath, rm, stat } from "node:fs/promises";
import { MAX_TASK_INPUTS } from "../../../common/protocols/task-inputs.js";
import { tmpdir } from "node:os";
import path from "node:path";
import { RuntimeUnavailableError } from "../errors.js";
import type { Logger } from "../../log/logger.js";
import { findExecutable } from "./limits.js";
import { execFileText } from "../../process/child.js";

/** The default `provider.runtime.taskUser`. */
export const DEFAULT_TASK_USER = "suanli-task";
/**
 * A base user name: with a slot's `-<index>` (task-user-slots.ts) still one useradd accepts
 * everywhere (no dots, no uppercase, at most 32 characters).
 */
export const TASK_USER_PATTERN = /^[a-z_][a-z0-9_-]{0,27}$/;
/** Ids a container's user namespace maps (uid 0 to 65535 inside). */
export const SUBORDINATE_COUNT = 65_536;
/** The lowest subordinate id the node hands out (shadow-utils' SUB_UID_MIN default). */
const SUBORDINATE_MIN = 100_000;

export type TaskUser = { name: string; uid: number; gid: number };
export type SubordinateRange = { start: number; count: number };

const SBIN_PATH = "/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/bin:/bin";

/** Whether this node runs as root (only then does it map tasks to another host user). */
export function nodeIsRoot(): boolean {
  return process.getuid?.() === 0;
}

/** The entry of `name` in a passwd file, or undefined. */
export async function lookupUser(name: string, passwdFile = "/etc/passwd"): Promise<TaskUser | undefined> {
  const text = await readFile(passwdFile, "utf8").catch(() => "");
  for (const line of text.split("\n")) {
    const [user, , uid, gid] = line.split(":");
    if (user === name && /^\d+$/.test(uid ?? "") && /^\d+$/.test(gid ?? "")) return { name, uid: Number(uid), gid: Number(gid) };
  }
  return undefined;
}

function run(file: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFileText(file, args, { timeout: 30_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof (error as NodeJS.ErrnoException & { code?: unknown }).code === "number" ? Number(error.code) : 1) : 0;
      resolve({ code, output: `${String(stdout)}${String(stderr)}`.trim() });
    });
  });
}

const users = new Map<string, Promise<TaskUser>>();

/**
 * The task user, created as a system user without home or login shell when missing (the node
 * runs as root: it can, and says so). Throws RuntimeUnavailableError with what to run otherwise.
 */
export function ensureTaskUser(name: string, logger: Logger | undefined, passwdFile = "/etc/passwd"): Promise<TaskUser> {
  let found = users.get(`${passwdFile}\0${name}`);
  if (!found) {
    found = (async () => {
      const existing = await lookupUser(name, passwdFile);
      if (existing) return checkUnprivileged(existing);
      const create = `useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin ${name}`;
      const useradd = await findExecutable("useradd", SBIN_PATH);
      if (!useradd)
        throw new RuntimeUnavailableError("process", `the task user ${name} does not exist and useradd is not installed`, [
          `Create it (${create}), or set provider.runtime.taskUser to an existing unprivileged user.`,
        ]);
      const made = await run(useradd, create.split(" ").slice(1));
      // Another node on this host may have created it meanwhile (useradd then exits 9).
      const created = await lookupUser(name, passwdFile);
      if (!created)
        throw new RuntimeUnavailableError("process", `the task user ${name} could not be created (useradd exit code ${made.code}: ${made.output.slice(0, 300)})`, [
          `Create it yourself (${create}), or set provider.runtime.taskUser to an existing unprivileged user.`,
        ]);
      if (made.code === 0)
        logger?.warn(`Created the system user ${name} (uid ${created.uid}): renter tasks run as this unprivileged user, never as root`, { user: name, uid: created.uid });
      return checkUnprivileged(created);
    })();
    found.catch(() => users.delete(`${passwdFile}\0${name}`));
    users.set(`${passwdFile}\0${name}`, found);
  }
  return found;
}

function checkUnprivileged(user: TaskUser): TaskUser {
  if (user.uid === 0 || user.gid === 0)
    throw new RuntimeUnavailableError("process", `the task user ${user.name} is root (uid ${user.uid}, gid ${user.gid})`, [
      "provider.runtime.taskUser must name an unprivileged user that owns nothing else on this host.",
    ]);
  return user;
}

/** The first range of `user` (by name or uid) in a subuid/subgid file. */
export function subordinateRangeOf(text: string, user: TaskUser): SubordinateRange | undefined {
  for (const line of text.split("\n")) {
    const [owner, start, count] = line.trim().split(":");
    if ((owner === user.name || owner === String(user.uid)) && /^\d+$/.test(start ?? "") && /^\d+$/.test(count ?? "")) return { start: Number(start), count: Number(count) };
  }
  return undefined;
}

/** The lowest start, a multiple of SUBORDINATE_COUNT at or above SUBORDINATE_MIN, that no range in the files overlaps. */
export function freeSubordinateStart(texts: readonly string[]): number {
  let end = SUBORDINATE_MIN;
  for (const text of texts)
    for (const line of text.split("\n")) {
      const [, start, count] = line.trim().split(":");
      if (/^\d+$/.test(start ?? "") && /^\d+$/.test(count ?? "")) end = Math.max(end, Number(start) + Number(count));
    }
  return Math.ceil(end / SUBORDINATE_COUNT) * SUBORDINATE_COUNT;
}

export type IdFiles = { subuid: string; subgid: string };
const DEFAULT_ID_FILES: IdFiles = { subuid: "/etc/subuid", subgid: "/etc/subgid" };

const ranges = new Map<string, Promise<SubordinateRange>>();

/**
 * The subordinate uid and gid range (the same numbers in both files) a rootful container of the
 * task user is mapped to: read from /etc/subuid and /etc/subgid, added with usermod when missing.
 */
export function ensureSubordinateRange(user: TaskUser, logger: Logger | undefined, files: IdFiles = DEFAULT_ID_FILES): Promise<SubordinateRange> {
  const key = `${files.subuid}\0${files.subgid}\0${user.name}`;
  let found = ranges.get(key);
  if (!found) {
    found = (async () => {
      const read = async () => [await readFile(files.subuid, "utf8").catch(() => ""), await readFile(files.subgid, "utf8").catch(() => "")] as const;
      const usable = (uids: SubordinateRange | undefined, gids: SubordinateRange | undefined) =>
        uids && gids && uids.start === gids.start && uids.count >= SUBORDINATE_COUNT && gids.count >= SUBORDINATE_COUNT ? uids : undefined;
      let [uidText, gidText] = await read();
      const present = usable(subordinateRangeOf(uidText, user), subordinateRangeOf(gidText, user));
      if (present) return { start: present.start, count: SUBORDINATE_COUNT };
      if (subordinateRangeOf(uidText, user) || subordinateRangeOf(gidText, user))
        throw new RuntimeUnavailableError("container", `${files.subuid} / ${files.subgid} give ${user.name} ranges that differ or hold fewer than ${SUBORDINATE_COUNT} ids`, [
          `Give ${user.name} one range of ${SUBORDINATE_COUNT} ids, the same in both files (e.g. ${user.name}:${freeSubordinateStart([uidText, gidText])}:${SUBORDINATE_COUNT}).`,
        ]);
      const start = freeSubordinateStart([uidText, gidText]);
      const last = start + SUBORDINATE_COUNT - 1;
      const command = `usermod --add-subuids ${start}-${last} --add-subgids ${start}-${last} ${user.name}`;
      const usermod = await findExecutable("usermod", SBIN_PATH);
      const made = usermod ? await run(usermod, command.split(" ").slice(1)) : { code: 127, output: "usermod is not installed" };
      [uidText, gidText] = await read();
      const added = usable(subordinateRangeOf(uidText, user), subordinateRangeOf(gidText, user));
      if (!added)
        throw new RuntimeUnavailableError(
          "container",
          `containers need a subordinate id range for ${user.name} and it could not be added (${made.output.slice(0, 300) || `exit code ${made.code}`})`,
          [`Add one (${command}, or the line ${user.name}:${start}:${SUBORDINATE_COUNT} in both ${files.subuid} and ${files.subgid}).`],
        );
      logger?.warn(`Added the subordinate id range ${added.start}-${added.start + SUBORDINATE_COUNT - 1} for ${user.name}: container tasks run as these host ids, never as root`, {
        user: user.name,
        start: added.start,
      });
      return { start: added.start, count: SUBORDINATE_COUNT };
    })();
    found.catch(() => ranges.delete(key));
    ranges.set(key, found);
  }
  return found;
}

/**
 * Hands a workspace (before its task starts: nothing else writes there) to `uid:gid`: every entry
 * with lchown, never through a link, folders walked only when they really are folders.
 */
export async function chownTree(dir: string, uid: number, gid: number, maxEntries = 10_000_000): Promise<number> {
  let count = 0;
  const walk = async (folder: string): Promise<void> => {
    for (const entry of await readdir(folder, { withFileTypes: true })) {
      if (++count > maxEntries) throw new Error(`more than ${maxEntries} entries under ${dir}`);
      const full = path.join(folder, entry.name);
      await lchown(full, uid, gid);
      if (entry.isDirectory() && !(await lstat(full)).isSymbolicLink()) await walk(full);
    }
  };
  await lchown(dir, uid, gid);
  await walk(dir);
  return count;
}

/**
 * The first folder on the way to `target` (itself excluded) that `user` may not search, by its
 * mode bits, or undefined when the user reaches `target`. Resolved through links first (bubblewrap
 * binds what they point to).
 */
export async function blockingFolder(target: string, user: TaskUser): Promise<string | undefined> {
  const real = await realpath(target).catch(() => path.resolve(target));
  let folder = path.dirname(real);
  const chain: string[] = [];
  for (;;) {
    chain.unshift(folder);
    const parent = path.dirname(folder);
    if (parent === folder) break;
    folder = parent;
  }
  for (const dir of chain) {
    const info = await stat(dir).catch(() => undefined);
    if (!info) return undefined; // missing: bubblewrap's -try skips it, there is nothing to reach
    const bits = info.uid === user.uid ? (info.mode >> 6) & 1 : info.gid === user.gid ? (info.mode >> 3) & 1 : info.mode & 1;
    if (!bits) return dir;
  }
  return undefined;
}

/** The util-linux tools that start a task as the task user. */
export type TaskUserTools = { unshare: string; mount: string; setpriv: string };

/** Finds unshare, mount and setpriv, or says what is missing. */
export async function findTaskUserTools(): Promise<TaskUserTools | { missing: string[] }> {
  const search = `${process.env.PATH ?? ""}:${SBIN_PATH}`;
  const [unshare, mount, setpriv] = await Promise.all(["unshare", "mount", "setpriv"].map((name) => findExecutable(name, search)));
  if (!unshare || !mount || !setpriv) return { missing: [!unshare && "unshare", !mount && "mount", !setpriv && "setpriv"].filter((name): name is string => Boolean(name)) };
  return { unshare, mount, setpriv };
}

/**
 * The argv prefix, run as root, that ends as the task user just before bubblewrap:
 *
 * 1. `unshare --mount`: a mount namespace of its own (private propagation: nothing leaks back to
 *    the host), in which
 * 2. the workspace is bound onto `stage`, a folder every user can reach: the workspace itself
 *    often lies below folders only root may search (a data dir of mode 0700, /root), and
 *    bubblewrap, run unprivileged, resolves what it binds with the task user's rights;
 * 3. `setpriv` drops to the task user's uid and gid with no supplementary group (root's groups
 *    would otherwise open every group-readable file) and no-new-privs (no setuid program inside
 *    can regain anything), then execs bubblewrap, which binds `stage` at the workspace's path.
 *
 * Task inputs (issue 36) lie in the data dir too: each is bound onto its own staging folder
 * (`inputStages`) the same way, and bubblewrap binds that read-only at the input's mount.
 */
export function taskUserPrefix(tools: TaskUserTools, user: TaskUser, workspace: string, stage: string, inputs: readonly (readonly [string, string])[] = []): string[] {
  // Binds each SOURCE TARGET pair up to the "--", then execs the rest.
  const script = 'm="$1"; shift; while [ "$1" != "--" ]; do "$m" --bind "$1" "$2" || exit 125; shift 2; done; shift; exec "$@"';
  return [
    tools.unshare,
    "--mount",
    "--propagation",
    "private",
    "--",
    "/bin/sh",
    "-c",
    script,
    "suanli-stage",
    tools.mount,
    workspace,
    stage,
    ...inputs.flatMap(([source, target]) => [source, target]),
    "--",
    tools.setpriv,
    `--reuid=${user.uid}`,
    `--regid=${user.gid}`,
    "--clear-groups",
    "--no-new-privs",
    "--",
  ];
}

/** A root node's task user, the tools that switch to it and the folders its workspaces and task inputs are staged on. */
export type SandboxTaskUser = { user: TaskUser; tools: TaskUserTools; stage: string; inputStages: string[] };

/** Throws RuntimeUnavailableError when `user` cannot reach one of the operator's read-only paths. */
export async function checkReachable(user: TaskUser, readOnlyPaths: readonly string[]): Promise<void> {
  for (const entry of readOnlyPaths) {
    const blocked = await blockingFolder(entry, user);
    if (blocked)
      throw new RuntimeUnavailableError(
        "process",
        `provider.runtime.readOnlyPaths has ${entry}, which the task user ${user.name} (uid ${user.uid}) cannot reach: ${blocked} is not searchable by it`,
        [`Let it search that folder (chmod o+x ${blocked}), or move what the tasks need elsewhere.`],
      );
  }
}

/** The trivial sandbox that checks bubblewrap works as the task user. */
const PROBE_ARGS = ["--unshare-user", "--unshare-pid", "--unshare-net", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"];

/**
 * For the process runtime of a root node: the task user (created when missing), the tools that
 * switch to it, a staging folder, each operator read-only path checked reachable by that user,
 * and one trivial sandbox run as it. Throws RuntimeUnavailableError saying what to do.
 */
export async function sandboxTaskUser(options: { name: string; readOnlyPaths: readonly string[]; bwrapPath: string; logger?: Logger }): Promise<SandboxTaskUser> {
  const { name } = options;
  const user = await ensureTaskUser(name, options.logger);
  const tools = await findTaskUserTools();
  if ("missing" in tools)
    throw new RuntimeUnavailableError("process", `tasks run as the task user ${name} and ${tools.missing.join(", ")} (util-linux) is not installed`, [
      "Install util-linux and mount.",
    ]);
  await checkReachable(user, options.readOnlyPaths);
  const stage = await mkdtemp(path.join(tmpdir(), "suanli-stage-"));
  try {
    const blocked = await blockingFolder(stage, user);
    if (blocked)
      throw new RuntimeUnavailableError("process", `the staging folder ${stage} is below ${blocked}, which the task user ${name} cannot search`, [
        "Set TMPDIR to a folder every user can reach (/tmp).",
      ]);
    const probe = [...taskUserPrefix(tools, user, stage, stage), options.bwrapPath, ...PROBE_ARGS];
    const failure = await new Promise<string | undefined>((resolve) =>
      execFileText(probe[0]!, probe.slice(1), { timeout: 10_000 }, (error, _out, stderr) => resolve(error ? String(stderr).trim() || error.message : undefined)),
    );
    if (failure !== undefined)
      throw new RuntimeUnavailableError("process", `bubblewrap cannot create a sandbox as the task user ${name} (uid ${user.uid}): ${failure.slice(0, 300)}`, [
        "Allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu, an AppArmor profile for bwrap).",
      ]);
    // One empty folder per possible input, in a folder every user can search (MAX_TASK_INPUTS).
    const inputStages = Array.from({ length: MAX_TASK_INPUTS }, (_, index) => path.join(`${stage}-inputs`, String(index)));
    for (const folder of inputStages) await mkdir(folder, { recursive: true, mode: 0o755 });
    await chmod(`${stage}-inputs`, 0o755);
    return { user, tools, stage, inputStages };
  } catch (error) {
    await removeStages({ stage });
    throw error;
  }
}

/**
 * Removes the staging folders of sandboxTaskUser (`stage` and `<stage>-inputs`, empty mount points
 * in the host's namespace): the runtime's close does when the node stops, so no node leaves them
 * in /tmp.
 */
export async function removeStages(mapped: { stage: string } | undefined): Promise<void> {
  if (mapped) await Promise.all([mapped.stage, `${mapped.stage}-inputs`].map((folder) => rm(folder, { recursive: true, force: true })));
}
