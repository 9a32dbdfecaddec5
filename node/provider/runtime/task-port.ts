/**
 * How the provider reaches a TCP port of a running task: the one place that knows where a task's
 * network lives.
 *
 * Only the task's own listeners are reachable: the provider looks up, in the socket table of the
 * network namespace of each of the task's processes (/proc/<pid>/net/tcp{,6}), a socket listening
 * on the port, and connects only when one of the task's processes holds that socket open. So a
 * renter can never reach the host's SSH or the node's API by declaring their port.
 *
 * - A task in the node's own network namespace (sandbox "none"): a plain TCP connection to the
 *   host port.
 * - A task in its own user+network namespace (bubblewrap; its outbound through pasta, which
 *   forwards no port inward): the provider starts a tiny bridge, `nsenter -t <pid> -U -n
 *   --preserve-credentials -- <node> -e <connect to 127.0.0.1:port>`, inside the task's
 *   namespaces, and talks to it over a socket pair (the child's fd 3): the returned Socket is that
 *   pair's end. Two tasks listening on the same port do not collide: each has its own loopback.
 */
import { readdir, readFile, readlink } from "node:fs/promises";
import { spawnChild } from "../../process/child.js";
import { connect, type Socket } from "node:net";
import { TaskIoUnavailableError, TaskPortClosedError } from "../agent/errors.js";
import type { TaskHandle } from "./runtime.js";

type Listener = { host: string; inode: string };

function parseV4(hex: string): string {
  const n = Number.parseInt(hex, 16);
  return [n & 255, (n >>> 8) & 255, (n >>> 16) & 255, (n >>> 24) & 255].join(".");
}

/** Listening TCP sockets on `port` in the network namespace of `pid`: where to connect and their inode. */
async function listenersOn(pid: number, port: number): Promise<Listener[]> {
  const out: Listener[] = [];
  for (const [file, v6] of [
    [`/proc/${pid}/net/tcp`, false],
    [`/proc/${pid}/net/tcp6`, true],
  ] as const) {
    const text = await readFile(file, "utf8").catch(() => "");
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || fields[3] !== "0A") continue; // 0A: LISTEN
      const [addrHex, portHex] = fields[1]!.split(":");
      if (Number.parseInt(portHex!, 16) !== port) continue;
      let host: string;
      if (v6) {
        // Any address or loopback: connect to ::1; an IPv4-mapped or other address: skip (rare for a task).
        const any = /^0+$/.test(addrHex!);
        const loopback = addrHex === "00000000000000000000000001000000";
        if (!any && !loopback) continue;
        host = "::1";
      } else {
        const ip = parseV4(addrHex!);
        host = ip === "0.0.0.0" || ip.startsWith("127.") ? "127.0.0.1" : ip;
      }
      out.push({ host, inode: fields[9]! });
    }
  }
  return out;
}

/** Socket inodes held open by these processes. */
async function socketInodes(pids: readonly number[]): Promise<Set<string>> {
  const inodes = new Set<string>();
  for (const pid of pids) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
    for (const fd of fds) {
      const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => "");
      const match = /^socket:\[(\d+)\]$/.exec(target);
      if (match) inodes.add(match[1]!);
    }
  }
  return inodes;
}

/** The bridge run inside the task's namespaces: fd 3 (a socket pair with the provider) <-> 127.0.0.1:port; "1" on stdout once connected. */
function bridgeSource(host: string, port: number): string {
  return [
    'const net = require("node:net");',
    `const tcp = net.connect({ host: ${JSON.stringify(host)}, port: ${port}, allowHalfOpen: true });`,
    "const pair = new net.Socket({ fd: 3, readable: true, writable: true, allowHalfOpen: true });",
    'tcp.once("connect", () => { process.stdout.write("1"); pair.pipe(tcp); tcp.pipe(pair); });',
    'tcp.on("error", (e) => { process.stderr.write(e.message); process.exit(2); });',
    'pair.on("error", () => process.exit(0));',
    'pair.on("close", () => { tcp.destroy(); process.exit(0); });',
  ].join("\n");
}

function namespaceOf(pid: number | "self", kind: "net" | "user"): Promise<string> {
  return readlink(`/proc/${pid}/ns/${kind}`).catch(() => "");
}

async function connectDirect(host: string, port: number, timeoutMs: number): Promise<Socket> {
  const socket = connect({ host, port });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new TaskPortClosedError(`Connecting to port ${port} of the task timed out`));
    }, timeoutMs);
    socket.once("connect", () => {
      clearTimeout(timer);
      resolve();
    });
    socket.once("error", (error) => {
      clearTimeout(timer);
      reject(new TaskPortClosedError(`Cannot connect to port ${port} of the task: ${error.message}`));
    });
  });
  return socket;
}

/** Connects to host:port inside the namespaces of `pid` through an nsenter bridge (see the header). */
async function connectInNamespace(pid: number, host: string, port: number, timeoutMs: number): Promise<Socket> {
  const ownUserNs = (await namespaceOf(pid, "user")) === (await namespaceOf("self", "user"));
  const argv = ["-t", String(pid), ...(ownUserNs ? [] : ["-U", "--preserve-credentials"]), "-n", "--", process.execPath, "-e", bridgeSource(host, port)];
  const child = spawnChild("nsenter", argv, { stdio: ["ignore", "pipe", "pipe", "pipe"], env: { PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin" } });
  const socket = child.stdio[3] as Socket;
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    if (stderr.length < 4096) stderr += chunk.toString("utf8");
  });
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  socket.once("close", kill);
  await new Promise<void>((resolve, reject) => {
    const fail = (message: string) => {
      clearTimeout(timer);
      socket.destroy();
      kill();
      reject(new TaskPortClosedError(`Cannot connect to port ${port} of the task: ${message}`));
    };
    const timer = setTimeout(() => fail(`no connection in ${timeoutMs} ms`), timeoutMs);
    child.once("error", (error) => fail(`cannot start nsenter (${error.message})`));
    // stdout ends without the "connected" byte: the bridge failed (its reason is on stderr).
    const onEnd = () => fail(stderr.trim() || "the bridge into the task's network namespace exited");
    child.stdout!.once("end", onEnd);
    child.stdout!.once("data", () => {
      clearTimeout(timer);
      child.stdout!.off("end", onEnd);
      child.stdout!.resume();
      resolve();
    });
  });
  return socket;
}

/**
 * Connects to `port` of the running task `handle`. Throws TaskPortClosedError when none of the
 * task's processes listens on it, TaskIoUnavailableError where the runtime keeps the task's
 * network out of reach.
 */
export async function connectToTaskPort(handle: TaskHandle, port: number, options: { timeoutMs?: number } = {}): Promise<Socket> {
  const pids = await handle.processIds();
  if (pids.length === 0) {
    throw new TaskIoUnavailableError("This provider's runtime cannot reach a task's ports (the task runs in a container)");
  }
  const owned = await socketInodes(pids);
  const selfNet = await namespaceOf("self", "net");
  const seen = new Set<string>();
  for (const pid of pids) {
    const netNs = await namespaceOf(pid, "net");
    if (!netNs || seen.has(netNs)) continue;
    seen.add(netNs);
    const listener = (await listenersOn(pid, port)).find((candidate) => owned.has(candidate.inode));
    if (!listener) continue;
    const timeoutMs = options.timeoutMs ?? 5_000;
    if (netNs === selfNet) {
      const socket = await connectDirect(listener.host, port, timeoutMs);
      socket.setNoDelay(true);
      return socket;
    }
    return connectInNamespace(pid, listener.host, port, timeoutMs);
  }
  throw new TaskPortClosedError(`Nothing in the task listens on port ${port}`, {
    metaMessages: ["Start the server inside the task (bound to 0.0.0.0 or 127.0.0.1) and try again once it is up."],
  });
}
