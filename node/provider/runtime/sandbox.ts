/**
 * The process runtime's sandbox: bubblewrap (`bwrap`), verified to work here before the node
 * sells anything. Inside, the task sees:
 * - the host's system directories read-only (/usr, /bin, /lib*, /opt, ...) and the /etc files a
 *   task needs (ETC_READ_ONLY_PATHS: never /etc/shadow or SSH host keys) so interpreters and the
 *   CUDA driver libraries work, plus any extra read-only paths the operator configures;
 *   the node's own files (data dir, config file, keys, home) are masked even when they lie under
 *   one of those paths;
 * - its workspace read-write, its inputs read-only under /data, a private /tmp, a fresh /proc and
 *   a minimal /dev with the NVIDIA device nodes bound in;
 * - its own user namespace with every capability dropped, and its own PID, IPC, UTS and network
 *   namespaces: it cannot see or signal host processes, and the host's loopback is not its
 *   loopback. A node run as root starts bubblewrap as the unprivileged task user (task-user.ts):
 *   the namespace maps that uid only, never host uid 0.
 * With `network` on, pasta (Debian's `passt` package, user-mode networking) connects the task's
 * network namespace to the outside through ordinary sockets of the node, and routes in the
 * namespace refuse the host's own addresses, link-local, the private and reserved ranges (see
 * network-policy.ts) unless the operator allow-lists them. pasta forwards no host loopback port
 * into the namespace except the allow-listed ones, and no port inward. IPv6 is off in the
 * namespace (pasta --ipv4-only, and the disable_ipv6 sysctls: turnOffIpv6).
 *
 * Running without a sandbox is an explicit `sandbox: "none"`, never a fallback.
 */
import { execFileText, spawnChild } from "../../process/child.js";
import { open, readdir, readFile, realpath, rm, stat } from "node:fs/promises";
import { networkInterfaces } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { SandboxNetworkError } from "../errors.js";
import { findExecutable } from "./limits.js";
import { BLOCKED_IPV4_RANGES, coveredByAllowList, type ParsedCidr } from "./network-policy.js";
import { blockingFolder, type TaskUser } from "./task-user.js";

/** `auto` and `bubblewrap` both require bubblewrap (auto names the default); `none` runs tasks unsandboxed. */
export type SandboxMode = "auto" | "bubblewrap" | "none";

/**
 * The /etc entries a task needs (name service, resolver, dynamic linker, TLS roots, time zone,
 * the alternatives symlinks interpreters go through, GPU loader ICDs), bound one by one: the rest
 * of /etc (shadow, SSH host keys, the operator's service configs and credentials) is not in the
 * sandbox at all (issue #33 item 5).
 */
export const ETC_READ_ONLY_PATHS = [
  "passwd",
  "group",
  "hosts",
  "host.conf",
  "resolv.conf",
  "nsswitch.conf",
  "gai.conf",
  "services",
  "protocols",
  "networks",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "localtime",
  "timezone",
  "ssl",
  "ca-certificates",
  "ca-certificates.conf",
  "pki",
  "crypto-policies",
  "alternatives",
  "os-release",
  "debian_version",
  "mime.types",
  "python3",
  ...["9", "10", "11", "12", "13", "14"].map((minor) => `python3.${minor}`),
  "OpenCL",
  "vulkan",
  "glvnd",
  "nvidia",
].map((name) => `/etc/${name}`);

/** Host paths bound read-only into the sandbox when they exist. */
export const SYSTEM_READ_ONLY_PATHS = [
  "/usr",
  "/bin",
  "/sbin",
  "/lib",
  "/lib32",
  "/lib64",
  "/libx32",
  ...ETC_READ_ONLY_PATHS,
  "/opt",
  "/run/systemd/resolve",
  "/run/nvidia-persistenced",
];

/** The task namespace's own /30: it is .254, the gateway pasta answers for is .253 (prohibited as a destination). */
export const TASK_ADDRESS = "10.255.255.254";
export const TASK_GATEWAY = "10.255.255.253";
const TASK_NETMASK_BITS = 30;

export type BubblewrapStatus = { available: true; path: string; version: string } | { available: false; path: string; reason: string };

const probes = new Map<string, Promise<BubblewrapStatus>>();

/**
 * Whether bubblewrap is installed and can create the sandbox the runtime uses here (user, PID and
 * network namespaces, capabilities dropped). Runs a trivial sandbox once per path (cached): being
 * installed is not enough where user namespaces are disabled.
 */
export function detectBubblewrap(bwrapPath = "bwrap"): Promise<BubblewrapStatus> {
  let probe = probes.get(bwrapPath);
  if (!probe) {
    probe = new Promise<BubblewrapStatus>((resolve) => {
      execFileText(bwrapPath, ["--version"], { timeout: 5_000 }, (versionError, versionOut) => {
        if (versionError) {
          const code = (versionError as NodeJS.ErrnoException).code;
          resolve({ available: false, path: bwrapPath, reason: code === "ENOENT" ? "bwrap is not installed" : `bwrap --version failed: ${versionError.message}` });
          return;
        }
        const args = ["--unshare-user", "--unshare-pid", "--unshare-net", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"];
        execFileText(bwrapPath, args, { timeout: 5_000 }, (error, _out, stderr) => {
          if (error) resolve({ available: false, path: bwrapPath, reason: `bwrap cannot create a sandbox here: ${String(stderr).trim() || error.message}` });
          else resolve({ available: true, path: bwrapPath, version: String(versionOut).trim() });
        });
      });
    });
    probes.set(bwrapPath, probe);
  }
  return probe;
}

export type NetworkTools = { pasta: string; nsenter: string; ip: string };

/**
 * Finds pasta, nsenter and ip (the tools a task's network needs). Returns what is missing as a
 * reason the operator can act on.
 */
export async function detectNetworkTools(
  pastaPath = "pasta",
  searchPath = process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
): Promise<{ tools: NetworkTools } | { reason: string }> {
  const pathWithSbin = `${searchPath}:/usr/sbin:/sbin`;
  const pasta = await findExecutable(pastaPath, pathWithSbin);
  const nsenter = await findExecutable("nsenter", pathWithSbin);
  const ip = await findExecutable("ip", pathWithSbin);
  const missing = [!pasta && `pasta (apt-get install passt)`, !nsenter && "nsenter (util-linux)", !ip && "ip (apt-get install iproute2)"].filter(Boolean);
  if (missing.length > 0 || !pasta || !nsenter || !ip) return { reason: `not installed: ${missing.join(", ")}` };
  return { tools: { pasta, nsenter, ip } };
}

/** The NVIDIA device nodes present on the host (/dev/nvidia0, /dev/nvidiactl, /dev/nvidia-caps, ...). */
export async function nvidiaDeviceNodes(devDir = "/dev"): Promise<string[]> {
  const entries = await readdir(devDir).catch(() => [] as string[]);
  return entries.filter((name) => name.startsWith("nvidia")).map((name) => `${devDir}/${name}`);
}

function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}

/**
 * bwrap arguments that hide the node's own files (data dir, config, keys, home) wherever they
 * would show through a read-only bind: a directory is covered with an empty tmpfs, a file with
 * /dev/null. Paths are resolved through symlinks, since bwrap binds what the links point to.
 *
 * With `user` (the task user bubblewrap runs as, task-user.ts), a hidden path below a folder that
 * user may not search cannot be mounted over by it: that folder is covered instead (it showed
 * the task nothing anyway), so the task's own workspace can still be bound below it.
 */
export async function maskArgs(hiddenPaths: readonly string[], boundPaths: readonly string[], user?: TaskUser): Promise<string[]> {
  const bound = (await Promise.all(boundPaths.map((entry) => realpath(entry).catch(() => undefined)))).filter((entry): entry is string => entry !== undefined);
  const args: string[] = [];
  const seen = new Set<string>();
  for (const hidden of hiddenPaths) {
    let real = await realpath(hidden).catch(() => undefined);
    if (real && user) real = (await blockingFolder(real, user)) ?? real;
    if (!real || seen.has(real) || !bound.some((root) => isInside(real, root))) continue;
    seen.add(real);
    const info = await stat(real).catch(() => undefined);
    if (!info) continue;
    if (info.isDirectory()) args.push("--tmpfs", real);
    else args.push("--ro-bind", "/dev/null", real);
  }
  return args;
}

export type BubblewrapArgsOptions = {
  bwrapPath: string;
  workspace: string;
  readOnlyPaths: readonly string[];
  deviceNodes: readonly string[];
  /** From maskArgs(): the node's own files covered. */
  masks?: readonly string[];
  /** File descriptors of the child for `--info-fd` / `--block-fd` (network setup before the command runs). */
  infoFd?: number;
  blockFd?: number;
  /** Keep the caller's network namespace (exec, already inside the task's: see process-runtime.ts). */
  keepNetwork?: boolean;
  /** Size of the task's /tmp tmpfs, bytes; with it the sandbox root is read-only (lease-bounds.ts). */
  tmpBytes?: number;
  /** What is bound at the workspace's path: the workspace itself, or where taskUserPrefix() staged it. */
  workspaceSource?: string;
  /** Task inputs (issue 36): each `source` (the input's folder, or where taskUserPrefix() staged it) bound read-only at `mount`. */
  inputs?: readonly { source: string; mount: string }[];
  /**
   * Run as uid/gid 0 of the task's user namespace (bubblewrap started as the task user: that 0 is
   * the task user on the host). One user namespace then owns the sandbox's other namespaces;
   * otherwise bubblewrap nests a second one (its /dev needs uid 0 to set up), which pasta and
   * nsenter, run as the task user, could not enter the network namespace from.
   */
  namespaceRoot?: boolean;
};

/** The bwrap argv prefix (ending in `--`) that runs a command in the sandbox described above. */
export function bubblewrapArgs(options: BubblewrapArgsOptions): string[] {
  const args = [
    options.bwrapPath,
    "--unshare-user",
    ...(options.namespaceRoot ? ["--uid", "0", "--gid", "0"] : []),
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    ...(options.keepNetwork ? [] : ["--unshare-net"]),
    "--cap-drop",
    "ALL",
  ];
  if (options.infoFd !== undefined) args.push("--info-fd", String(options.infoFd));
  if (options.blockFd !== undefined) args.push("--block-fd", String(options.blockFd));
  args.push("--proc", "/proc", "--dev", "/dev");
  if (options.tmpBytes !== undefined) args.push("--size", String(Math.floor(options.tmpBytes)));
  args.push("--tmpfs", "/tmp");
  for (const hostPath of [...SYSTEM_READ_ONLY_PATHS, ...options.readOnlyPaths]) args.push("--ro-bind-try", hostPath, hostPath);
  args.push(...(options.masks ?? []));
  for (const node of options.deviceNodes) args.push("--dev-bind-try", node, node);
  args.push("--bind", options.workspaceSource ?? options.workspace, options.workspace);
  // Read-only bind mounts: the task's uid 0 holds no capability to remount them writable.
  for (const input of options.inputs ?? []) args.push("--ro-bind", input.source, input.mount);
  // The root is a tmpfs bubblewrap sizes at half the host's RAM: read-only, nothing fills it.
  if (options.tmpBytes !== undefined) args.push("--remount-ro", "/");
  args.push("--chdir", options.workspace, "--");
  return args;
}

/** The host's own IPv4 addresses (every interface but loopback): a task must not reach the node through them. */
export function hostIpv4Addresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((entry) => entry !== undefined && entry.family === "IPv4" && !entry.internal)
    .map((entry) => entry!.address);
}

/**
 * The `ip -batch` lines that make a task's namespace refuse everything but public unicast and the
 * allow-listed ranges: "prohibit" routes (connect() fails with EACCES) for the blocked ranges,
 * the host's own addresses and the gateway, and routes through the gateway for allow-listed
 * IPv4 ranges (more specific than the prohibit routes they punch through). `gateway` is pasta's
 * (bubblewrap) or slirp4netns's 10.0.2.2 (Podman containers).
 */
export function taskRoutes(allow: readonly ParsedCidr[], hostAddresses: readonly string[], gateway: string = TASK_GATEWAY): string[] {
  const lines: string[] = [];
  for (const range of BLOCKED_IPV4_RANGES) if (!coveredByAllowList(range, allow)) lines.push(`route add prohibit ${range}`);
  // The host's own addresses stay closed even inside an allow-listed range: only an entry naming
  // the address itself (a /32) opens the node's ports on it.
  for (const address of new Set(hostAddresses)) {
    if (!allow.some((cidr) => cidr.prefix === 32 && cidr.address.toString() === address)) lines.push(`route add prohibit ${address}/32`);
  }
  lines.push(`route add prohibit ${gateway}/32`);
  for (const cidr of allow) {
    if (cidr.address.kind() !== "ipv4") continue;
    const network = `${cidr.address.toString()}/${cidr.prefix}`;
    if (cidr.prefix === 0) continue; // the default route already goes through the gateway
    lines.push(`route add ${network} via ${gateway}`);
  }
  return lines;
}

/**
 * The shell script (run by nsenter in a task's network namespace, `$1` the path of `ip`) that
 * turns IPv6 off there and prints every IPv6 address left: none, when it worked. A kernel
 * without IPv6 (booted with ipv6.disable=1) has no such sysctls and no addresses.
 */
const IPV6_OFF_SCRIPT = [
  "for f in /proc/sys/net/ipv6/conf/all/disable_ipv6 /proc/sys/net/ipv6/conf/default/disable_ipv6; do",
  '  if [ -e "$f" ]; then echo 1 > "$f" || exit 1; fi',
  "done",
  '"$1" -6 -o addr show',
].join("\n");

/**
 * Turns IPv6 off in the network namespace `nsenter <enterArgs>` enters and checks that no IPv6
 * address is left in it (its own `::1` included), so a task has no IPv6 route anywhere: the
 * policy routes are IPv4 only (issue #33 item 2: slirp4netns's IPv6 reached the host's `::`).
 * The task itself has no capability to turn it back on. Throws SandboxNetworkError otherwise.
 */
export async function turnOffIpv6(nsenter: string, enterArgs: readonly string[], ip: string, timeoutMs = 15_000): Promise<void> {
  const result = await run(nsenter, [...enterArgs, "/bin/sh", "-c", IPV6_OFF_SCRIPT, "sh", ip], undefined, timeoutMs);
  if (result.code !== 0 || result.output.trim() !== "")
    throw new SandboxNetworkError(`IPv6 could not be turned off in the task's network namespace (exit code ${result.code})`, result.output.trim().slice(0, 500));
}

export type TaskNetworkOptions = {
  tools: NetworkTools;
  /** Host loopback TCP ports the task reaches at 127.0.0.1:<port> in its namespace. */
  loopbackPorts: readonly number[];
  /** Ranges the task may reach although they are private, link-local or reserved. */
  allow: readonly ParsedCidr[];
  /** Where pasta writes its pid (outside the workspace). */
  pidFile: string;
  /** Hand pasta the sandbox's namespaces as open files (a sandbox run as the task user, task-user.ts). */
  namespaceFds?: boolean;
  timeoutMs?: number;
};

export type TaskNetwork = { pastaPid: number; stop(): Promise<void> };

function run(file: string, args: string[], input: string | undefined, timeoutMs: number, fds: readonly number[] = []): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawnChild(file, args, { stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe", ...fds], timeout: timeoutMs });
    let output = "";
    const take = (chunk: Buffer) => {
      if (output.length < 16_384) output += chunk.toString("utf8");
    };
    child.stdout?.on("data", take);
    child.stderr?.on("data", take);
    child.once("error", (error) => resolve({ code: null, output: error.message }));
    child.once("close", (code) => resolve({ code, output }));
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** pasta writes to syslog and complains on stderr where there is none: keep only its own messages. */
function pastaMessages(output: string): string {
  return output
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.startsWith("Failed to send"))
    .slice(0, 5)
    .join("; ");
}

/**
 * Whether `pid` is the pasta a task started: its command line passes the task's own pid file
 * (unique per node and task), so a reused pid is never taken for it. The name is no guide: pasta
 * re-executes itself (Debian's shows as `passt.avx2`).
 */
async function isTaskPasta(pid: number, pidFile: string): Promise<boolean> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`).catch(() => undefined);
  if (!cmdline) return false; // gone, or a zombie (its command line is empty)
  const args = cmdline.toString("utf8").split("\0");
  const at = args.indexOf("--pid");
  return at !== -1 && args[at + 1] === pidFile;
}

async function waitGone(pid: number, pidFile: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!(await isTaskPasta(pid, pidFile))) return true;
    if (Date.now() >= deadline) return false;
    await sleep(20);
  }
}

/**
 * Stops the pasta that serves a task's network namespace and waits until it is gone: pasta
 * outlives the namespace's processes (it is daemonised, attached by pid), so it is stopped
 * whenever its task ends, and by a restarted node's reap for a task the crashed one left. The pid
 * is `knownPid` or read from `pidFile`; SIGTERM, then SIGKILL after `graceMs`. Removes the pid
 * file. Returns whether a pasta was running.
 */
export async function stopTaskPasta(pidFile: string, knownPid?: number, graceMs = 2_000): Promise<boolean> {
  let pid = knownPid;
  if (pid === undefined) {
    const text = await readFile(pidFile, "utf8").catch(() => "");
    if (/^\d+\s*$/.test(text)) pid = Number(text.trim());
  }
  let running = false;
  if (pid !== undefined && (await isTaskPasta(pid, pidFile))) {
    running = true;
    const signal = (name: NodeJS.Signals) => {
      try {
        process.kill(pid, name);
      } catch {
        // already gone
      }
    };
    signal("SIGTERM");
    if (!(await waitGone(pid, pidFile, graceMs))) {
      signal("SIGKILL");
      await waitGone(pid, pidFile, graceMs);
    }
  }
  await rm(pidFile, { force: true });
  return running;
}

/**
 * Connects the network namespace of process `pid` (the sandbox's, created by bwrap and held by
 * `--block-fd` before the task runs) to the outside through pasta, then installs the policy
 * routes. Throws SandboxNetworkError when either step fails; nothing is left running then.
 */
export async function attachTaskNetwork(pid: number, options: TaskNetworkOptions): Promise<TaskNetwork> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const ports = options.loopbackPorts.length > 0 ? [...new Set(options.loopbackPorts)].join(",") : "none";
  const pastaArgs = [
    "--quiet",
    "--ipv4-only",
    "--config-net",
    "--no-map-gw",
    "--tcp-ports",
    "none",
    "--udp-ports",
    "none",
    "--tcp-ns",
    ports,
    "--udp-ns",
    "none",
    "--address",
    TASK_ADDRESS,
    "--netmask",
    String(TASK_NETMASK_BITS),
    "--gateway",
    TASK_GATEWAY,
    "--pid",
    options.pidFile,
    // As root pasta would switch to "nobody", which cannot enter the sandbox's user namespace.
    ...(process.getuid?.() === 0 ? ["--runas", "0"] : []),
    // A sandbox of the task user: pasta drops CAP_SYS_PTRACE and cannot open another user's
    // /proc/<pid>/ns files, so the node opens them and hands them over as fds 3 and 4.
    ...(options.namespaceFds ? ["--userns", "/proc/self/fd/3", "--netns", "/proc/self/fd/4"] : [String(pid)]),
  ];
  await rm(options.pidFile, { force: true });
  // pasta configures the namespace, then forks into the background and the first process exits 0.
  const namespaces = options.namespaceFds ? await Promise.all(["user", "net"].map((ns) => open(`/proc/${pid}/ns/${ns}`, "r"))) : [];
  let started: { code: number | null; output: string };
  try {
    started = await run(
      options.tools.pasta,
      pastaArgs,
      undefined,
      timeoutMs,
      namespaces.map((handle) => handle.fd),
    );
  } finally {
    for (const handle of namespaces) await handle.close();
  }
  let pastaPid: number | undefined;
  for (let attempt = 0; attempt < 40 && pastaPid === undefined; attempt++) {
    const text = await readFile(options.pidFile, "utf8").catch(() => "");
    if (/^\d+\s*$/.test(text)) pastaPid = Number(text.trim());
    else if (started.code !== 0) break;
    else await sleep(25);
  }
  const stop = async (): Promise<void> => {
    await stopTaskPasta(options.pidFile, pastaPid);
  };
  if (started.code !== 0 || pastaPid === undefined) {
    await stop();
    throw new SandboxNetworkError(`pasta could not connect the task's network namespace (exit code ${started.code})`, pastaMessages(started.output));
  }
  const routes = taskRoutes(options.allow, hostIpv4Addresses());
  // A task user's sandbox: become its namespace's root (the task user on the host), the only uid
  // there that keeps its capabilities across the exec of ip.
  const enter = ["-t", String(pid), "-U", "-n", ...(options.namespaceFds ? [] : ["--preserve-credentials"])];
  const configured = await run(options.tools.nsenter, [...enter, options.tools.ip, "-batch", "-"], `${routes.join("\n")}\n`, timeoutMs);
  if (configured.code !== 0) {
    await stop();
    throw new SandboxNetworkError(`the task's network policy could not be installed (exit code ${configured.code})`, configured.output.trim().slice(0, 500));
  }
  try {
    await turnOffIpv6(options.tools.nsenter, enter, options.tools.ip, timeoutMs);
  } catch (error) {
    await stop();
    throw error;
  }
  return { pastaPid, stop };
}
