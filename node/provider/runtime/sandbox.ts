/**
 * The process runtime's sandbox: bubblewrap (`bwrap`) where it is installed and works (it needs
 * unprivileged user namespaces, or root). Inside, the task sees:
 * - the host's system directories read-only (/usr, /bin, /lib*, /etc, /opt, ...) so interpreters
 *   and the CUDA driver libraries work, plus any extra read-only paths the operator configures;
 * - its workspace read-write, a private /tmp, a fresh /proc and a minimal /dev with the NVIDIA
 *   device nodes bound in;
 * - its own PID, IPC and UTS namespaces (it cannot see or signal host processes), and no network
 *   when the operator turns the network off.
 * Everything else on the host (home directories, the node's data dir with its keys) is absent.
 * Without bubblewrap tasks run unsandboxed as the provider's user, and the node says so at start.
 */
import { execFile } from "node:child_process";
import { readdir } from "node:fs/promises";

export type SandboxMode = "auto" | "bubblewrap" | "none";

/** Host paths bound read-only into the sandbox when they exist. */
export const SYSTEM_READ_ONLY_PATHS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/run/systemd/resolve", "/run/nvidia-persistenced"];

export type BubblewrapStatus = { available: true; path: string; version: string } | { available: false; path: string; reason: string };

const probes = new Map<string, Promise<BubblewrapStatus>>();

/**
 * Whether bubblewrap is installed and can create a sandbox here. Runs a trivial sandbox once per
 * path (cached): being installed is not enough where user namespaces are disabled.
 */
export function detectBubblewrap(bwrapPath = "bwrap"): Promise<BubblewrapStatus> {
  let probe = probes.get(bwrapPath);
  if (!probe) {
    probe = new Promise<BubblewrapStatus>((resolve) => {
      execFile(bwrapPath, ["--version"], { timeout: 5_000 }, (versionError, versionOut) => {
        if (versionError) {
          const code = (versionError as NodeJS.ErrnoException).code;
          resolve({ available: false, path: bwrapPath, reason: code === "ENOENT" ? "bwrap is not installed" : `bwrap --version failed: ${versionError.message}` });
          return;
        }
        execFile(bwrapPath, ["--unshare-pid", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"], { timeout: 5_000 }, (error, _out, stderr) => {
          if (error) resolve({ available: false, path: bwrapPath, reason: `bwrap cannot create a sandbox here: ${String(stderr).trim() || error.message}` });
          else resolve({ available: true, path: bwrapPath, version: String(versionOut).trim() });
        });
      });
    });
    probes.set(bwrapPath, probe);
  }
  return probe;
}

/** The NVIDIA device nodes present on the host (/dev/nvidia0, /dev/nvidiactl, /dev/nvidia-caps, ...). */
export async function nvidiaDeviceNodes(devDir = "/dev"): Promise<string[]> {
  const entries = await readdir(devDir).catch(() => [] as string[]);
  return entries.filter((name) => name.startsWith("nvidia")).map((name) => `${devDir}/${name}`);
}

export type BubblewrapArgsOptions = {
  bwrapPath: string;
  workspace: string;
  network: boolean;
  readOnlyPaths: readonly string[];
  deviceNodes: readonly string[];
};

/** The bwrap argv prefix (ending in `--`) that runs a command in the sandbox described above. */
export function bubblewrapArgs(options: BubblewrapArgsOptions): string[] {
  const args = [options.bwrapPath, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"];
  if (!options.network) args.push("--unshare-net");
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp");
  for (const hostPath of [...SYSTEM_READ_ONLY_PATHS, ...options.readOnlyPaths]) args.push("--ro-bind-try", hostPath, hostPath);
  for (const node of options.deviceNodes) args.push("--dev-bind-try", node, node);
  args.push("--bind", options.workspace, options.workspace, "--chdir", options.workspace, "--");
  return args;
}
