/**
 * A child process in its own process group, so that stopping it reaches everything it started:
 * SIGTERM to the group, a grace period for it to finish, then SIGKILL to whatever is left. Used
 * for tasks (process and container runtimes) and for the idle workload.
 */
import type { ChildProcess } from "node:child_process";
import { spawnChild } from "../../process/child.js";
import { readFile, readdir } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { LineSplitter } from "./logs.js";
import { runDetached } from "../../../common/detached.js";

export type ProcessExit = {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started at all (ENOENT, EACCES). */
  spawnError?: NodeJS.ErrnoException;
};

export type ManagedProcessOptions = {
  argv: readonly string[];
  cwd: string;
  env: Record<string, string>;
  /** Each complete line of output (without the newline). */
  onLine?: (stream: "stdout" | "stderr", line: string) => void;
  /** Raw stdout bytes, before line splitting. */
  onStdout?: (chunk: Uint8Array) => void;
  /**
   * Process names that get no SIGTERM, only the final SIGKILL. For bubblewrap: bwrap dies at
   * SIGTERM and would report that instead of waiting for the task it runs to finish.
   */
  spareFromTerm?: readonly string[];
  /** Extra pipes at fd 3, 4, ... of the child (bubblewrap's --info-fd and --block-fd). */
  extraPipes?: number;
};

/** How often the group is polled while waiting for it to empty. */
const POLL_MS = 25;
/** After SIGKILL the kernel needs a moment; wait at most this long before giving up on stragglers. */
const AFTER_KILL_MS = 5_000;
/** After the main process exits, output may still be in flight from its pipes. */
const FLUSH_MS = 2_000;

export class ManagedProcess {
  readonly pid: number | undefined;
  /** Resolves when the main process has exited, the rest of its group is gone and output is flushed. */
  readonly exited: Promise<ProcessExit>;
  private readonly child: ChildProcess;
  private readonly spareFromTerm: readonly string[];
  private finished = false;
  /** Set by terminate(): resolves when the group is empty or the grace period is over. */
  private graceOver: Promise<void> | undefined;

  private constructor(options: ManagedProcessOptions) {
    // detached: the child calls setsid(), so it leads a new process group whose id is its pid.
    this.child = spawnChild(options.argv[0]!, options.argv.slice(1), {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe", ...Array.from({ length: options.extraPipes ?? 0 }, () => "pipe" as const)],
    });
    this.pid = this.child.pid;
    this.spareFromTerm = options.spareFromTerm ?? [];
    const out = new LineSplitter((line) => options.onLine?.("stdout", line));
    const err = new LineSplitter((line) => options.onLine?.("stderr", line));
    const stdoutClosed = new Promise<void>((resolve) => {
      if (!this.child.stdout) return resolve();
      this.child.stdout.on("data", (chunk: Buffer) => {
        options.onStdout?.(chunk);
        out.write(chunk);
      });
      this.child.stdout.on("close", () => resolve());
    });
    const stderrClosed = new Promise<void>((resolve) => {
      if (!this.child.stderr) return resolve();
      this.child.stderr.on("data", (chunk: Buffer) => err.write(chunk));
      this.child.stderr.on("close", () => resolve());
    });
    this.exited = new Promise<ProcessExit>((resolve) => {
      this.child.once("error", (error: NodeJS.ErrnoException) => {
        if (this.child.pid === undefined) {
          this.finished = true;
          resolve({ code: null, signal: null, spawnError: error });
        }
      });
      this.child.once("exit", (code, signal) => {
        // Whatever the main process left running in its group ends with it, but not before the
        // grace period of a stop in progress: under bubblewrap the main process is bwrap, which
        // exits at SIGTERM while the task inside is still finishing.
        runDetached(
          (async () => {
            if (this.graceOver) await this.graceOver;
            this.signalGroup("SIGKILL");
            await this.waitGroupEmpty(AFTER_KILL_MS);
            await Promise.race([Promise.all([stdoutClosed, stderrClosed]), sleep(FLUSH_MS)]);
            out.end();
            err.end();
            this.finished = true;
            resolve({ code, signal });
          })(),
          undefined,
          "Ending the process group",
        );
      });
    });
  }

  static spawn(options: ManagedProcessOptions): ManagedProcess {
    return new ManagedProcess(options);
  }

  /** The parent's end of the child's extra pipe at `fd` (3 or more), when it was asked for. */
  pipe(fd: number): import("node:stream").Duplex | undefined {
    const stream = fd >= 3 ? this.child.stdio[fd] : undefined;
    return (stream ?? undefined) as import("node:stream").Duplex | undefined;
  }

  get hasExited(): boolean {
    return this.finished;
  }

  /** Sends a signal to the whole group; false when the group no longer exists. */
  signalGroup(signal: NodeJS.Signals | 0): boolean {
    if (this.pid === undefined) return false;
    try {
      process.kill(-this.pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Whether any process of the group is still alive. A group of zombies counts as gone: orphans
   * are reparented to an init that may be slow (or, in some containers, never) to reap them.
   */
  async groupAlive(): Promise<boolean> {
    if (!this.signalGroup(0)) return false;
    const members = await readGroupMembers(this.pid!);
    return members === null ? true : members.some((member) => member.state !== "Z");
  }

  /** Polls until the group is empty or `timeoutMs` passes; true when empty. */
  async waitGroupEmpty(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (await this.groupAlive()) {
      if (Date.now() >= deadline) return false;
      await sleep(POLL_MS);
    }
    return true;
  }

  /**
   * SIGTERM to the group, up to `graceMs` for it to exit, then SIGKILL. Resolves with the main
   * process's exit once everything is gone.
   */
  async terminate(graceMs: number): Promise<ProcessExit> {
    if (!this.finished && !this.graceOver && (await this.sendTerm())) {
      this.graceOver = (async () => {
        // Not just the main process: a child that ignores SIGTERM keeps the group alive.
        const empty = await this.waitGroupEmpty(graceMs);
        if (!empty) this.signalGroup("SIGKILL");
      })();
    }
    return this.exited;
  }

  /**
   * SIGTERM to the group, or to each member but the spared ones; no wait and no SIGKILL (the start
   * of a preemption notice uses it alone). False when the group is gone.
   */
  async sendTerm(): Promise<boolean> {
    if (this.finished) return false;
    if (this.spareFromTerm.length === 0) return this.signalGroup("SIGTERM");
    const members = await readGroupMembers(this.pid!);
    if (members === null) return this.signalGroup("SIGTERM");
    let any = false;
    for (const member of members) {
      if (member.state === "Z") continue;
      any = true;
      if (this.spareFromTerm.includes(member.comm)) continue;
      try {
        process.kill(member.pid, "SIGTERM");
      } catch {
        // exited in the meantime
      }
    }
    return any;
  }

  /** CPU seconds and resident memory of the group's live processes, read from /proc (Linux). */
  async groupUsage(): Promise<{ cpuSeconds: number; rssBytes: number; processes: number } | null> {
    if (this.pid === undefined || this.finished) return null;
    return readGroupUsage(this.pid);
  }
}

// Linux reports CPU time in clock ticks (USER_HZ, 100 on every mainstream architecture) and
// resident memory in pages (4 KiB on x86-64 and the usual arm64 kernels).
const CLOCK_TICKS_PER_SECOND = 100;
const PAGE_BYTES = 4096;

export type GroupMember = { pid: number; comm: string; state: string; ticks: number; pages: number };

/** The processes whose process group is `pgid`, read from /proc; null where there is no /proc. */
export async function readGroupMembers(pgid: number): Promise<GroupMember[] | null> {
  const entries = await readdir("/proc").catch(() => null);
  if (!entries) return null;
  const out: GroupMember[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => undefined);
    if (!stat) continue;
    // Fields after the command name, which is in parentheses and may itself hold spaces.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[2]) !== pgid) continue;
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    out.push({ pid: Number(entry), comm, state: fields[0]!, ticks: Number(fields[11]) + Number(fields[12]), pages: Number(fields[21]) });
  }
  return out;
}

/** Sums utime+stime and rss over the live processes of process group `pgid`. */
export async function readGroupUsage(pgid: number): Promise<{ cpuSeconds: number; rssBytes: number; processes: number } | null> {
  const members = await readGroupMembers(pgid);
  if (!members) return null;
  const live = members.filter((member) => member.state !== "Z");
  return {
    cpuSeconds: live.reduce((sum, member) => sum + member.ticks, 0) / CLOCK_TICKS_PER_SECOND,
    rssBytes: live.reduce((sum, member) => sum + member.pages, 0) * PAGE_BYTES,
    processes: live.length,
  };
}
