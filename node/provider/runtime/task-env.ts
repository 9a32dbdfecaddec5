/**
 * The environment a process-runtime task gets (the container runtime builds its own from the same
 * parts): built from scratch, so nothing of the node's environment, which may hold its keys, leaks in.
 */
import path from "node:path";
import { checkpointEnvironment } from "./checkpoint-dir.js";
import { childEnv, livenessEnvironment, type TaskLaunch } from "./task.js";

/** The variables every task gets; the task's own come on top, the provider's reserved ones last. */
export function taskEnvironment(launch: TaskLaunch, workspace: string, tmpDir: string, taskPath: string): Record<string, string> {
  return {
    PATH: taskPath,
    HOME: workspace,
    TMPDIR: tmpDir,
    LANG: "C.UTF-8",
    ...childEnv(launch.spec),
    // An empty CUDA_VISIBLE_DEVICES hides every GPU: a task without leased units sees none.
    CUDA_VISIBLE_DEVICES: launch.devices.join(","),
    CUDA_DEVICE_ORDER: "PCI_BUS_ID",
    SUANLI_TASK_ID: launch.taskId,
    SUANLI_WORKSPACE: workspace,
    SUANLI_OUTPUT_DIR: path.join(workspace, "output"),
    ...checkpointEnvironment(launch, workspace),
    ...livenessEnvironment(launch.spec, workspace),
    ...groupEnvironment(launch),
  };
}

/** SUANLI_RANK, SUANLI_WORLD_SIZE, SUANLI_MASTER_ADDR/PORT of a group job's task (none otherwise). */
export function groupEnvironment(launch: TaskLaunch): Record<string, string> {
  const group = launch.spec.group;
  if (!group) return {};
  const master = launch.master ?? { addr: group.masterAddr ?? "", port: group.masterPort ?? 0 };
  return {
    SUANLI_RANK: String(group.rank),
    SUANLI_WORLD_SIZE: String(group.worldSize),
    SUANLI_MASTER_ADDR: group.rank === 0 ? master.addr : (group.masterAddr ?? master.addr),
    SUANLI_MASTER_PORT: String(group.rank === 0 ? master.port : (group.masterPort ?? master.port)),
  };
}
