import assert from "node:assert/strict";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { readFile, readlink } from "node:fs/promises";
import { promisify } from "node:util";
import { lastJson, runCli, SUANLI_BIN } from "../support/cli.js";
import { startMarket, type Market } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

const run = promisify(execFile);
const quote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;

/**
 * `suanli exec -t`: the CLI itself runs on a pseudo-terminal made by util-linux's `script` (as a
 * user's terminal would be), so it goes raw; the test types into that terminal, resizes it, and
 * reads what the remote shell prints. Real provider node, real child processes.
 */
describe("suanli exec -t: an interactive terminal inside the running task", function () {
  this.timeout(180_000);
  let market: Market;
  let base: string[];
  let terminal: ChildProcess | undefined;

  before(async () => {
    market = await startMarket({ name: "tty" });
    const { devnet, provider, work } = market;
    base = ["--rpc-url", devnet.rpcUrl, "--deployments", devnet.deploymentsDir, "--bootstrap", provider.peer.addr, "--state-dir", work, "--devnet-account", "5"];
  });
  after(async () => {
    if (terminal?.pid && terminal.exitCode === null) process.kill(terminal.pid, "SIGKILL");
    await market?.close();
  });

  it("runs a shell on a terminal: raw keys (Ctrl-C reaches the remote job), its size and resizes, the exit code", async () => {
    const bundle = await market.bundles.bundle({ "run.sh": "sleep 150" });
    const submitted = await runCli([
      "submit",
      "--gpu",
      "A100",
      "--duration",
      "120",
      "--max-price",
      "1",
      "--allow-unattested",
      "--bundle",
      bundle.url,
      "--sha256",
      bundle.sha256,
      "--json",
      ...base,
      "--",
      "sh run.sh",
    ]);
    assert.equal(submitted.code, 0, submitted.stderr);
    const { taskId } = lastJson<{ taskId: string }>(submitted.stdout);
    await waitFor("the task running", async () => (await runCli(["exec", taskId, ...base, "--", "true"])).code === 0, { timeoutMs: 30_000 });

    // The user's terminal: 30 rows × 100 columns.
    const cli = [process.execPath, SUANLI_BIN, "exec", taskId, ...base, "-t", "--", "/bin/sh"].map(quote).join(" ");
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith("SUANLI_")) env[key] = value;
    terminal = spawn("script", ["-qfec", `stty rows 30 cols 100; exec ${cli}`, "/dev/null"], { env: { ...env, TERM: "vt100" }, stdio: ["pipe", "pipe", "pipe"] });
    let screen = "";
    terminal.stdout!.on("data", (chunk: Buffer) => (screen += chunk.toString("utf8")));
    terminal.stderr!.on("data", (chunk: Buffer) => (screen += chunk.toString("utf8")));
    const exited = new Promise<number | null>((resolve) => terminal!.once("close", (code) => resolve(code)));
    const type = (keys: string) => terminal!.stdin!.write(keys);
    const shows = (what: string, pattern: RegExp) =>
      waitFor(what, async () => pattern.test(screen), { timeoutMs: 30_000 }).catch((error: Error) => {
        throw new Error(`${error.message}\n--- terminal ---\n${screen}`);
      });

    type("[ -t 0 ] && [ -t 1 ] && echo on-a-tty-$((6*7)); echo term=$TERM; stty size | sed 's/^/size=/'\r");
    await shows("the remote shell on a terminal", /on-a-tty-42/);
    await shows("the user's TERM and terminal size", /term=vt100[\s\S]*size=30 100/);

    // Resize the user's terminal: the CLI gets SIGWINCH and passes the new size on.
    const cliPid = Number((await readFile(`/proc/${terminal.pid}/task/${terminal.pid}/children`, "utf8")).trim().split(/\s+/)[0]);
    const device = await readlink(`/proc/${cliPid}/fd/0`);
    assert.match(device, /^\/dev\/pts\//);
    await run("stty", ["-F", device, "rows", "40", "cols", "120"]);
    // The resize frame and the next keys travel on one stream, in order.
    await new Promise((resolve) => setTimeout(resolve, 300));
    type("stty size | sed 's/^/resized=/'\r");
    await shows("the new size on the remote terminal", /resized=40 120/);

    // Ctrl-C is a key like any other in raw mode: it interrupts the remote job, not the CLI.
    type("sleep 600; echo slept\r");
    await new Promise((resolve) => setTimeout(resolve, 500));
    type("\x03");
    type("echo after-interrupt-$((2+3))\r");
    await shows("the shell back after Ctrl-C", /after-interrupt-5/);
    assert.doesNotMatch(screen, /\nslept\r/, "the sleep was interrupted, not waited out");

    type("exit 5\r");
    assert.equal(await exited, 5, `the CLI exits with the remote shell's code\n${screen}`);
    assert.equal((await runCli(["cancel", taskId, "--json", ...base])).code, 0);
  });

  it("refuses --tty with --json (usage error, exit 2)", async () => {
    const result = await runCli(["exec", "task-x", ...base, "-t", "--json", "--", "sh"]);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /--tty and --json do not go together/);
  });
});
