/**
 * The provider's start check of the task network (issue #40 item 1): pasta attached once to a
 * throwaway network namespace, exactly as it will be for a task. A host without a route out (an
 * offline VM, a container with only loopback, a laptop on a plane) fails here, at start, with
 * pasta's own words ("No external routable interface for IPv4"), instead of failing every task
 * that is sold afterwards.
 */
import { readFile, readlink, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { spawnChild } from "../../process/child.js";
import { findExecutable } from "./limits.js";
import { attachTaskNetwork, type NetworkTools } from "./sandbox.js";

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Why a task's network cannot be attached on this host, in one line; undefined when it can. */
export async function probeTaskNetwork(tools: NetworkTools, timeoutMs = 15_000): Promise<string | undefined> {
  const unshare = await findExecutable("unshare", `${process.env.PATH ?? ""}:${DEFAULT_PATH}`);
  if (!unshare) return "unshare (util-linux) is not installed, so the task network could not be checked";
  // A user and network namespace of its own, held open by a sleep that exec'd in place of unshare:
  // its pid is the namespace's, as bubblewrap's child is a task's.
  const holder = spawnChild(unshare, ["--user", "--map-root-user", "--net", "sleep", String(Math.ceil(timeoutMs / 1000) + 5)], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  holder.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const exited = new Promise<void>((resolve) => holder.once("close", () => resolve()));
  const pidFile = path.join(tmpdir(), `.suanli-network-probe-${process.pid}-${Date.now()}.pid`);
  try {
    // unshare has exec'd sleep once the namespace exists: its /proc entry then names another net namespace than ours.
    for (let attempt = 0; attempt < 100; attempt++) {
      if (holder.exitCode !== null) return `a network namespace could not be created (${stderr.trim().slice(0, 200) || `unshare exited ${holder.exitCode}`})`;
      if (await inOwnNamespace(holder.pid!)) break;
      await sleep(20);
    }
    const network = await attachTaskNetwork(holder.pid!, { tools, loopbackPorts: [], allow: [], pidFile, timeoutMs });
    await network.stop();
    return undefined;
  } catch (error) {
    // SuanliError's message carries its details on a line of their own: one line for the operator.
    return (error as Error).message.replace(/\s*\n+\s*/g, " ").trim();
  } finally {
    holder.kill("SIGKILL");
    await exited;
    await rm(pidFile, { force: true });
  }
}

async function inOwnNamespace(pid: number): Promise<boolean> {
  const [own, its] = await Promise.all([readlink("/proc/self/ns/net").catch(() => ""), readlink(`/proc/${pid}/ns/net`).catch(() => "")]);
  return its !== "" && its !== own;
}

/**
 * Whether this host has an IPv4 default route that is up (/proc/net/route of the node's network
 * namespace). A container's network (slirp4netns, a Docker bridge) attaches on a host without one,
 * but then reaches nothing: the container runtime's start check says so (IPv6 is off in containers).
 */
export async function hasDefaultRoute(routeFile = "/proc/net/route"): Promise<boolean> {
  const table = await readFile(routeFile, "utf8").catch(() => "");
  return table
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .some((fields) => fields[1] === "00000000" && fields[7] === "00000000" && (Number.parseInt(fields[3] ?? "0", 16) & 1) === 1);
}

/** The container runtime's start-check warning on a host without a route out. */
export const NO_ROUTE_OUT_WARNING =
  "This host has no default route: container tasks get their own network (slirp4netns, or Docker's bridge), but it reaches nothing (no route out; never the host's loopback). " +
  "Tasks that need the network will fail. Give the host a route out and restart the node, or set provider.runtime.network false to run without network on purpose.";
