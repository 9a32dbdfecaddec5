/**
 * Exec and port forwarding into tasks that run in their own user+network namespace (bubblewrap
 * with the network on, outbound through pasta): exec sees the task's files and its network, a
 * forward reaches the task's own loopback server, and two tasks on the same port each answer
 * for themselves; with the network off the same holds for the task's own loopback
 * (docs/provider.md, "Task I/O").
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import * as tar from "tar";
import { parseInput } from "../../common/validation.js";
import { providerOptionsSchema } from "../../node/provider/options.js";
import { createRuntime } from "../../node/provider/provider.js";
import type { ProcessRuntime } from "../../node/provider/runtime/process-runtime.js";
import type { TaskHandle } from "../../node/provider/runtime/runtime.js";
import { detectBubblewrap, detectNetworkTools } from "../../node/provider/runtime/sandbox.js";
import { connectToTaskPort } from "../../node/provider/runtime/task-port.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";

const NODE = process.execPath;

/** An HTTP server on 127.0.0.1:8000 inside the task, answering with the task's name. */
const SERVER = [
  "import http from 'node:http';",
  "http.createServer((req, res) => res.end('hello from ' + process.env.NAME)).listen(8000, '127.0.0.1', () => console.log('listening'));",
  "setTimeout(() => {}, 60_000);",
].join("\n");

async function httpGet(socket: Socket): Promise<string> {
  let text = "";
  socket.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  socket.write("GET / HTTP/1.0\r\nHost: x\r\n\r\n");
  await closed;
  return text;
}

function runExec(task: TaskHandle, command: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const launch = task.execLaunch(command);
  assert.ok(launch, "a running sandboxed task accepts exec");
  const child = spawn(launch.argv[0]!, launch.argv.slice(1), { cwd: launch.cwd, env: launch.env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
}

describe("task I/O into sandboxed tasks (own user+network namespace)", function () {
  this.timeout(90_000);
  let dir: string;
  let bundleServer: Server;
  let hostService: Server;
  let hostPort: number;
  let baseUrl: string;
  let runtime: ProcessRuntime;
  let offlineRuntime: ProcessRuntime;
  const served = new Map<string, Buffer>();
  let counter = 0;
  const tasks: TaskHandle[] = [];

  const listen = async (server: Server) => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return (server.address() as AddressInfo).port;
  };

  before(async () => {
    assert.equal((await detectBubblewrap()).available, true, "CI installs bubblewrap (.ci/run)");
    assert.ok("tools" in (await detectNetworkTools()), "CI installs passt and iproute2 (.ci/run)");
    dir = await mkdtemp(path.join(tmpdir(), "suanli-io-sandbox-"));
    bundleServer = createServer((req, res) => {
      const body = served.get(req.url ?? "");
      if (!body) return void res.writeHead(404).end();
      res.writeHead(200, { "content-length": body.length }).end(body);
    });
    baseUrl = `http://127.0.0.1:${await listen(bundleServer)}`;
    // Stands for one of the host's own services (the node's API) on the host's loopback.
    hostService = createServer((_req, res) => res.end("host-private"));
    hostPort = await listen(hostService);
    const build = (network: boolean, dataDir: string) => {
      const options = providerOptionsSchema.parse({
        runtime: { sandbox: "bubblewrap", network, readOnlyPaths: [path.dirname(NODE)] },
        fetch: { allowNetworks: ["127.0.0.1"] },
        grace: { taskStopMs: 500 },
      });
      return createRuntime(options, { dataDir: path.join(dir, dataDir), hiddenPaths: [] }) as ProcessRuntime;
    };
    runtime = build(true, "data");
    offlineRuntime = build(false, "data-offline");
    await runtime.verify();
    await offlineRuntime.verify();
  });

  after(async () => {
    for (const task of tasks) await task.cleanup().catch(() => undefined);
    for (const each of [runtime, offlineRuntime]) await each?.close();
    for (const server of [bundleServer, hostService]) await new Promise<void>((resolve) => server?.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  });

  async function startServerTask(name: string, on: ProcessRuntime = runtime): Promise<TaskHandle> {
    const bundleName = `b${++counter}`;
    const staging = path.join(dir, `${bundleName}-src`);
    await mkdir(staging, { recursive: true });
    await writeFile(path.join(staging, "server.mjs"), SERVER);
    await writeFile(path.join(staging, `marker-${name}.txt`), name);
    const file = path.join(dir, `${bundleName}.tar.gz`);
    await tar.c({ gzip: true, file, cwd: staging, portable: true }, ["server.mjs", `marker-${name}.txt`]);
    const bytes = await readFile(file);
    served.set(`/${bundleName}.tar.gz`, bytes);
    const spec = parseInput(
      taskSpecSchema,
      {
        bundle: { url: `${baseUrl}/${bundleName}.tar.gz`, sha256: createHash("sha256").update(bytes).digest("hex") },
        command: [NODE, "server.mjs"],
        env: { NAME: name },
        ports: [8000],
      },
      "task",
    ) as TaskSpec;
    const task = await on.prepare({ taskId: `io-${name}-${counter}`, spec, devices: [], durationMs: 60_000 });
    tasks.push(task);
    await task.start();
    for (let tries = 0; tries < 200 && !task.readLogs().lines.some((line) => line.text === "listening"); tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(
      task.readLogs().lines.some((line) => line.text === "listening"),
      task
        .readLogs()
        .lines.map((line) => line.text)
        .join("\n"),
    );
    return task;
  }

  it("exec runs in the task's filesystem view and network; forward reaches each task's own server on the same port", async () => {
    const [alpha, beta] = await Promise.all([startServerTask("alpha"), startServerTask("beta")]);

    // exec `ls` sees the task's workspace (its own files, not the other task's).
    const ls = await runExec(alpha, ["ls"]);
    assert.equal(ls.code, 0, ls.stderr);
    assert.deepEqual(ls.stdout.trim().split("\n").sort(), ["marker-alpha.txt", "server.mjs"]);
    // exec sees the task's network: its loopback server answers, as `curl 127.0.0.1:8000` would.
    const fetchScript = "const r = await fetch('http://127.0.0.1:8000/'); console.log(await r.text());";
    const inside = await runExec(beta, [NODE, "--input-type=module", "-e", fetchScript]);
    assert.equal(inside.code, 0, inside.stderr);
    assert.equal(inside.stdout.trim(), "hello from beta");
    // ... and not the host's loopback.
    const hostProbe = await runExec(alpha, [
      NODE,
      "--input-type=module",
      "-e",
      `try { await fetch('http://127.0.0.1:${hostPort}/'); console.log('reached'); } catch { console.log('refused'); }`,
    ]);
    assert.equal(hostProbe.stdout.trim(), "refused", hostProbe.stderr);

    // forward: each task's port 8000 is its own server.
    for (const [task, name] of [
      [alpha, "alpha"],
      [beta, "beta"],
      [alpha, "alpha"],
    ] as const) {
      const response = await httpGet(await connectToTaskPort(task, 8000));
      assert.match(response, /^HTTP\/1\.1 200 OK/);
      assert.ok(response.endsWith(`hello from ${name}`), response);
    }
    // Nothing in the task listens on 8001; the host's own port is not the task's.
    for (const port of [8001, hostPort]) {
      await assert.rejects(connectToTaskPort(alpha, port), (error: Error) => error.name === "TaskPortClosedError" && /listens on port/.test(error.message));
    }
  });

  it("with the network off too: exec and forward reach the task's own loopback", async () => {
    const task = await startServerTask("gamma", offlineRuntime);
    const inside = await runExec(task, [NODE, "--input-type=module", "-e", "const r = await fetch('http://127.0.0.1:8000/'); console.log(await r.text());"]);
    assert.equal(inside.code, 0, inside.stderr);
    assert.equal(inside.stdout.trim(), "hello from gamma");
    const response = await httpGet(await connectToTaskPort(task, 8000));
    assert.ok(response.endsWith("hello from gamma"), response);
  });
});
