/**
 * A provider on a host without a route out (issue #40 item 1: an offline VM, a container with
 * only loopback, a laptop on a plane). pasta cannot attach a task's network there ("No external
 * routable interface for IPv4"); the provider's start check finds that once, says loudly that tasks
 * run on loopback only and why, and its tasks then run instead of every one failing.
 * Real bubblewrap, real pasta, a real network namespace with only `lo` (unshare --net, as root).
 * Containers too: slirp4netns attaches there, so a container task runs, but its network reaches
 * nothing; the container runtime's start check says so (issue #33's loopback-only fallback).
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { silentLogger } from "../../node/log/logger.js";
import { SandboxNetworkError } from "../../node/provider/errors.js";
import { LogBuffer } from "../../node/provider/runtime/logs.js";
import { RunningTask } from "../../node/provider/runtime/runtime.js";
import { Redactor, taskSpecSchema } from "../../node/provider/runtime/task.js";
import { detectBubblewrap, detectNetworkTools } from "../../node/provider/runtime/sandbox.js";
import { hasDefaultRoute, NO_ROUTE_OUT_WARNING, probeTaskNetwork } from "../../node/provider/runtime/network-probe.js";
import { buildBusyboxImage, requireContainerSupport } from "../support/container-images.js";

type Outcome = { isolation: { sandboxed: boolean; description: string; warnings: string[] }; status: string; exitCode: number | null; lines: string[]; hits: number };

/** Runs the fixture in a new network namespace with only `lo` up; `args`: its mode (none: the process runtime). */
function runOffline(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const fixture = path.resolve("test/node/fixtures/offline-task-network.ts");
  const child = spawn("unshare", ["--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", process.execPath, "--import", "tsx", fixture, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
}

describe("provider on a host without a route out (issue #40 item 1)", function () {
  this.timeout(60_000);

  before(async function () {
    assert.equal(process.getuid?.(), 0, "these checks create a network namespace with unshare --net: run as root, as CI does");
    assert.ok((await detectBubblewrap()).available, "bubblewrap is installed (apt-get install bubblewrap)");
    assert.ok("tools" in (await detectNetworkTools()), "pasta, nsenter and ip are installed (apt-get install passt iproute2)");
  });

  it("the start check attaches a task network once: here it works and says it was checked", async () => {
    const tools = await detectNetworkTools();
    assert.ok("tools" in tools);
    assert.equal(await probeTaskNetwork(tools.tools), undefined);
  });

  it("with only lo: the start check says tasks get no network and why, and a task runs to exit 0 instead of failing", async () => {
    const { code, stdout, stderr } = await runOffline();
    assert.equal(code, 0, stderr);
    const outcome = JSON.parse(stdout.trim().split("\n").at(-1)!) as Outcome;
    assert.equal(outcome.isolation.sandboxed, true);
    assert.match(outcome.isolation.description, /NO network for tasks \(loopback only\)/);
    assert.doesNotMatch(outcome.isolation.description, /through pasta/, "it does not claim a network it could not attach");
    assert.equal(outcome.isolation.warnings.length, 1);
    assert.match(outcome.isolation.warnings[0]!, /No external routable interface for IPv4/, "pasta's own reason is in the warning");
    assert.match(outcome.isolation.warnings[0]!, /provider\.runtime\.network false/, "and what the operator can do");
    assert.equal(outcome.status, "succeeded", outcome.lines.join("\n"));
    assert.equal(outcome.exitCode, 0);
    assert.ok(outcome.lines.includes("hello from an offline host"), outcome.lines.join("\n"));
  });

  it("with only lo, containers: the start check warns that the task network reaches nothing; a task runs to exit 0 and reaches its host's loopback server neither directly nor through slirp4netns's gateway", async function () {
    await requireContainerSupport();
    const { code, stdout, stderr } = await runOffline("container", await buildBusyboxImage());
    assert.equal(code, 0, stderr);
    const outcome = JSON.parse(stdout.trim().split("\n").at(-1)!) as Outcome;
    assert.equal(outcome.isolation.sandboxed, true);
    assert.deepEqual(outcome.isolation.warnings, [NO_ROUTE_OUT_WARNING], "one warning, saying there is no route out and what to do");
    assert.equal(outcome.status, "succeeded", outcome.lines.join("\n"));
    assert.equal(outcome.exitCode, 0);
    assert.ok(outcome.lines.includes("hello from an offline host"), outcome.lines.join("\n"));
    // The node's own loopback server: neither the container's 127.0.0.1 nor slirp4netns's gateway reaches it.
    assert.ok(outcome.lines.includes("refused 127.0.0.1") && outcome.lines.includes("refused 10.0.2.2"), outcome.lines.join("\n"));
    assert.equal(outcome.hits, 0);
  });

  it("hasDefaultRoute reads an up IPv4 default route from /proc/net/route", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-routes-"));
    const header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n";
    const table = async (...rows: string[]) => {
      await writeFile(path.join(dir, "route"), header + rows.map((row) => `${row}\n`).join(""));
      return hasDefaultRoute(path.join(dir, "route"));
    };
    try {
      assert.equal(await table("eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0"), true);
      assert.equal(await table("eth0\t0002A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0"), false, "a LAN route only");
      assert.equal(await table("eth0\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\t0\t0\t0"), false, "a default route that is down");
      assert.equal(await table(), false, "only lo");
      assert.equal(await hasDefaultRoute(path.join(dir, "missing")), false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  /** A real task process whose set-up (afterSpawn, where pasta attaches) fails `failures` times. */
  async function taskWithFailingSetup(failures: number) {
    const workspace = await mkdtemp(path.join(tmpdir(), "suanli-setup-"));
    let setups = 0;
    const logs = new LogBuffer();
    const task = new RunningTask({
      launch: {
        taskId: "setup-1",
        spec: taskSpecSchema.parse({ command: "true", bundle: { url: "http://127.0.0.1/x.tar.gz", sha256: "0".repeat(64) } }),
        devices: [],
        durationMs: 30_000,
      },
      workspace,
      launcher: {
        argv: ["sh", "-c", "echo ran"],
        cwd: workspace,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
        afterSpawn: async () => {
          if (++setups <= failures) throw new SandboxNetworkError("loopback: Failed RTM_NEWADDR: No child processes");
        },
      },
      logs,
      redactor: new Redactor(new Map()),
      sandboxed: true,
      limitsApplied: false,
      defaultGraceMs: 500,
      removeWorkspace: () => rm(workspace, { recursive: true, force: true }),
      logger: silentLogger(),
    });
    await task.start();
    const result = await task.wait();
    const lines = logs.read().lines.map((line) => line.text);
    await task.cleanup();
    return { result, setups, lines };
  }

  it("a sandbox set-up that fails once (the bwrap loopback race on a loaded host) is retried once, and the task runs", async () => {
    const { result, setups, lines } = await taskWithFailingSetup(1);
    assert.equal(setups, 2);
    assert.equal(result.status, "succeeded", lines.join("\n"));
    assert.ok(
      lines.some((line) => /could not be set up .*RTM_NEWADDR.*trying once more/.test(line)),
      lines.join("\n"),
    );
  });

  it("a set-up that fails twice is the provider's error, not retried forever", async () => {
    const { result, setups } = await taskWithFailingSetup(5);
    assert.equal(setups, 2);
    assert.equal(result.status, "error");
    assert.equal(result.error?.name, "SandboxNetworkError");
  });
});
