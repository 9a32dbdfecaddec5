/**
 * Interactive exec (`npx suanli exec -t`): the command runs on a pseudo-terminal made by util-linux's
 * `script` (no native module) inside the task's environment, sized at start by `stty` on that
 * terminal, resized later by `stty -F` on it from the provider (the kernel then sends SIGWINCH to
 * the command's foreground job). `script` must exist in the task's environment: the host's for
 * the process runtimes (bubblewrap binds /usr), the image's for containers.
 */
import { readFile, readlink } from "node:fs/promises";
import { execFileTextAsync } from "../../process/child.js";

/** A word quoted for /bin/sh. */
export function shellQuote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

export type TtySize = { rows: number; cols: number };

/**
 * The argv that runs `argv` on a new pseudo-terminal of `size`, with TERM set: util-linux's
 * `script`, itself run inside the task's environment (sandbox, namespaces, container), so the
 * terminal belongs to the task's own devpts and PID namespace and a shell's job control works.
 * `script -e` answers the command's exit status.
 */
export function ttyArgv(argv: readonly string[], size: TtySize & { term: string }): string[] {
  const inner = `export TERM=${shellQuote(size.term)}; stty rows ${size.rows} cols ${size.cols} 2>/dev/null; exec ${argv.map(shellQuote).join(" ")}`;
  return ["script", "-qfec", inner, "/dev/null"];
}

/**
 * The terminal of a TTY exec: the first process under `rootPid` (the launcher: nsenter, bwrap,
 * docker exec, then script) whose standard input is a pseudo-terminal, as a /proc path that opens
 * it from outside the task's mount namespace too.
 */
async function terminalOf(rootPid: number): Promise<string | undefined> {
  const queue = [rootPid];
  for (let seen = 0; queue.length > 0 && seen < 64; seen++) {
    const pid = queue.shift()!;
    const device = await readlink(`/proc/${pid}/fd/0`).catch(() => undefined);
    if (pid !== rootPid && device?.startsWith("/dev/pts/")) return `/proc/${pid}/fd/0`;
    const children = await readFile(`/proc/${pid}/task/${pid}/children`, "utf8").catch(() => "");
    queue.push(...children.split(/\s+/).filter(Boolean).map(Number));
  }
  return undefined;
}

/** Sets the terminal size of a TTY exec started as `rootPid`; false when its terminal is gone. */
export async function resizeTty(rootPid: number, size: TtySize): Promise<boolean> {
  const device = await terminalOf(rootPid);
  if (!device) return false;
  try {
    await execFileTextAsync("stty", ["-F", device, "rows", String(size.rows), "cols", String(size.cols)], { timeout: 5_000 });
    return true;
  } catch {
    return false;
  }
}
