/**
 * A task's checkpoint folder (issue 36, docs/data.md): `checkpoint/` in its workspace, writable,
 * the task's $SUANLI_CHECKPOINT_DIR in both runtimes. A task resumed from a checkpoint CID finds a
 * writable copy of it there and $SUANLI_RESUMED_FROM set to the CID. The node snapshots the folder
 * (agent/checkpoints.ts).
 */
import { chmod, cp, lstat, mkdir, readdir, rm } from "node:fs/promises";
import path from "node:path";
import type { TaskLaunch, TaskResume } from "./task.js";

/** The checkpoint folder's name in a workspace (agent/checkpoints.ts reads the same). */
export const CHECKPOINT_FOLDER = "checkpoint";

/**
 * Whether the task checkpoints: its spec asks for a period or resumes from a checkpoint. Checkpoints
 * are opt-in: a task that asked for neither gets no folder and no variables (its workspace is what
 * its bundle put there, as before), and nothing is snapshotted.
 */
export function wantsCheckpoints(launch: { spec: Pick<TaskLaunch["spec"], "checkpoint">; resume?: TaskResume }): boolean {
  return Boolean(launch.spec.checkpoint || launch.resume);
}

/** SUANLI_CHECKPOINT_DIR (and SUANLI_RESUMED_FROM when resumed); `workspace` as the task sees it. None when the task does not checkpoint. */
export function checkpointEnvironment(launch: { spec: Pick<TaskLaunch["spec"], "checkpoint">; resume?: TaskResume }, workspace: string): Record<string, string> {
  if (!wantsCheckpoints(launch)) return {};
  return {
    SUANLI_CHECKPOINT_DIR: `${workspace}/${CHECKPOINT_FOLDER}`,
    ...(launch.resume ? { SUANLI_RESUMED_FROM: launch.resume.cid } : {}),
  };
}

/**
 * Makes `<workspace>/checkpoint` a fresh folder (whatever the bundle put under that name, a link
 * included, is removed first: never written through), filled with a copy of `resume` when given.
 * The copy comes from the node's own verified input cache; its modes are made writable. Call it
 * before the workspace is handed to the task user.
 */
export async function seedCheckpointDir(workspace: string, launch: { spec: Pick<TaskLaunch["spec"], "checkpoint">; resume?: TaskResume }): Promise<void> {
  if (!wantsCheckpoints(launch)) return;
  const { resume } = launch;
  const target = path.join(workspace, CHECKPOINT_FOLDER);
  await rm(target, { recursive: true, force: true });
  if (!resume) {
    await mkdir(target, { mode: 0o755 });
    return;
  }
  const info = await lstat(resume.hostPath);
  if (info.isDirectory()) await cp(resume.hostPath, target, { recursive: true, errorOnExist: true, force: false, verbatimSymlinks: true });
  else {
    await mkdir(target, { mode: 0o755 });
    await cp(resume.hostPath, path.join(target, path.basename(resume.hostPath)), { errorOnExist: true, force: false });
  }
  await writable(target);
}

/** Folders 0755, files 0644, top down. */
async function writable(at: string): Promise<void> {
  const info = await lstat(at);
  if (info.isSymbolicLink()) return;
  if (!info.isDirectory()) {
    await chmod(at, 0o644);
    return;
  }
  await chmod(at, 0o755);
  for (const name of await readdir(at)) await writable(path.join(at, name));
}
