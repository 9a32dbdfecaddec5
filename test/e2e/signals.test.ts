/**
 * Issue #22, item 7: SIGTERM to the command a user or a supervisor started — `npx suanli` (the
 * bin launcher, which re-runs itself with the project's Node 22 when started by an older Node)
 * or `npm run suanli` — reaches the Node process doing the work: the devnet it ran stops and
 * its JSON-RPC port closes. Before, the launcher died and left the node running.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { copyFile, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { waitFor } from "../support/wait.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** PATH without the project's node_modules/.bin: `node` is then the machine's own (Node 20 here). */
function systemPath(): string {
  return (process.env.PATH ?? "")
    .split(":")
    .filter((dir) => !dir.includes("node_modules"))
    .join(":");
}

function firstJson(child: ChildProcess): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout!.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const line = stdout.split("\n").find((text) => text.startsWith("{"));
      if (line) resolve(JSON.parse(line) as Record<string, unknown>);
    });
    child.once("exit", (code) => reject(new Error(`exited with ${code} before printing its description: ${stderr}`)));
  });
}

async function rpcAnswers(rpcUrl: string): Promise<boolean> {
  try {
    const response = await fetch(rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      signal: AbortSignal.timeout(2_000),
    });
    return response.ok;
  } catch {
    return false;
  }
}

describe("npx suanli and npm run behave under the machine's older Node (issue #22 item 7)", function () {
  this.timeout(180_000);
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-signals-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function terminateAndCheck(command: string, args: string[]): Promise<void> {
    const env = { ...process.env, PATH: systemPath() };
    const child = spawn(command, args, { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code, signal) => resolve(code ?? (signal ? 128 : null))));
    try {
      const described = await firstJson(child);
      const rpcUrl = described.rpcUrl as string;
      assert.equal(await rpcAnswers(rpcUrl), true);
      child.kill("SIGTERM");
      await exited;
      // The process that served the chain is gone too: nothing answers on its port.
      await waitFor("the devnet's JSON-RPC port to close", async () => !(await rpcAnswers(rpcUrl)), { timeoutMs: 30_000, intervalMs: 250 });
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  }

  it("the bin launcher, started by the machine's own Node, passes SIGTERM on", async () => {
    const node = execFileSync("sh", ["-c", "command -v node"], { env: { ...process.env, PATH: systemPath() } })
      .toString()
      .trim();
    assert.ok(node, "a node on the system PATH");
    await terminateAndCheck(node, [path.join(root, "bin/suanli.mjs"), "devnet", "--no-bundler", "--port", "0", "--attestor-nodes", "", "--deployments", dir, "--json"]);
  });

  it("npm run suanli passes SIGTERM on", async () => {
    await terminateAndCheck("npm", ["run", "--silent", "suanli", "--", "devnet", "--no-bundler", "--port", "0", "--attestor-nodes", "", "--deployments", dir, "--json"]);
  });

  it("npx suanli prints no EBADENGINE warning when npm itself runs on an older Node", async () => {
    // npx checks the package's declared engines whenever it reads the installed tree itself (no
    // up-to-date hidden lockfile, as after a fresh clone's first build): a package in a folder
    // with this package.json and a `suanli` bin, run through the machine's own npm and Node.
    const probe = path.join(dir, "probe");
    await mkdir(path.join(probe, "node_modules", ".bin"), { recursive: true });
    await copyFile(path.join(root, "package.json"), path.join(probe, "package.json"));
    await writeFile(path.join(probe, "node_modules", ".bin", "suanli"), "#!/bin/sh\necho probe-ran\n", { mode: 0o755 });
    const result = spawnSync("npx", ["suanli"], { cwd: probe, env: { ...process.env, PATH: systemPath() }, encoding: "utf8", timeout: 60_000 });
    assert.match(result.stdout, /probe-ran/, result.stderr);
    assert.doesNotMatch(result.stderr, /EBADENGINE/);
  });
});
