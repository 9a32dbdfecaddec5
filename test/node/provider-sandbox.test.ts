/**
 * The provider's host is not the renter's: real bubblewrap sandboxes and real pasta networks,
 * probed from inside by renter tasks (docs/provider.md, "Security model").
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import { access, chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { homedir, tmpdir } from "node:os";
import path from "node:path";
import * as tar from "tar";
import { parseInput } from "../../common/validation.js";
import { providerOptionsSchema } from "../../node/provider/options.js";
import { createRuntime } from "../../node/provider/provider.js";
import type { ProcessRuntime } from "../../node/provider/runtime/process-runtime.js";
import type { TaskResult } from "../../node/provider/runtime/runtime.js";
import { detectBubblewrap, detectNetworkTools, hostIpv4Addresses } from "../../node/provider/runtime/sandbox.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";
import { ipv6Targets, startHostIpv6 } from "../support/host-ipv6.js";

const NODE = process.execPath;

/** A node script that tries to connect to each target and prints `<label>=<outcome>`. */
const CONNECT_PROBE = `
import net from "node:net";
const targets = JSON.parse(process.env.TARGETS);
for (const [label, host, port] of targets) {
  const outcome = await new Promise((resolve) => {
    const socket = net.connect({ host, port, timeout: 3000 });
    let body = "";
    socket.on("connect", () => socket.write("GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n"));
    socket.on("data", (chunk) => (body += chunk));
    socket.on("end", () => resolve("answered:" + body.split("\\r\\n\\r\\n")[1]));
    socket.on("timeout", () => { socket.destroy(); resolve("timeout"); });
    socket.on("error", (error) => resolve("error:" + error.code));
  });
  console.log(label + "=" + outcome);
}
`;

/** Live pasta processes serving a task under `root`: their `--pid` file lies there (pasta shows as `passt.avx2`, so not by name). */
async function pastasUnder(root: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`).catch(() => undefined);
    if (!cmdline || cmdline.length === 0) continue;
    const args = cmdline.toString("utf8").split("\0");
    const at = args.indexOf("--pid");
    if (at !== -1 && args[at + 1]?.startsWith(root + path.sep) === true) found.push(Number(entry));
  }
  return found;
}

describe("provider sandbox: what a renter's task can reach", function () {
  this.timeout(60_000);
  let dir: string;
  let bundleServer: Server;
  let nodeService: Server;
  let allowedService: Server;
  let publicService: Server;
  let baseUrl: string;
  let nodePort: number;
  let allowedPort: number;
  let publicPort: number;
  const served = new Map<string, Buffer>();
  let counter = 0;

  const listen = async (server: Server, host: string) => {
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    return (server.address() as AddressInfo).port;
  };

  before(async () => {
    assert.equal((await detectBubblewrap()).available, true, "CI installs bubblewrap (.ci/run)");
    assert.ok("tools" in (await detectNetworkTools()), "CI installs passt and iproute2 (.ci/run)");
    dir = await mkdtemp(path.join(tmpdir(), "suanli-sandbox-"));
    // The operator's read-only paths below it must be reachable by the task user a root node runs
    // tasks as (task-user.ts): searchable, not listable.
    await chmod(dir, 0o711);
    bundleServer = createServer((req, res) => {
      const body = served.get(req.url ?? "");
      if (!body) return void res.writeHead(404).end();
      res.writeHead(200, { "content-length": body.length }).end(body);
    });
    baseUrl = `http://127.0.0.1:${await listen(bundleServer, "127.0.0.1")}`;
    // Stands for the node's own ports (metrics, RPC, API) on the host's loopback.
    nodeService = createServer((_req, res) => res.end("node-private-answer"));
    nodePort = await listen(nodeService, "127.0.0.1");
    allowedService = createServer((_req, res) => res.end("allowed-service"));
    allowedPort = await listen(allowedService, "127.0.0.1");
    // Listens on every interface, like a node's p2p or API port bound to 0.0.0.0.
    publicService = createServer((_req, res) => res.end("all-interfaces"));
    publicPort = await listen(publicService, "0.0.0.0");
  });

  /** Every runtime made here, closed at the end (their staging folders in /tmp). */
  const runtimes: ProcessRuntime[] = [];
  after(async () => {
    for (const runtime of runtimes) await runtime.close();
    for (const server of [bundleServer, nodeService, allowedService, publicService]) await new Promise<void>((resolve) => server?.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  });

  async function bundle(files: Record<string, string>): Promise<{ url: string; sha256: string }> {
    const name = `b${++counter}`;
    const staging = path.join(dir, `${name}-src`);
    await mkdir(staging, { recursive: true });
    for (const [rel, content] of Object.entries(files)) await writeFile(path.join(staging, rel), content);
    const file = path.join(dir, `${name}.tar.gz`);
    await tar.c({ gzip: true, file, cwd: staging, portable: true }, Object.keys(files));
    const bytes = await readFile(file);
    served.set(`/${name}.tar.gz`, bytes);
    return { url: `${baseUrl}/${name}.tar.gz`, sha256: createHash("sha256").update(bytes).digest("hex") };
  }

  /** A runtime built the way the provider agent builds it: from the config section, the data dir and the config file. */
  function runtimeFromConfig(provider: Record<string, unknown>, context: { dataDir: string; configFile?: string }): ProcessRuntime {
    const options = providerOptionsSchema.parse({
      ...provider,
      fetch: { allowNetworks: ["127.0.0.1"] },
      grace: { taskStopMs: 500 },
    });
    const runtime = createRuntime(options, { dataDir: context.dataDir, hiddenPaths: context.configFile ? [context.configFile] : [] }) as ProcessRuntime;
    runtimes.push(runtime);
    return runtime;
  }

  async function runTask(
    runtime: ProcessRuntime,
    files: Record<string, string>,
    command: string[],
    env: Record<string, string> = {},
  ): Promise<{ result: TaskResult; lines: string[] }> {
    const b = await bundle(files);
    const spec = parseInput(taskSpecSchema, { bundle: b, command, env }, "task") as TaskSpec;
    const task = await runtime.prepare({ taskId: `t${++counter}`, spec, devices: [], durationMs: 30_000 });
    await task.start();
    const result = await task.wait();
    const lines = task.readLogs().lines.map((line) => line.text);
    await task.cleanup();
    return { result, lines };
  }

  it("never shows a task the node's data dir, keys, config file or home, even under a read-only path", async () => {
    // An operator who binds a whole directory read-only (a dataset next to the node's files).
    const opt = path.join(dir, "opt");
    const dataDir = path.join(opt, "suanli-data");
    await mkdir(path.join(dataDir, "db"), { recursive: true });
    const peerKey = path.join(dataDir, "peer.key");
    await writeFile(peerKey, "PEER-KEY-BYTES", { mode: 0o600 });
    const configFile = path.join(opt, "provider.json");
    await writeFile(configFile, JSON.stringify({ chain: { privateKey: "0xCONFIG-PRIVATE-KEY" } }));
    const dataset = path.join(opt, "dataset.txt");
    await writeFile(dataset, "public dataset");
    const home = homedir();

    const runtime = runtimeFromConfig({ runtime: { sandbox: "bubblewrap", network: false, readOnlyPaths: [path.dirname(NODE), opt] } }, { dataDir, configFile });
    assert.equal((await runtime.verify()).sandboxed, true);
    const probe = [
      "import { readFileSync, readdirSync } from 'node:fs';",
      "for (const p of JSON.parse(process.env.PATHS)) {",
      "  let outcome;",
      "  try { outcome = 'read:' + readFileSync(p, 'utf8'); } catch (e) {",
      "    if (e.code === 'EISDIR') { try { outcome = 'dir:' + readdirSync(p).join(','); } catch (d) { outcome = 'error:' + d.code; } } else outcome = 'error:' + e.code;",
      "  }",
      "  console.log(p + ' => ' + outcome);",
      "}",
    ].join("\n");
    const paths = [peerKey, configFile, dataDir, path.join(dataDir, "db"), home, dataset];
    const { result, lines } = await runTask(runtime, { "probe.mjs": probe }, [NODE, "probe.mjs"], { PATHS: JSON.stringify(paths) });
    assert.equal(result.status, "succeeded", lines.join("\n"));
    const outcome = (p: string) => lines.find((line) => line.startsWith(`${p} => `))?.slice(p.length + 4);
    assert.match(outcome(peerKey) ?? "", /^error:ENOENT$/, lines.join("\n"));
    // Covered by /dev/null: empty, or not openable where the covered mount is nodev.
    assert.match(outcome(configFile) ?? "", /^(read:|error:EACCES)$/, lines.join("\n"));
    assert.match(outcome(dataDir) ?? "", /^dir:(workspaces)?$/, "the data dir is an empty tmpfs (only the task's own workspace path inside)");
    assert.match(outcome(path.join(dataDir, "db")) ?? "", /^error:ENOENT$/);
    assert.match(outcome(home) ?? "", /^(error:ENOENT|dir:)$/, `home ${home}: ${outcome(home)}`);
    assert.equal(outcome(dataset), "read:public dataset", "what the operator did bind is still there");
    assert.ok(!lines.some((line) => line.includes("PEER-KEY-BYTES") || line.includes("CONFIG-PRIVATE-KEY")));
  });

  it("a task cannot reach the node's loopback ports, the host's own addresses or private ranges; it reaches allow-listed ones", async () => {
    const hostAddress = hostIpv4Addresses()[0];
    assert.ok(hostAddress, "the machine has a non-loopback IPv4 address");
    const runtime = runtimeFromConfig(
      { runtime: { sandbox: "bubblewrap", network: true, readOnlyPaths: [path.dirname(NODE)], networkAllow: { loopbackPorts: [allowedPort] } } },
      { dataDir: path.join(dir, "data-net") },
    );
    const isolation = await runtime.verify();
    assert.match(isolation.description, /pasta/);
    const targets = [
      ["node-port", "127.0.0.1", nodePort],
      ["allowed-port", "127.0.0.1", allowedPort],
      ["host-address", hostAddress, publicPort],
      ["metadata", "169.254.169.254", 80],
      ["private-10", "10.1.2.3", 80],
      ["private-192", "192.168.1.1", 80],
    ];
    const { result, lines } = await runTask(runtime, { "probe.mjs": CONNECT_PROBE }, [NODE, "probe.mjs"], { TARGETS: JSON.stringify(targets) });
    assert.equal(result.status, "succeeded", lines.join("\n"));
    const outcome = (label: string) => lines.find((line) => line.startsWith(`${label}=`))?.slice(label.length + 1) ?? "";
    assert.match(outcome("node-port"), /^error:ECONNREFUSED$/, lines.join("\n"));
    assert.equal(outcome("allowed-port"), "answered:allowed-service", lines.join("\n"));
    for (const label of ["host-address", "metadata", "private-10", "private-192"])
      assert.match(outcome(label), /^error:(EACCES|ENETUNREACH|EHOSTUNREACH)$/, `${label}: ${lines.join("\n")}`);
  });

  it("an allow-listed range is reached through the task's own network (pasta), not the host's namespace", async () => {
    const hostAddress = hostIpv4Addresses()[0]!;
    const runtime = runtimeFromConfig(
      { runtime: { sandbox: "bubblewrap", network: true, readOnlyPaths: [path.dirname(NODE)], networkAllow: { networks: [`${hostAddress}/32`] } } },
      { dataDir: path.join(dir, "data-allow") },
    );
    const probe = `${CONNECT_PROBE}\nimport { networkInterfaces } from "node:os";\nconsole.log("ifaces=" + Object.values(networkInterfaces()).flat().map((i) => i.address).filter((a) => a.includes(".")).join(","));`;
    const { result, lines } = await runTask(runtime, { "probe.mjs": probe }, [NODE, "probe.mjs"], {
      TARGETS: JSON.stringify([
        ["host-address", hostAddress, publicPort],
        ["node-port", "127.0.0.1", nodePort],
      ]),
    });
    assert.equal(result.status, "succeeded", lines.join("\n"));
    assert.ok(lines.includes("host-address=answered:all-interfaces"), lines.join("\n"));
    assert.ok(lines.includes("node-port=error:ECONNREFUSED"), lines.join("\n"));
    const ifaces = lines
      .find((line) => line.startsWith("ifaces="))!
      .slice(7)
      .split(",");
    assert.ok(!ifaces.includes(hostAddress), `the task has its own addresses (${ifaces.join(",")}), not the host's`);
  });

  it("no IPv6 at all (issue #33 item 2): host services on `::` and `::1` and the host's ULA are unreachable, IPv4 policy unchanged", async () => {
    const hostAddress = hostIpv4Addresses()[0];
    assert.ok(hostAddress, "the machine has a non-loopback IPv4 address");
    const v6 = await startHostIpv6();
    try {
      const runtime = runtimeFromConfig({ runtime: { sandbox: "bubblewrap", network: true, readOnlyPaths: [path.dirname(NODE)] } }, { dataDir: path.join(dir, "data-v6") });
      const targets = [...ipv6Targets(v6), ["v4-host", hostAddress, v6.anyPort]];
      const probe = `${CONNECT_PROBE}\nimport { networkInterfaces } from "node:os";\nconsole.log("ipv6=" + Object.values(networkInterfaces()).flat().filter((i) => i.family === "IPv6").map((i) => i.address).join(","));`;
      const { result, lines } = await runTask(runtime, { "probe.mjs": probe }, [NODE, "probe.mjs"], { TARGETS: JSON.stringify(targets) });
      assert.equal(result.status, "succeeded", lines.join("\n"));
      // The task's own ::1 is gone too: every IPv6 connect fails before a packet leaves.
      for (const [label] of targets)
        assert.match(lines.find((line) => line.startsWith(`${label}=`)) ?? "", /=error:(EACCES|ENETUNREACH|EHOSTUNREACH|EADDRNOTAVAIL)$/, `${label}: ${lines.join("\n")}`);
      assert.ok(lines.includes("ipv6="), `IPv6 is off in the task's namespace: ${lines.join("\n")}`);
    } finally {
      await v6.close();
    }
  });

  it("binds only the /etc files a task needs (issue #33 item 5): /etc/shadow, SSH host keys and an unlisted root-only file are not there; python3 and output still work", async () => {
    const canary = `/etc/suanli-canary-${process.pid}-${++counter}`;
    const canAddCanary = process.getuid?.() === 0;
    if (canAddCanary) await writeFile(canary, "canary-secret\n", { mode: 0o600 });
    try {
      const runtime = runtimeFromConfig({ runtime: { sandbox: "bubblewrap", network: false } }, { dataDir: path.join(dir, "data-etc") });
      const secrets = ["/etc/shadow", "/etc/gshadow", canary, "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key"];
      const script = [
        ...secrets.map((file) => `if cat ${file} >/dev/null 2>&1; then echo "read ${file}"; else echo "absent ${file}"; fi`),
        'ls /etc/ssh >/dev/null 2>&1 && echo "listed /etc/ssh"',
        "python3 -c 'import json, pwd, ssl; print(\"python=\" + json.dumps(len(pwd.getpwall()) > 0))'",
        "mkdir -p output && echo written > output/result.txt && echo wrote-output",
      ].join("; ");
      const b = await bundle({ "noop.txt": "x" });
      const task = await runtime.prepare({
        taskId: `t${++counter}`,
        spec: parseInput(taskSpecSchema, { bundle: b, command: script }, "task") as TaskSpec,
        devices: [],
        durationMs: 30_000,
      });
      await task.start();
      const result = await task.wait();
      const lines = task.readLogs().lines.map((line) => line.text);
      assert.equal(result.status, "succeeded", lines.join("\n"));
      for (const file of secrets) assert.ok(lines.includes(`absent ${file}`), `${file}: ${lines.join("\n")}`);
      assert.ok(!lines.includes("listed /etc/ssh"), lines.join("\n"));
      assert.ok(!lines.some((line) => line.includes("canary-secret")));
      assert.ok(lines.includes("python=true") && lines.includes("wrote-output"), lines.join("\n"));
      await task.cleanup();
    } finally {
      if (canAddCanary) await rm(canary, { force: true });
    }
  });

  it("with network off a task has only its own loopback: even allow-listed ports are closed", async () => {
    const runtime = runtimeFromConfig(
      { runtime: { sandbox: "bubblewrap", network: false, readOnlyPaths: [path.dirname(NODE)], networkAllow: { loopbackPorts: [allowedPort] } } },
      { dataDir: path.join(dir, "data-off") },
    );
    const { result, lines } = await runTask(runtime, { "probe.mjs": CONNECT_PROBE }, [NODE, "probe.mjs"], {
      TARGETS: JSON.stringify([
        ["allowed-port", "127.0.0.1", allowedPort],
        ["host-address", hostIpv4Addresses()[0], publicPort],
      ]),
    });
    assert.equal(result.status, "succeeded", lines.join("\n"));
    assert.ok(lines.includes("allowed-port=error:ECONNREFUSED"), lines.join("\n"));
    assert.match(
      lines.find((line) => line.startsWith("host-address="))!,
      /=error:(ENETUNREACH|EHOSTUNREACH)$/,
    );
  });

  it("two tenants listen on the same port at once: each task has its own network namespace", async () => {
    const runtime = runtimeFromConfig({ runtime: { sandbox: "bubblewrap", network: true, readOnlyPaths: [path.dirname(NODE)] } }, { dataDir: path.join(dir, "data-two") });
    const server = [
      "import net from 'node:net';",
      "const server = net.createServer((s) => s.end('me')).listen(8000, '127.0.0.1', () => {",
      "  console.log('listening');",
      "  net.connect(8000, '127.0.0.1').on('data', (d) => { console.log('self=' + d); server.close(); });",
      "});",
      "setTimeout(() => {}, 1500);",
    ].join("\n");
    const [a, b] = await Promise.all([runTask(runtime, { "s.mjs": server }, [NODE, "s.mjs"]), runTask(runtime, { "s.mjs": server }, [NODE, "s.mjs"])]);
    for (const run of [a, b]) {
      assert.equal(run.result.status, "succeeded", run.lines.join("\n"));
      assert.ok(run.lines.includes("self=me"), run.lines.join("\n"));
    }
  });

  it("refuses to start with the network on but pasta missing, and ends a task whose network cannot be set up as the provider's error", async () => {
    const missing = runtimeFromConfig(
      { runtime: { sandbox: "bubblewrap", network: true, pastaPath: path.join(dir, "no-pasta-here") } },
      { dataDir: path.join(dir, "data-nopasta") },
    );
    await assert.rejects(missing.verify(), (error: Error) => error.name === "RuntimeUnavailableError" && /passt/.test(error.message));
    // A pasta that fails once tasks run: the sandbox was created, its network was not. Its first call
    // is the provider's start check of the task network (network-probe.ts), which the real pasta
    // passes; a pasta failing there would make the runtime run tasks on loopback only, by design.
    const broken = path.join(dir, "broken-pasta");
    const probed = path.join(dir, "broken-pasta-probed");
    const realPasta = 'for p in /usr/bin/pasta /usr/sbin/pasta /usr/local/bin/pasta; do [ -x "$p" ] && exec "$p" "$@"; done; exit 127';
    await writeFile(broken, `#!/bin/sh\nif [ ! -e '${probed}' ]; then : > '${probed}'; ${realPasta}; fi\necho 'cannot attach' >&2\nexit 3\n`, { mode: 0o755 });
    const runtime = runtimeFromConfig(
      { runtime: { sandbox: "bubblewrap", network: true, pastaPath: broken, readOnlyPaths: [path.dirname(NODE)] } },
      { dataDir: path.join(dir, "data-broken") },
    );
    const { result, lines } = await runTask(runtime, { "x.mjs": "console.log('ran')" }, [NODE, "x.mjs"]);
    assert.equal(result.status, "error", lines.join("\n"));
    assert.equal(result.error?.name, "SandboxNetworkError");
    assert.ok(!lines.includes("ran"), "the command never ran without its network policy");
  });

  it("no pasta outlives its task: a task that exits, one that is stopped, and one a restarted node reaps after a crash", async () => {
    const provider = { runtime: { sandbox: "bubblewrap", network: true, readOnlyPaths: [path.dirname(NODE)] } };
    const dataDir = path.join(dir, "data-pasta");
    const root = path.join(dataDir, "workspaces");
    const runtime = runtimeFromConfig(provider, { dataDir });
    const start = async (script: string) => {
      const b = await bundle({ "t.mjs": script });
      const spec = parseInput(taskSpecSchema, { bundle: b, command: [NODE, "t.mjs"] }, "task") as TaskSpec;
      const taskId = `t${++counter}`;
      const task = await runtime.prepare({ taskId, spec, devices: [], durationMs: 30_000 });
      await task.start();
      const pastas = await pastasUnder(root);
      assert.equal(pastas.length, 1, `one pasta serves the running task ${taskId}`);
      await access(path.join(root, `.${taskId}.pasta.pid`));
      return { task, taskId, pasta: pastas[0]! };
    };
    const gone = async (what: string, taskId: string) => {
      assert.deepEqual(await pastasUnder(root), [], `no pasta survives ${what}`);
      await assert.rejects(access(path.join(root, `.${taskId}.pasta.pid`)), "its pid file is removed");
    };

    // Exits by itself.
    const exits = await start("setTimeout(() => console.log('done'), 300);");
    assert.equal((await exits.task.wait()).status, "succeeded");
    await gone("a task that exited", exits.taskId);
    await exits.task.cleanup();

    // Stopped by the node (a lease ended early).
    const stopped = await start("setTimeout(() => {}, 30_000);");
    assert.equal((await stopped.task.stop(500)).status, "stopped");
    await gone("a stopped task", stopped.taskId);
    await stopped.task.cleanup();

    // The node crashed while the task ran: a restarted node (a fresh runtime on the same data dir)
    // reaps the task, its pasta included.
    const orphan = await start("setTimeout(() => {}, 30_000);");
    const restarted = runtimeFromConfig(provider, { dataDir });
    assert.ok((await restarted.reap(orphan.taskId)) >= 1, "the task's processes were killed");
    await gone("a reaped task", orphan.taskId);
    await orphan.task.wait();
    await orphan.task.cleanup();

    // Nor did any earlier test of this file leave one.
    assert.deepEqual(await pastasUnder(dir), [], "no pasta left by this file's tasks");
  });
});
