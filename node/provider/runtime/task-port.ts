/**
 * How the provider reaches a TCP port of a running task: the one place that knows where a task's
 * network lives.
 *
 * Today's process runtime runs a task in the host's network namespace (bubblewrap shares it
 * unless `runtime.network` is false). A task's port is then a host port, and so is every other
 * service of the host: before connecting, the provider checks in /proc that the listening socket
 * on that port belongs to one of the task's own processes, so a renter can never reach the
 * host's SSH or the node's API by declaring their port. Where the task has its own network
 * namespace (containers; bubblewrap with `--unshare-net`), this function must connect inside that
 * namespace instead (through the namespace's address or a setns helper); until then it refuses
 * with TaskIoUnavailableError.
 */
import { readdir, readFile, readlink } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { TaskIoUnavailableError, TaskPortClosedError } from "../agent/errors.js";
import type { TaskHandle } from "./runtime.js";

type Listener = { host: string; inode: string };

function parseV4(hex: string): string {
  const n = Number.parseInt(hex, 16);
  return [n & 255, (n >>> 8) & 255, (n >>> 16) & 255, (n >>> 24) & 255].join(".");
}

/** Listening TCP sockets on `port` from /proc/net/tcp{,6}: where to connect and their inode. */
async function listenersOn(port: number): Promise<Listener[]> {
  const out: Listener[] = [];
  for (const [file, v6] of [
    ["/proc/net/tcp", false],
    ["/proc/net/tcp6", true],
  ] as const) {
    const text = await readFile(file, "utf8").catch(() => "");
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || fields[3] !== "0A") continue; // 0A: LISTEN
      const [addrHex, portHex] = fields[1].split(":");
      if (Number.parseInt(portHex, 16) !== port) continue;
      let host: string;
      if (v6) {
        // Any address or loopback: connect to ::1; an IPv4-mapped or other address: skip (rare for a task).
        const any = /^0+$/.test(addrHex);
        const loopback = addrHex === "00000000000000000000000001000000";
        if (!any && !loopback) continue;
        host = "::1";
      } else {
        const ip = parseV4(addrHex);
        host = ip === "0.0.0.0" || ip.startsWith("127.") ? "127.0.0.1" : ip;
      }
      out.push({ host, inode: fields[9] });
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
      if (match) inodes.add(match[1]);
    }
  }
  return inodes;
}

/**
 * Connects to `port` of the running task `handle`. Throws TaskPortClosedError when none of the
 * task's processes listens on it, TaskIoUnavailableError where the runtime keeps the task's
 * network out of reach.
 */
export async function connectToTaskPort(handle: TaskHandle, port: number, options: { timeoutMs?: number } = {}): Promise<Socket> {
  const pids = await handle.processIds();
  if (pids.length === 0) {
    throw new TaskIoUnavailableError("This provider's runtime cannot reach a task's ports (the task runs in a container or its own network namespace)");
  }
  const listeners = await listenersOn(port);
  const owned = await socketInodes(pids);
  const listener = listeners.find((candidate) => owned.has(candidate.inode));
  if (!listener) {
    throw new TaskPortClosedError(`Nothing in the task listens on port ${port}`, {
      metaMessages: ["Start the server inside the task (bound to 0.0.0.0 or 127.0.0.1) and try again once it is up."],
    });
  }
  const socket = connect({ host: listener.host, port });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new TaskPortClosedError(`Connecting to port ${port} of the task timed out`));
    }, options.timeoutMs ?? 5_000);
    socket.once("connect", () => {
      clearTimeout(timer);
      resolve();
    });
    socket.once("error", (error) => {
      clearTimeout(timer);
      reject(new TaskPortClosedError(`Cannot connect to port ${port} of the task: ${error.message}`));
    });
  });
  socket.setNoDelay(true);
  return socket;
}
