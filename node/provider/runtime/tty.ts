/**
 * Interactive exec (`suanli exec -t`): the command runs on a pseudo-terminal made by util-linux's
 * `script` (no native module), sized at start by `stty` on that terminal, resized later by
 * `stty -F` on it (the kernel then sends SIGWINCH to the command's foreground job). The terminal
 * is the provider's, created outside the task's sandbox; the launcher (nsenter, bwrap, docker
 * exec) inherits it as its standard input, output and error.
 */
import { execFile } from "node:child_process";
import { readFile, readlink } from "node:fs/promises";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A word quoted for /bin/sh. */
export function shellQuote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

export type TtySize = { rows: number; cols: number };

/**
 * The argv and environment that run `argv` on a new pseudo-terminal of `size`, with TERM set.
 * `script -e` answers the command's exit status.
 */
export function ttyLaunch(argv: readonly string[], env: NodeJS.ProcessEnv, size: TtySize & { term: string }): { argv: string[]; env: NodeJS.ProcessEnv } {
  const restoreShell = env.SHELL === undefined ? "unset SHELL" : `SHELL=${shellQuote(env.SHELL)}`;
  const inner = `stty rows ${size.rows} cols ${size.cols} 2>/dev/null; ${restoreShell}; exec ${argv.map(shellQuote).join(" ")}`;
  // script runs its command through $SHELL -c: a POSIX shell, whatever the task's SHELL is.
  return { argv: ["script", "-qfec", inner, "/dev/null"], env: { ...env, SHELL: "/bin/sh", TERM: size.term } };
}

/** The terminal device of the command `script` (pid `scriptPid`) started: its child's standard input. */
async function terminalOf(scriptPid: number): Promise<string | undefined> {
  const children = await readFile(`/proc/${scriptPid}/task/${scriptPid}/children`, "utf8").catch(() => "");
  for (const pid of children.split(/\s+/).filter(Boolean)) {
    const device = await readlink(`/proc/${pid}/fd/0`).catch(() => undefined);
    if (device?.startsWith("/dev/pts/")) return device;
  }
  return undefined;
}

/** Sets the terminal size of a TTY exec; false when its terminal is gone. */
export async function resizeTty(scriptPid: number, size: TtySize): Promise<boolean> {
  const device = await terminalOf(scriptPid);
  if (!device) return false;
  try {
    await run("stty", ["-F", device, "rows", String(size.rows), "cols", String(size.cols)], { timeout: 5_000 });
    return true;
  } catch {
    return false;
  }
}
