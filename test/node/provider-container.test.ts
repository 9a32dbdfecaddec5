import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { parseInput } from "../../common/validation.js";
import { digestOutputDir } from "../../common/output-digest.js";
import { buildContainerCreateArgs, networkArgs } from "../../node/provider/runtime/container-args.js";
import { detectContainerEngine, engineErrorLine, hostHardLimits, isCommandError, ownerId } from "../../node/provider/runtime/container-engine.js";
import { ContainerRuntime, containerName } from "../../node/provider/runtime/container-runtime.js";
import { hostIpv4Addresses } from "../../node/provider/runtime/sandbox.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";
import type { Logger } from "../../node/log/logger.js";
import { silentLogger } from "../../node/log/logger.js";
import { BUSYBOX_IMAGE, requireContainerSupport } from "../support/container-images.js";
import { ipv6Targets, startHostIpv6 } from "../support/host-ipv6.js";
import { waitFor } from "../support/wait.js";

const exec = promisify(execFile);
const spec = (input: unknown) => parseInput(taskSpecSchema, input, "task") as TaskSpec;
/** The local test image is named localhost/...: the image policy must allow the loopback registry. */
const LOCAL_IMAGES = { allowNetworks: ["127.0.0.0/8"] };

async function podman(...args: string[]): Promise<string> {
  return (await exec("podman", args, { encoding: "utf8", timeout: 60_000 })).stdout;
}

/** Containers labelled as owned by the runtime at `root`. */
async function owned(root: string): Promise<string[]> {
  const out = await podman("ps", "--all", "--filter", `label=suanli.owner=${ownerId(path.resolve(root))}`, "--format", "{{.Names}}");
  return out.split("\n").filter((line) => line.trim() !== "");
}

/** A logger that keeps its warnings (the OCI runtime fallback is said once). */
function recordingLogger(): Logger & { warnings: string[] } {
  const base = silentLogger();
  const warnings: string[] = [];
  const logger = Object.create(base) as Logger & { warnings: string[] };
  logger.warnings = warnings;
  logger.warn = (message: string) => void warnings.push(message);
  logger.child = () => logger;
  return logger;
}

describe("container runtime: engine flags (argv)", () => {
  const pairs = (args: string[], flag: string) => args.flatMap((arg, i) => (arg === flag ? [args[i + 1]] : []));

  it("Docker: --gpus with GPU and MIG UUIDs, per-unit CPU/memory/pids, clamped ulimits, labels, OCI runtime, operator flags", () => {
    const args = buildContainerCreateArgs({
      engine: "docker",
      name: "suanli-lease-9",
      taskId: "lease-9",
      owner: "0123456789abcdef",
      image: "nvcr.io/nvidia/pytorch:24.03-py3",
      command: ["python", "train.py", "--epochs", "3"],
      workspace: "/var/lib/suanli/workspaces/lease-9",
      devices: ["GPU-295b72d2-e23d-baa4-1b87-88bc3b68fd08", "MIG-c1d3d074-7dc1-5e89-8a5f-6d0b08327092"],
      units: 2,
      env: { MODE: "train" },
      secretsDir: "/dev/shm/suanli-secrets-0123456789abcdef/lease-9",
      limits: { processes: 1000, fileSizeBytes: 1024 ** 3, openFiles: 4096, cpuSeconds: 7200 },
      perUnit: { cpus: 8, memoryBytes: 64 * 1024 ** 3, pids: 2048 },
      network: false,
      stopGraceMs: 10_000,
      ociRuntime: "runc",
      extraArgs: ["--shm-size", "8g"],
    });
    assert.deepEqual(args.slice(0, 2), ["create", "--init"]);
    assert.deepEqual(pairs(args, "--name"), ["suanli-lease-9"]);
    assert.deepEqual(pairs(args, "--label"), ["suanli.owner=0123456789abcdef", "suanli.task=lease-9"]);
    assert.deepEqual(pairs(args, "--runtime"), ["runc"]);
    assert.deepEqual(pairs(args, "--gpus"), ['"device=GPU-295b72d2-e23d-baa4-1b87-88bc3b68fd08,MIG-c1d3d074-7dc1-5e89-8a5f-6d0b08327092"']);
    assert.deepEqual(pairs(args, "--network"), ["none"]);
    assert.deepEqual(pairs(args, "--cpus"), ["16"]);
    assert.deepEqual(pairs(args, "--memory"), [String(128 * 1024 ** 3)]);
    assert.deepEqual(pairs(args, "--pids-limit"), ["4096"]);
    assert.deepEqual(pairs(args, "--ulimit"), ["cpu=7200:7200", `fsize=${1024 ** 3}:${1024 ** 3}`, "nofile=4096:4096", "nproc=1000:1000"]);
    assert.deepEqual(pairs(args, "--stop-timeout"), ["10"]);
    // Secrets: a read-only mount of the task's directory on a RAM filesystem, never --env/--env-file.
    assert.deepEqual(pairs(args, "--volume"), ["/var/lib/suanli/workspaces/lease-9:/workspace", "/dev/shm/suanli-secrets-0123456789abcdef/lease-9:/run/secrets:ro"]);
    assert.deepEqual(pairs(args, "--env-file"), []);
    const env = pairs(args, "--env");
    assert.ok(env.includes("MODE=train"));
    assert.ok(env.includes("CUDA_VISIBLE_DEVICES=0,1"));
    assert.ok(env.includes("SUANLI_OUTPUT_DIR=/workspace/output"));
    // The operator's flags come right before the image; the command after it.
    assert.deepEqual(args.slice(-7), ["--shm-size", "8g", "nvcr.io/nvidia/pytorch:24.03-py3", "python", "train.py", "--epochs", "3"]);
  });

  it("Podman: one CDI device per leased unit (MIG UUIDs too), slirp4netns without the host loopback or IPv6, pids from limits.processes", () => {
    const args = buildContainerCreateArgs({
      engine: "podman",
      name: "suanli-t",
      taskId: "t",
      owner: "o",
      image: "docker.io/library/busybox",
      command: "echo hi && sleep 1",
      workspace: "/w/t",
      devices: ["GPU-a", "MIG-b"],
      units: 2,
      env: {},
      limits: { processes: 512, openFiles: 1024 },
      network: true,
      stopGraceMs: 500,
    });
    assert.deepEqual(pairs(args, "--device"), ["nvidia.com/gpu=GPU-a", "nvidia.com/gpu=MIG-b"]);
    assert.ok(!args.includes("--gpus"));
    assert.ok(!args.includes("--runtime"), "the engine's default runtime when it works");
    assert.deepEqual(pairs(args, "--network"), ["slirp4netns:allow_host_loopback=false,enable_ipv6=false"]);
    assert.deepEqual(pairs(args, "--sysctl"), ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]);
    // Docker's bridge gets the same sysctls (its daemon may hand out IPv6 addresses).
    assert.deepEqual(networkArgs("docker", true), ["--sysctl", "net.ipv6.conf.all.disable_ipv6=1", "--sysctl", "net.ipv6.conf.default.disable_ipv6=1"]);
    assert.deepEqual(pairs(args, "--pids-limit"), ["512"]);
    assert.ok(args.includes("/w/t:/workspace:Z"));
    assert.deepEqual(args.slice(-4), ["docker.io/library/busybox", "/bin/sh", "-c", "echo hi && sleep 1"]);
  });

  it("host limits: the node's hard limits, at most fs.nr_open and kernel.pid_max; engine errors read from the engine's own lines", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-limits-"));
    try {
      await mkdir(path.join(dir, "sys", "fs"), { recursive: true });
      await mkdir(path.join(dir, "sys", "kernel"), { recursive: true });
      await writeFile(
        path.join(dir, "limits"),
        [
          "Limit                     Soft Limit           Hard Limit           Units     ",
          "Max processes             96365                96365                processes ",
          "Max open files            1024                 20000                files     ",
          "",
        ].join("\n"),
      );
      await writeFile(path.join(dir, "sys", "fs", "nr_open"), "1048576\n");
      await writeFile(path.join(dir, "sys", "kernel", "pid_max"), "32768\n");
      assert.deepEqual(await hostHardLimits(path.join(dir, "limits"), path.join(dir, "sys")), { openFiles: 20_000, processes: 32_768 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const output = [
      'time="2026-12-01T16:41:39Z" level=warning msg="something"',
      "Error: runc: runc create failed: unable to start container process: error setting rlimit type 7: operation not permitted: OCI permission denied",
    ].join("\n");
    assert.equal(
      engineErrorLine(output),
      "runc: runc create failed: unable to start container process: error setting rlimit type 7: operation not permitted: OCI permission denied",
    );
    assert.equal(isCommandError(engineErrorLine(output)), undefined, "an rlimit error is the engine's, not a missing command");
    assert.equal(isCommandError('exec: "/x": stat /x: no such file or directory: OCI runtime attempted to invoke a command that was not found'), "not-found");
  });

  it("detects a working engine only when `info` reaches it, and says why not otherwise", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-engine-"));
    try {
      const down = path.join(dir, "docker-down");
      await writeFile(down, '#!/bin/sh\necho "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2; exit 1\n');
      await chmod(down, 0o755);
      const none = await detectContainerEngine("auto", { docker: down, podman: path.join(dir, "no-podman") });
      assert.equal(none.engine, null);
      assert.match(none.reasons[0]!, /^docker: docker info failed \(Cannot connect to the Docker daemon/);
      assert.equal(none.reasons[1], "podman: not installed");
      const real = await detectContainerEngine("podman");
      assert.equal(real.engine?.kind, "podman", real.reasons.join("; "));
      assert.match(real.engine.version, /^\d+\.\d+/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("container runtime: real containers (Podman)", function () {
  this.timeout(120_000);
  let dir: string;
  let root: string;
  let runtime: ContainerRuntime;
  const hard = { openFiles: 0, processes: 0 };

  before(async () => {
    await requireContainerSupport();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-container-"));
    root = path.join(dir, "data", "workspaces");
    const limits = await hostHardLimits();
    hard.openFiles = limits.openFiles ?? 0;
    hard.processes = limits.processes ?? 0;
    // openFiles above the host's hard limit on purpose: the runtime clamps it (Podman would fail).
    runtime = new ContainerRuntime({
      workspaceRoot: root,
      engine: "podman",
      network: false,
      limits: { openFiles: 10_000_000 },
      gpus: false,
      fetchPolicy: LOCAL_IMAGES,
      stopGraceMs: 2_000,
    });
    await runtime.verify();
  });
  after(async () => {
    for (const name of await owned(root).catch(() => [])) await podman("rm", "--force", "--time", "0", name).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  it("runs a task: logs streamed as they come, output files digested, rlimits clamped to the host's, container removed after", async () => {
    const task = await runtime.prepare({
      taskId: "run-1",
      spec: spec({
        image: BUSYBOX_IMAGE,
        command:
          'echo "nofile $(ulimit -n) nproc $(ulimit -u)"; echo one; sleep 1; mkdir -p output/sub; echo result > output/a.txt; echo deep > output/sub/b.txt; echo oops >&2; echo two',
      }),
      devices: [],
      durationMs: 60_000,
    });
    await task.start();
    const seen: string[] = [];
    let sawOneBeforeEnd = false;
    for await (const line of task.logs()) {
      seen.push(`${line.stream}:${line.text}`);
      if (line.text === "one") sawOneBeforeEnd = task.state === "running";
    }
    const result = await task.wait();
    assert.equal(result.status, "succeeded", seen.join("\n"));
    assert.equal(result.exitCode, 0);
    assert.ok(sawOneBeforeEnd, "the first line arrived while the container still ran");
    assert.ok(seen.includes(`stdout:nofile ${hard.openFiles} nproc ${hard.processes}`), seen.join("\n"));
    assert.ok(seen.includes("stderr:oops"));
    assert.equal(result.outputDigestSource, "output-dir");
    assert.equal(result.outputDigest, await digestOutputDir(path.join(task.workspace, "output")));
    assert.equal(await readFile(path.join(task.workspace, "output", "sub", "b.txt"), "utf8"), "deep\n");
    assert.deepEqual(await owned(root), [], "the container is removed once it ended");
    await task.cleanup();
  });

  it("a command exiting non-zero (even 125, the engine's own code) is the renter's result, not an engine failure", async () => {
    for (const code of [3, 125]) {
      const task = await runtime.prepare({ taskId: `exit-${code}`, spec: spec({ image: BUSYBOX_IMAGE, command: `exit ${code}` }), devices: [], durationMs: 60_000 });
      await task.start();
      const result = await task.wait();
      assert.equal(result.status, "failed");
      assert.equal(result.exitCode, code);
      assert.equal(result.error, undefined);
      await task.cleanup();
    }
  });

  it("a command missing from the image is the renter's failure (the container's init says so), never the provider's", async () => {
    const task = await runtime.prepare({ taskId: "missing", spec: spec({ image: BUSYBOX_IMAGE, command: ["/no/such/program"] }), devices: [], durationMs: 60_000 });
    await task.start();
    const result = await task.wait();
    assert.equal(result.status, "failed");
    assert.notEqual(result.exitCode, 0);
    assert.equal(result.error, undefined);
    assert.ok(task.readLogs().lines.some((line) => /failed to exec pid1: No such file or directory/.test(line.text)));
    await task.cleanup();
    assert.deepEqual(await owned(root), []);
  });

  it("an engine that cannot start the container is the provider's ContainerEngineError (unresolvable CDI device; container gone under the client)", async () => {
    const withGpus = new ContainerRuntime({ workspaceRoot: root, engine: "podman", network: false, fetchPolicy: LOCAL_IMAGES });
    await assert.rejects(
      withGpus.prepare({ taskId: "cdi", spec: spec({ image: BUSYBOX_IMAGE, command: "true" }), devices: ["GPU-00000000-0000-0000-0000-000000000000"], durationMs: 60_000 }),
      (error: unknown) => {
        assert.equal((error as Error).name, "ContainerEngineError");
        assert.equal((error as { blame: string }).blame, "provider");
        assert.match((error as Error).message, /unresolvable CDI devices/);
        return true;
      },
    );
    // After prepare, the engine loses the container: `start --attach` fails, never the task's exit.
    const task = await runtime.prepare({ taskId: "gone", spec: spec({ image: BUSYBOX_IMAGE, command: "true" }), devices: [], durationMs: 60_000 });
    await podman("rm", "--force", containerName("gone"));
    await task.start();
    const result = await task.wait();
    assert.equal(result.status, "error");
    assert.equal(result.error?.name, "ContainerEngineError");
    assert.equal(result.error?.blame, "provider");
    await task.cleanup();
  });

  it("stop: SIGTERM reaches the task (its notice), and a container ignoring SIGTERM is killed at the grace deadline", async () => {
    const polite = await runtime.prepare({
      taskId: "polite",
      spec: spec({ image: BUSYBOX_IMAGE, command: 'trap "echo got SIGTERM; exit 0" TERM; echo ready; while true; do sleep 0.1; done' }),
      devices: [],
      durationMs: 60_000,
    });
    await polite.start();
    await waitFor("the polite task to run", () => polite.readLogs().lines.some((line) => line.text === "ready"), { timeoutMs: 30_000 });
    const politeResult = await polite.stop(5_000);
    assert.equal(politeResult.status, "stopped");
    assert.ok(
      polite.readLogs().lines.some((line) => line.text === "got SIGTERM"),
      "the task got its notice",
    );
    await polite.cleanup();

    const stubborn = await runtime.prepare({
      taskId: "stubborn",
      spec: spec({ image: BUSYBOX_IMAGE, command: 'trap "echo ignoring SIGTERM" TERM; echo ready; while true; do sleep 0.1; done' }),
      devices: [],
      durationMs: 60_000,
    });
    await stubborn.start();
    await waitFor("the stubborn task to run", () => stubborn.readLogs().lines.some((line) => line.text === "ready"), { timeoutMs: 30_000 });
    const stoppedAt = Date.now();
    const result = await stubborn.stop(2_000);
    const tookMs = Date.now() - stoppedAt;
    assert.equal(result.status, "stopped");
    assert.equal(result.exitCode, 137, "SIGKILL at the deadline");
    assert.ok(stubborn.readLogs().lines.some((line) => line.text === "ignoring SIGTERM"));
    assert.ok(tookMs >= 1_900, `killed at the deadline, not before (${tookMs} ms)`);
    assert.deepEqual(await owned(root), []);
    await stubborn.cleanup();
  });

  it("sendTerm (a preemption notice begins): SIGTERM alone reaches the task at once; an exit after it is status stopped; one that runs on is stopped later", async () => {
    // Flushes on SIGTERM and exits 0: its result is "stopped", never "succeeded" (the node then records the task preempted).
    const flusher = await runtime.prepare({
      taskId: "flusher",
      spec: spec({ image: BUSYBOX_IMAGE, command: 'trap "echo flushed on SIGTERM; exit 0" TERM; echo ready; while true; do sleep 0.1; done' }),
      devices: [],
      durationMs: 60_000,
    });
    await flusher.start();
    await waitFor("the flushing task to run", () => flusher.readLogs().lines.some((line) => line.text === "ready"), { timeoutMs: 30_000 });
    await flusher.sendTerm();
    await flusher.sendTerm(); // idempotent: one signal
    const flushed = await flusher.wait();
    assert.equal(flushed.status, "stopped");
    assert.equal(flushed.exitCode, 0);
    assert.equal(flusher.readLogs().lines.filter((line) => line.text === "flushed on SIGTERM").length, 1);
    await flusher.sendTerm(); // a no-op once the task exited
    await flusher.cleanup();

    // Notes SIGTERM and runs on: still running after it, then stopped (SIGTERM again, grace, SIGKILL).
    const runner = await runtime.prepare({
      taskId: "runner",
      spec: spec({ image: BUSYBOX_IMAGE, command: 'trap "echo noted SIGTERM" TERM; echo ready; while true; do sleep 0.1; done' }),
      devices: [],
      durationMs: 60_000,
    });
    await runner.start();
    await waitFor("the running-on task to run", () => runner.readLogs().lines.some((line) => line.text === "ready"), { timeoutMs: 30_000 });
    await runner.sendTerm();
    await waitFor("the task to note SIGTERM", () => runner.readLogs().lines.some((line) => line.text === "noted SIGTERM"), { timeoutMs: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(runner.state, "running", "SIGTERM alone: no kill");
    const result = await runner.stop(1_000);
    assert.equal(result.status, "stopped");
    assert.equal(result.exitCode, 137, "SIGKILL after the grace period");
    assert.equal(runner.readLogs().lines.filter((line) => line.text === "noted SIGTERM").length, 2, "one SIGTERM at the notice's start, one at its end");
    await runner.cleanup();
    assert.deepEqual(await owned(root), []);
  });

  it("a container running past its lease time is stopped (SIGTERM, grace, SIGKILL) with status exceeded", async () => {
    const task = await runtime.prepare({ taskId: "overtime", spec: spec({ image: BUSYBOX_IMAGE, command: "echo working; sleep 60" }), devices: [], durationMs: 1_500 });
    await task.start();
    const result = await task.wait();
    assert.equal(result.status, "exceeded");
    assert.ok(result.runMs < 30_000, `stopped at the lease end (${result.runMs} ms)`);
    assert.deepEqual(await owned(root), []);
    await task.cleanup();
  });

  it("cannot read the node's data dir, config or home; no network: the node's 127.0.0.1 port is unreachable", async () => {
    const dataDir = path.join(dir, "data");
    await writeFile(path.join(dataDir, "config.json"), JSON.stringify({ chain: { privateKey: "0xsecretkey" } }));
    const server = await listen("127.0.0.1");
    try {
      const port = (server.address() as { port: number }).port;
      const probe = [
        `cat ${dataDir}/config.json && echo READ-CONFIG`,
        `ls ${dataDir} && echo LISTED-DATADIR`,
        `ls ${process.env.HOME ?? "/root"}/.ssh && echo LISTED-HOME`,
        `printf x | nc -w 2 127.0.0.1 ${port} && echo REACHED-NODE`,
        "echo done",
      ].join("; ");
      const task = await runtime.prepare({ taskId: "snoop", spec: spec({ image: BUSYBOX_IMAGE, command: probe }), devices: [], durationMs: 60_000 });
      await task.start();
      const result = await task.wait();
      const texts = task.readLogs().lines.map((line) => line.text);
      assert.equal(result.status, "succeeded", texts.join("\n"));
      for (const marker of ["READ-CONFIG", "LISTED-DATADIR", "LISTED-HOME", "REACHED-NODE"]) assert.ok(!texts.includes(marker), `${marker}:\n${texts.join("\n")}`);
      assert.ok(!texts.some((text) => text.includes("0xsecretkey")));
      await task.cleanup();
    } finally {
      server.close();
    }
  });

  it("network on: public addresses only; the node's loopback and host ports are unreachable, an allow-listed host address is", async () => {
    const hostAddress = hostIpv4Addresses()[0];
    assert.ok(hostAddress, "the host has a non-loopback IPv4 address");
    const loopback = await listen("127.0.0.1");
    const everywhere = await listen("0.0.0.0");
    const connect = (host: string, port: number, label: string) =>
      `if printf x | nc -w 3 ${host} ${port} >/dev/null 2>&1; then echo "${label} reachable"; else echo "${label} refused"; fi`;
    const command = (loopbackPort: number, hostPort: number) =>
      [connect("127.0.0.1", loopbackPort, "loopback"), connect("10.0.2.2", loopbackPort, "gateway"), connect(hostAddress, hostPort, "host")].join("; ");
    try {
      const lp = (loopback.address() as { port: number }).port;
      const hp = (everywhere.address() as { port: number }).port;
      const closed = new ContainerRuntime({ workspaceRoot: root, engine: "podman", network: true, gpus: false, fetchPolicy: LOCAL_IMAGES });
      const task = await closed.prepare({ taskId: "net-closed", spec: spec({ image: BUSYBOX_IMAGE, command: command(lp, hp) }), devices: [], durationMs: 60_000 });
      await task.start();
      await task.wait();
      const texts = task.readLogs().lines.map((line) => line.text);
      assert.ok(texts.includes("loopback refused") && texts.includes("gateway refused") && texts.includes("host refused"), texts.join("\n"));
      await task.cleanup();

      const allowed = new ContainerRuntime({
        workspaceRoot: root,
        engine: "podman",
        network: true,
        gpus: false,
        fetchPolicy: LOCAL_IMAGES,
        networkAllow: { networks: [`${hostAddress}/32`] },
      });
      const open = await allowed.prepare({ taskId: "net-allowed", spec: spec({ image: BUSYBOX_IMAGE, command: command(lp, hp) }), devices: [], durationMs: 60_000 });
      await open.start();
      await open.wait();
      const openTexts = open.readLogs().lines.map((line) => line.text);
      assert.ok(openTexts.includes("host reachable"), openTexts.join("\n"));
      assert.ok(openTexts.includes("loopback refused") && openTexts.includes("gateway refused"), openTexts.join("\n"));
      await open.cleanup();
    } finally {
      loopback.close();
      everywhere.close();
    }
  });

  it("network on: no IPv6 at all (issue #33 item 2): host services on `::` and `::1` and the host's ULA are unreachable, IPv4 policy unchanged", async () => {
    const hostAddress = hostIpv4Addresses()[0];
    assert.ok(hostAddress, "the host has a non-loopback IPv4 address");
    const v6 = await startHostIpv6();
    try {
      // busybox nc speaks IPv6; "reachable" means the host's service answered.
      const connect = ([label, host, port]: [string, string, number]) =>
        `if nc -w 3 ${host} ${port} </dev/null 2>/dev/null | grep -q host-v6; then echo "${label} reachable"; else echo "${label} refused"; fi`;
      const targets = [...ipv6Targets(v6), ["v4-host", hostAddress, v6.anyPort] as [string, string, number]];
      const command = [...targets.map(connect), "echo ipv6-addresses=$(cat /proc/net/if_inet6 2>/dev/null | wc -l)"].join("; ");
      const networked = new ContainerRuntime({ workspaceRoot: root, engine: "podman", network: true, gpus: false, fetchPolicy: LOCAL_IMAGES });
      const task = await networked.prepare({ taskId: "net-v6", spec: spec({ image: BUSYBOX_IMAGE, command }), devices: [], durationMs: 60_000 });
      await task.start();
      assert.equal((await task.wait()).status, "succeeded");
      const texts = task.readLogs().lines.map((line) => line.text);
      for (const [label] of targets) assert.ok(texts.includes(`${label} refused`), `${label}:\n${texts.join("\n")}`);
      assert.ok(texts.includes("ipv6-addresses=0"), `IPv6 is off in the container's namespace:\n${texts.join("\n")}`);
      await task.cleanup();
    } finally {
      await v6.close();
    }
  });

  it("falls back from an OCI runtime that cannot start containers (crun's hybrid-cgroups error) to runc, saying so once; refuses when none works", async () => {
    const fakeCrun = path.join(dir, "crun");
    await writeFile(fakeCrun, '#!/bin/sh\necho "cgroups in hybrid mode not supported, drop all controllers from cgroupv2" >&2\nexit 1\n');
    await chmod(fakeCrun, 0o755);
    const logger = recordingLogger();
    const fallback = new ContainerRuntime({
      workspaceRoot: path.join(dir, "fallback"),
      engine: "podman",
      network: false,
      gpus: false,
      ociRuntimes: [fakeCrun, "runc"],
      fetchPolicy: LOCAL_IMAGES,
      logger,
    });
    const isolation = await fallback.verify();
    assert.match(isolation.description, /with runc/);
    assert.equal(logger.warnings.filter((line) => /cannot start a container here; using runc/.test(line)).length, 1);
    const task = await fallback.prepare({ taskId: "fb", spec: spec({ image: BUSYBOX_IMAGE, command: "echo via-runc" }), devices: [], durationMs: 60_000 });
    await task.start();
    assert.equal((await task.wait()).status, "succeeded");
    await task.cleanup();

    const broken = new ContainerRuntime({ workspaceRoot: path.join(dir, "broken"), engine: "podman", network: false, gpus: false, ociRuntimes: [fakeCrun] });
    await assert.rejects(broken.verify(), (error: unknown) => {
      assert.equal((error as Error).name, "RuntimeUnavailableError");
      assert.match((error as Error).message, /cgroups in hybrid mode not supported/);
      return true;
    });
    // An unresolvable CDI device in the inventory is found by the self-test at start, not by a renter.
    const badGpu = new ContainerRuntime({ workspaceRoot: path.join(dir, "badgpu"), engine: "podman", network: false, probeDevices: ["GPU-00000000-0000-0000-0000-000000000000"] });
    await assert.rejects(badGpu.verify(), /unresolvable CDI devices/);
  });

  it("after the owner process is SIGKILLed its container runs on; a restarted runtime finds it by label and removes it", async () => {
    const ownerRoot = path.join(dir, "owner");
    await mkdir(ownerRoot, { recursive: true });
    const script = path.join(dir, "owner.mts");
    const runtimeModule = path.resolve("node/provider/runtime/container-runtime.ts");
    await writeFile(
      script,
      [
        `import { ContainerRuntime } from ${JSON.stringify(runtimeModule)};`,
        `const rt = new ContainerRuntime({ workspaceRoot: ${JSON.stringify(ownerRoot)}, engine: "podman", network: false, gpus: false, fetchPolicy: { allowNetworks: ["127.0.0.0/8"] } });`,
        "await rt.verify();",
        `const task = await rt.prepare({ taskId: "orphan-1", spec: { image: ${JSON.stringify(BUSYBOX_IMAGE)}, command: "echo up; sleep 300", env: {} } as never, devices: [], durationMs: 600000 });`,
        "await task.start();",
        "for await (const line of task.logs()) if (line.text === 'up') console.log('RUNNING');",
      ].join("\n"),
    );
    const child = spawn(process.execPath, ["--import", "tsx", script], { stdio: ["ignore", "pipe", "pipe"] });
    const stderr: string[] = [];
    createInterface({ input: child.stderr! }).on("line", (line) => stderr.push(line));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the owner did not start its container:\n${stderr.join("\n")}`)), 60_000);
      createInterface({ input: child.stdout! }).on("line", (line) => {
        if (line === "RUNNING") {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    process.kill(child.pid!, "SIGKILL");
    await exited;
    assert.deepEqual(await owned(ownerRoot), ["suanli-orphan-1"]);
    assert.equal((await podman("inspect", "--format", "{{.State.Status}}", "suanli-orphan-1")).trim(), "running", "the container outlived its owner");

    const logger = recordingLogger();
    const restarted = new ContainerRuntime({ workspaceRoot: ownerRoot, engine: "podman", network: false, gpus: false, logger });
    await restarted.verify();
    assert.deepEqual(await owned(ownerRoot), []);
    assert.ok(logger.warnings.some((line) => /left behind/.test(line)));
  });
});

function listen(host: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => socket.end("hello\n"));
    server.once("error", reject);
    server.listen(0, host, () => resolve(server));
  });
}
