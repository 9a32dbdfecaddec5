/**
 * A lease's workspace disk bound (issue 33, item 3), the same in both runtimes: the task's
 * workspace is its own ext4 file system of `workspaceBytes` (lease-bounds.ts), an image file
 * beside the workspace (`<root>/.<taskId>.disk`) loop-mounted on it (`nosuid,nodev`). A task that
 * writes past it gets ENOSPC from its own file system; the host's disk and every other lease's
 * are untouched. The process runtime binds that mount into bubblewrap, the container runtime
 * into the container (`--volume`), and the node reads outputs from it until the task's cleanup,
 * which unmounts it and deletes the image.
 *
 * The image is sparse: it takes host disk as the task writes, so the bounds of all leases may add
 * up to more than the host has (overcommitted, like memory); the journal is left out (a
 * workspace does not outlive its lease, and so all of the size is the task's), and so is the
 * background zeroing of inode tables (`noinit_itable`: a fresh sparse file reads as zeros, and
 * a 100 GiB image would otherwise get over a gigabyte written to it). Loop mounts need
 * root (CAP_SYS_ADMIN), /dev/loop-control and mkfs.ext4 (e2fsprogs); without them a required
 * bound refuses the task (RuntimeUnavailableError) unless the operator sets `enforce: "off"`.
 */
import { existsSync } from "node:fs";
import { chmod, open, rm, rmdir, stat } from "node:fs/promises";
import path from "node:path";
import { RuntimeUnavailableError } from "../errors.js";
import { leaseBounds, type LeaseBoundsOptions } from "./lease-bounds.js";
import { findExecutable } from "./limits.js";
import { execFileTextAsync } from "../../process/child.js";

const exec = execFileTextAsync;
const TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const OPT_OUT = 'Set provider.runtime.bounds.enforce to "off" to run tasks without these bounds (any renter can then fill the host\'s disk).';

type Tools = { mkfs: string; mount: string; umount: string };
export type WorkspaceDiskSupport = { ok: true; tools: Tools } | { ok: false; reason: string };

let detected: Promise<WorkspaceDiskSupport> | undefined;

/** Whether this node can give a workspace its own file system: root, loop devices, mkfs.ext4, mount. */
export function detectWorkspaceDisk(): Promise<WorkspaceDiskSupport> {
  detected ??= (async (): Promise<WorkspaceDiskSupport> => {
    if (process.getuid?.() !== 0) return { ok: false, reason: "the node is not root, and only root can loop-mount a workspace image" };
    if (!existsSync("/dev/loop-control")) return { ok: false, reason: "no loop devices (/dev/loop-control)" };
    const searchPath = `${process.env.PATH ?? ""}:${TOOL_PATH}`;
    const [mkfs, mount, umount] = await Promise.all(["mkfs.ext4", "mount", "umount"].map((name) => findExecutable(name, searchPath)));
    if (!mkfs) return { ok: false, reason: "mkfs.ext4 (e2fsprogs) is not installed" };
    if (!mount || !umount) return { ok: false, reason: "mount/umount (util-linux) are not installed" };
    return { ok: true, tools: { mkfs, mount, umount } };
  })();
  return detected;
}

/** The image file of a task's workspace, beside it in the workspace root. */
export function workspaceImage(root: string, taskId: string): string {
  return path.join(root, `.${taskId}.disk`);
}

/** Whether `dir` is a mount point (a different device from its parent). */
async function isMountPoint(dir: string): Promise<boolean> {
  const [self, parent] = await Promise.all([stat(dir).catch(() => undefined), stat(path.dirname(dir)).catch(() => undefined)]);
  return self !== undefined && parent !== undefined && self.dev !== parent.dev;
}

/**
 * Mounts a fresh file system of the lease's size on the (empty, existing) workspace directory.
 * Returns the size, or undefined when bounds are off; throws RuntimeUnavailableError when the
 * bound is required and cannot be applied here.
 */
export async function mountWorkspaceDisk(options: LeaseBoundsOptions | undefined, units: number, root: string, taskId: string): Promise<number | undefined> {
  if (!options || options.enforce === "off") return undefined;
  const bytes = leaseBounds(options, units).workspaceBytes;
  const support = await detectWorkspaceDisk();
  if (!support.ok)
    throw new RuntimeUnavailableError("task", `the lease's workspace disk bound cannot be applied: ${support.reason}`, [
      "Run the node as root on a host with loop devices and e2fsprogs (mkfs.ext4).",
      OPT_OUT,
    ]);
  const workspace = path.join(root, taskId);
  const image = workspaceImage(root, taskId);
  const { mkfs, mount } = support.tools;
  try {
    const file = await open(image, "w", 0o600);
    try {
      await file.truncate(bytes);
    } finally {
      await file.close();
    }
    await exec(mkfs, ["-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "nodiscard,lazy_itable_init=1", "-L", "suanli-task", image], { timeout: 120_000 });
    await exec(mount, ["-o", "loop,nosuid,nodev,noatime,noinit_itable", image, workspace], { timeout: 60_000 });
    await chmod(workspace, 0o700);
    // mkfs makes one; the task's workspace starts empty.
    await rmdir(path.join(workspace, "lost+found")).catch(() => undefined);
  } catch (error) {
    await unmountWorkspaceDisk(root, taskId);
    const e = error as { stderr?: string; message: string };
    throw new RuntimeUnavailableError("task", `the workspace's file system could not be made: ${(e.stderr || e.message).trim().slice(0, 300)}`, [OPT_OUT]);
  }
  return bytes;
}

/** Unmounts the task's workspace file system (lazily when something still holds it) and deletes its image. Safe when none was made. */
export async function unmountWorkspaceDisk(root: string, taskId: string): Promise<void> {
  const workspace = path.join(root, taskId);
  const support = await detectWorkspaceDisk();
  if (support.ok) {
    for (let attempt = 0; attempt < 5 && (await isMountPoint(workspace)); attempt++) {
      // A process of the task still exiting holds it busy; after a few tries, detach it lazily.
      const args = attempt < 4 ? [workspace] : ["-l", workspace];
      const done = await exec(support.tools.umount, args, { timeout: 60_000 }).then(
        () => true,
        () => false,
      );
      if (!done) await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  await rm(workspaceImage(root, taskId), { force: true });
}
