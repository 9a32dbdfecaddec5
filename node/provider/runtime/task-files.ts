/**
 * Reading what a task wrote (its `output/` folder, its liveness file) without ever following a
 * link. A running task controls every name under its workspace and can swap a folder for a
 * symbolic link to the node's data dir at any instant (`renameat2(RENAME_EXCHANGE)`, or two
 * `mv`s), so a check of a path followed by an open of the same path reads whatever the link
 * points at by then. Here no path is checked and then re-resolved: every component is opened
 * relative to the folder opened before it, with `O_NOFOLLOW`, so a link is refused at the moment
 * it is met.
 *
 * Node's fs API has no `openat`; the fd-relative open is `open("/proc/self/fd/<dir fd>/<name>")`:
 * the kernel resolves `/proc/self/fd/<n>` to the very folder that fd holds (not to a path that
 * could have changed since), and `O_NOFOLLOW` refuses `<name>` if it is a link. Folders and the
 * final file are first opened with `O_PATH` (no read, no side effect even on a device node or a
 * FIFO), checked with fstat, and only a regular file is reopened for reading through its own
 * fd. Linux only (the runtimes that run tasks are).
 *
 * What a task can make the node read is therefore only what the task could write or see itself:
 * its own workspace, through folders that really are folders. Links are not listed, not followed
 * and not served; special files (FIFOs, sockets, devices) are skipped.
 */
import { constants } from "node:fs";
import { mkdir, open, readdir, type FileHandle } from "node:fs/promises";
import path from "node:path";
import type { Hex } from "viem";
import { digestOpenedFiles } from "../../../common/output-digest.js";

/** Linux `O_PATH` (asm-generic/fcntl.h): an fd that names a file without opening it for I/O. */
const O_PATH = 0o10000000;
const DIR_FLAGS = O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const LEAF_FLAGS = O_PATH | constants.O_NOFOLLOW;

/** Entries walked at most: a task cannot make a listing run without bound. */
export const TASK_FILES_MAX_ENTRIES = 1_000_000;
/** Folder depth at most (the output protocol's paths are at most 4096 bytes anyway). */
export const TASK_FILES_MAX_DEPTH = 128;

/** A regular file of a task's folder: its relative POSIX path and its size when listed. */
export type TaskFile = { rel: string; size: number };

/**
 * A task's file could not be read as a regular file inside its folder: a component is a link,
 * not a folder, gone, or the file is not a regular file (any more).
 */
export class TaskFileError extends Error {
  override name = "TaskFileError";
}

function fdPath(handle: FileHandle, name?: string): string {
  return name === undefined ? `/proc/self/fd/${handle.fd}` : `/proc/self/fd/${handle.fd}/${name}`;
}

function checkName(name: string, rel: string): void {
  if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0")) throw new TaskFileError(`${rel} is not a plain relative path`);
}

async function closeQuietly(handle: FileHandle | undefined): Promise<void> {
  await handle?.close().catch(() => undefined);
}

/** Opens `root` itself as a folder; its last component must not be a link. Undefined when it is not a folder. */
async function openRoot(root: string): Promise<FileHandle | undefined> {
  if (process.platform !== "linux") throw new TaskFileError("Reading a task's files needs Linux (/proc/self/fd and O_PATH)");
  try {
    return await open(root, DIR_FLAGS);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // Missing, a link (ELOOP) or not a folder: there is no folder to read.
    if (code === "ENOENT" || code === "ELOOP" || code === "ENOTDIR") return undefined;
    throw error;
  }
}

/** Opens the folder `name` inside `dir` (never through a link). */
async function openSubdir(dir: FileHandle, name: string, rel: string): Promise<FileHandle> {
  try {
    return await open(fdPath(dir, name), DIR_FLAGS);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOTDIR" || code === "ELOOP" || code === "ENOENT") throw new TaskFileError(`${rel} is no longer a folder inside the task's folder`);
    throw error;
  }
}

/** Opens the regular file `name` inside `dir` for reading (never through a link, never a special file). */
async function openLeaf(dir: FileHandle, name: string, rel: string): Promise<FileHandle> {
  let pathFd: FileHandle;
  try {
    pathFd = await open(fdPath(dir, name), LEAF_FLAGS);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") throw new TaskFileError(`${rel} is gone from the task's folder`);
    throw error;
  }
  try {
    const info = await pathFd.stat();
    if (!info.isFile()) throw new TaskFileError(`${rel} is not a regular file (a link, a folder or a special file)`);
    // Reopening through the O_PATH fd opens that very inode: nothing is looked up by name again.
    const handle = await open(fdPath(pathFd), constants.O_RDONLY | constants.O_NOCTTY);
    const opened = await handle.stat();
    if (!opened.isFile() || opened.ino !== info.ino || opened.dev !== info.dev) {
      await closeQuietly(handle);
      throw new TaskFileError(`${rel} changed while it was opened`);
    }
    return handle;
  } finally {
    await closeQuietly(pathFd);
  }
}

/**
 * Opens `rel` (a relative POSIX path) under the folder `root` for reading: each folder on the
 * way is opened relative to the one before it without following links, and the file must be a
 * regular file. Throws TaskFileError when any of that does not hold.
 *
 * @example
 * import { openTaskFile } from "./task-files.js";
 * const handle = await openTaskFile("/var/lib/suanli/workspaces/lease-7/output", "ckpt/model.bin");
 * try { console.log((await handle.stat()).size); } finally { await handle.close(); }
 */
export async function openTaskFile(root: string, rel: string): Promise<FileHandle> {
  const parts = rel.split("/");
  if (parts.length > TASK_FILES_MAX_DEPTH + 1) throw new TaskFileError(`${rel} is nested deeper than ${TASK_FILES_MAX_DEPTH} folders`);
  for (const part of parts) checkName(part, rel);
  let dir = await openRoot(root);
  if (!dir) throw new TaskFileError(`The task's folder ${path.basename(root)} is not a folder (or is gone)`);
  try {
    for (const part of parts.slice(0, -1)) {
      const next = await openSubdir(dir, part, rel);
      await closeQuietly(dir);
      dir = next;
    }
    return await openLeaf(dir, parts.at(-1)!, rel);
  } finally {
    await closeQuietly(dir);
  }
}

/**
 * The regular files under the folder `root`, in digest order (ascending bytes of the relative
 * path), listed without following links: links and special files are skipped, and a folder that
 * is swapped for a link while the walk runs is skipped too. Undefined when `root` is not a folder
 * (missing, or itself a link).
 *
 * @example
 * import { listTaskFiles } from "./task-files.js";
 * for (const file of (await listTaskFiles("/var/lib/suanli/workspaces/lease-7/output")) ?? []) console.log(file.rel, file.size);
 */
export async function listTaskFiles(root: string, maxEntries = TASK_FILES_MAX_ENTRIES): Promise<TaskFile[] | undefined> {
  const top = await openRoot(root);
  if (!top) return undefined;
  const out: TaskFile[] = [];
  let seen = 0;
  const walk = async (dir: FileHandle, prefix: string, depth: number): Promise<void> => {
    const entries = await readdir(fdPath(dir), { withFileTypes: true });
    for (const entry of entries) {
      if (++seen > maxEntries) throw new TaskFileError(`The task's folder holds more than ${maxEntries} entries`);
      const rel = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
      if (entry.isDirectory()) {
        if (depth >= TASK_FILES_MAX_DEPTH) throw new TaskFileError(`${rel} is nested deeper than ${TASK_FILES_MAX_DEPTH} folders`);
        const sub = await openSubdir(dir, entry.name, rel).catch((error: unknown) => {
          if (error instanceof TaskFileError) return undefined; // swapped or removed meanwhile: not listed
          throw error;
        });
        if (!sub) continue;
        try {
          await walk(sub, rel, depth + 1);
        } finally {
          await closeQuietly(sub);
        }
      } else if (entry.isFile()) {
        // The size as the entry is now, never through a link (the leaf is opened O_PATH|O_NOFOLLOW).
        const leaf = await open(fdPath(dir, entry.name), LEAF_FLAGS).catch(() => undefined);
        if (!leaf) continue;
        try {
          const info = await leaf.stat();
          if (info.isFile()) out.push({ rel, size: info.size });
        } finally {
          await closeQuietly(leaf);
        }
      }
    }
  };
  try {
    await walk(top, "", 0);
  } finally {
    await closeQuietly(top);
  }
  out.sort((a, b) => Buffer.compare(Buffer.from(a.rel, "utf8"), Buffer.from(b.rel, "utf8")));
  return out;
}

/**
 * The output digest (common/output-digest.ts) of the folder `root`, every file listed and opened
 * as above; undefined when `root` is not a folder.
 */
export async function digestTaskFolder(root: string): Promise<Hex | undefined> {
  const files = await listTaskFiles(root);
  if (!files) return undefined;
  return digestOpenedFiles(files, (rel) => openTaskFile(root, rel));
}

/**
 * At most `maxBytes` of the regular file `rel` under `root`, or undefined when it is missing, a
 * link or not a regular file (a FIFO is never opened for reading, so it cannot block the node).
 */
export async function readTaskFile(root: string, rel: string, maxBytes: number): Promise<Buffer | undefined> {
  let handle: FileHandle;
  try {
    handle = await openTaskFile(root, rel);
  } catch (error) {
    if (error instanceof TaskFileError) return undefined;
    throw error;
  }
  try {
    const buffer = Buffer.alloc(maxBytes);
    let filled = 0;
    while (filled < maxBytes) {
      const { bytesRead } = await handle.read(buffer, filled, maxBytes - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return buffer.subarray(0, filled);
  } finally {
    await closeQuietly(handle);
  }
}

/**
 * Copies the regular files under `root` into the new folder `target` (folders recreated, links
 * and special files left out), reading each as above. Returns the bytes copied. Past `maxBytes`
 * (a running task may grow a file after it was listed) it stops with a TaskFileError.
 */
export async function copyTaskFiles(root: string, target: string, maxBytes = Number.POSITIVE_INFINITY): Promise<number> {
  const files = (await listTaskFiles(root)) ?? [];
  let bytes = 0;
  for (const file of files) {
    const source = await openTaskFile(root, file.rel);
    try {
      const destination = path.join(target, ...file.rel.split("/"));
      await mkdir(path.dirname(destination), { recursive: true, mode: 0o700 });
      // wx: a fresh file only, never through something already there.
      const out = await open(destination, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
      try {
        for await (const chunk of source.createReadStream({ autoClose: false })) {
          bytes += (chunk as Buffer).length;
          if (bytes > maxBytes) throw new TaskFileError(`The task's folder holds more than ${maxBytes} bytes`);
          await out.write(chunk as Buffer);
        }
      } finally {
        await out.close();
      }
    } finally {
      await closeQuietly(source);
    }
  }
  return bytes;
}
