/**
 * Host faults for the chaos suite (test/e2e/chaos-host.test.ts): what goes wrong on the provider's
 * machine rather than on the network or the chain.
 *
 * - `snapshotDir` / `restoreDir`: a copy of a node's data dir taken while it runs (a backup), put
 *   back later in place of the newer one (the level database "restored from an older point").
 * - `SmallDisk`: a tmpfs of a few MiB mounted (as root) where the node keeps its data, filled to
 *   the last byte and freed again (disk full).
 * - `skewedClockEnv`: the environment that runs a child process with its wall clock moved by a
 *   fixed offset (clock skew), through libfaketime, in the test's child only.
 * - `mineBlock`: one block on the devnet (its clock moves only with blocks).
 * - `processesWithMarker`: the live processes whose command line holds a marker (a task's
 *   processes, to see that none outlives its lease).
 */
import { execFile } from "node:child_process";
import { cp, mkdir, open, readdir, readFile, rm, stat, statfs } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * Removes a test's folder after detaching every file system mounted under it: a node killed
 * mid-lease leaves its lease's workspace disk (a loop-mounted image, workspace-disk.ts) mounted
 * until it restarts, and rm would fail with EBUSY on it.
 */
export async function removeDir(dir: string): Promise<void> {
  const root = path.resolve(dir);
  const mountinfo = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  const points = mountinfo
    .split("\n")
    .map((line) => line.split(" ")[4]?.replace(/\\040/g, " "))
    .filter((point): point is string => point !== undefined && (point === root || point.startsWith(`${root}/`)))
    .sort((a, b) => b.length - a.length);
  for (const point of points) await run("umount", ["-l", point]).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
}

/**
 * Copies a data dir as it is now (the node may be running: level's files are append-only logs and
 * tables). Workspace disk images (`.<task>.disk`, sparse, up to 100 GiB a unit) are left out: a
 * copy would write their holes out in full.
 */
export async function snapshotDir(dataDir: string, into: string): Promise<void> {
  await removeDir(into);
  await cp(dataDir, into, { recursive: true, preserveTimestamps: true, filter: (source) => !source.endsWith(".disk") });
}

/** Replaces `dataDir` with the copy in `snapshot` (the node must be stopped). */
export async function restoreDir(snapshot: string, dataDir: string): Promise<void> {
  await removeDir(dataDir);
  await cp(snapshot, dataDir, { recursive: true, preserveTimestamps: true });
}

/** Live (non-zombie) processes whose command line contains `marker`. */
export async function processesWithMarker(marker: string): Promise<number[]> {
  const out: number[] = [];
  for (const entry of await readdir("/proc").catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    if (!cmdline.includes(marker)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    if (stat && stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z") out.push(Number(entry));
  }
  return out;
}

/**
 * A small tmpfs mounted at a directory, to run out of space on purpose. Mounting needs root (or
 * CAP_SYS_ADMIN); `mount` says why when it cannot, and the test fails with that reason.
 */
export class SmallDisk {
  private fillers = 0;
  private constructor(readonly dir: string) {}

  /** Mounts a tmpfs of `bytes` at `dir` (created if missing). Throws, with the reason, when mounting is not possible here. */
  static async mount(dir: string, bytes: number): Promise<SmallDisk> {
    await mkdir(dir, { recursive: true });
    try {
      await run("mount", ["-t", "tmpfs", "-o", `size=${bytes},mode=0700`, "tmpfs", dir]);
    } catch (error) {
      const stderr = (error as { stderr?: string }).stderr?.trim();
      throw new Error(
        `Cannot mount a ${bytes}-byte tmpfs at ${dir} for the disk-full test (${stderr || (error as Error).message}). ` +
          `The test needs root or CAP_SYS_ADMIN (uid ${process.getuid?.()}); run CI as root, or in a container with --cap-add SYS_ADMIN.`,
        { cause: error },
      );
    }
    return new SmallDisk(dir);
  }

  /** Free bytes on the filesystem. */
  async free(): Promise<number> {
    const stats = await statfs(this.dir);
    return stats.bavail * stats.bsize;
  }

  /** Writes filler files until the filesystem refuses another byte (ENOSPC); returns the bytes written. */
  async fill(): Promise<number> {
    const file = await open(path.join(this.dir, `filler-${this.fillers++}`), "w");
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let written = 0;
    try {
      for (let size = chunk.length; size >= 1;) {
        try {
          const { bytesWritten } = await file.write(chunk, 0, size);
          written += bytesWritten;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
          size = Math.floor(size / 2);
        }
      }
    } finally {
      await file.close().catch(() => undefined);
    }
    return written;
  }

  /** Removes the filler files (space comes back). */
  async release(): Promise<void> {
    for (let i = 0; i < this.fillers; i++) await rm(path.join(this.dir, `filler-${i}`), { force: true });
    this.fillers = 0;
  }

  /** Unmounts the tmpfs (lazily, should something still hold a file open). */
  async unmount(): Promise<void> {
    await run("umount", ["-l", this.dir]).catch(() => undefined);
  }
}

/** Where Debian's libfaketime lives (package `faketime`, installed by .ci/run). */
const LIBFAKETIME_DIRS = ["/usr/lib/x86_64-linux-gnu/faketime", "/usr/lib/aarch64-linux-gnu/faketime", "/usr/lib/faketime"];

/**
 * The environment additions that run a child process with its wall clock `skewSeconds` off the
 * real one (positive: ahead), through libfaketime (LD_PRELOAD). Monotonic clocks are left real, as
 * on a host whose wall clock is simply set wrong. Throws, saying what to install, when it is missing.
 */
export async function skewedClockEnv(skewSeconds: number): Promise<Record<string, string>> {
  if (!Number.isInteger(skewSeconds)) throw new Error(`skewSeconds must be a whole number of seconds, got ${skewSeconds}`);
  for (const dir of LIBFAKETIME_DIRS) {
    const lib = path.join(dir, "libfaketime.so.1");
    if (
      await stat(lib).then(
        () => true,
        () => false,
      )
    ) {
      return { LD_PRELOAD: lib, FAKETIME: `${skewSeconds >= 0 ? "+" : ""}${skewSeconds}s`, FAKETIME_DONT_FAKE_MONOTONIC: "1", FAKETIME_DONT_RESET: "1" };
    }
  }
  throw new Error(
    `libfaketime is not installed (looked in ${LIBFAKETIME_DIRS.join(", ")}): the clock-skew test needs Debian's faketime package (apt-get install faketime; .ci/run installs it)`,
  );
}

/** Mines one block on a devnet's JSON-RPC endpoint (`evm_mine`): its clock moves only with blocks. */
export async function mineBlock(rpcUrl: string): Promise<void> {
  const response = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "evm_mine", params: [] }),
  });
  const answer = (await response.json()) as { error?: { message?: string } };
  if (!response.ok || answer.error) throw new Error(`evm_mine failed at ${rpcUrl}: ${answer.error?.message ?? response.status}`);
}
