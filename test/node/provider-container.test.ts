import assert from "node:assert/strict";
import { chmod, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseInput } from "../../common/validation.js";
import { buildContainerRunArgs, ContainerRuntime, detectContainerEngine } from "../../node/provider/runtime/container-runtime.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";

// No container engine runs on this machine (the Docker client is installed, its daemon is not),
// so the real engine path is exercised where one exists; here, stand-in `docker` executables
// answer `info`/`run`/`stop` so that detection and the task lifecycle run through real processes.
describe("container runtime", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-container-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function script(name: string, body: string): Promise<string> {
    const file = path.join(dir, name);
    await writeFile(file, `#!/bin/sh\n${body}\n`);
    await chmod(file, 0o755);
    return file;
  }

  const spec = (input: unknown) => parseInput(taskSpecSchema, input, "task") as TaskSpec;

  it("builds docker run arguments with GPUs, env, limits, name and mount", () => {
    const args = buildContainerRunArgs({
      engine: "docker",
      name: "suanli-lease-9",
      taskId: "lease-9",
      image: "nvcr.io/nvidia/pytorch:24.03-py3",
      command: ["python", "train.py", "--epochs", "3"],
      workspace: "/var/lib/suanli/workspaces/lease-9",
      devices: ["GPU-295b72d2-e23d-baa4-1b87-88bc3b68fd08", "MIG-c1d3d074-7dc1-5e89-8a5f-6d0b08327092"],
      env: { MODE: "train" },
      envFile: "/var/lib/suanli/workspaces/.lease-9.env",
      limits: { memoryBytes: 8 * 1024 ** 3, processes: 512, fileSizeBytes: 1024 ** 3, openFiles: 4096, cpuSeconds: 7200 },
      network: false,
      stopGraceMs: 10_000,
    });
    const pairs = (flag: string) => args.flatMap((arg, i) => (arg === flag ? [args[i + 1]] : []));
    assert.deepEqual(args.slice(0, 3), ["run", "--rm", "--init"]);
    assert.deepEqual(pairs("--name"), ["suanli-lease-9"]);
    assert.deepEqual(pairs("--gpus"), ['"device=GPU-295b72d2-e23d-baa4-1b87-88bc3b68fd08,MIG-c1d3d074-7dc1-5e89-8a5f-6d0b08327092"']);
    assert.deepEqual(pairs("--network"), ["none"]);
    assert.deepEqual(pairs("--memory"), [String(8 * 1024 ** 3)]);
    assert.deepEqual(pairs("--pids-limit"), ["512"]);
    assert.deepEqual(pairs("--ulimit"), ["cpu=7200:7200", `fsize=${1024 ** 3}:${1024 ** 3}`, "nofile=4096:4096"]);
    assert.deepEqual(pairs("--stop-timeout"), ["10"]);
    assert.deepEqual(pairs("--volume"), ["/var/lib/suanli/workspaces/lease-9:/workspace"]);
    assert.deepEqual(pairs("--env-file"), ["/var/lib/suanli/workspaces/.lease-9.env"]);
    const env = pairs("--env");
    assert.ok(env.includes("MODE=train"));
    assert.ok(env.includes("CUDA_VISIBLE_DEVICES=0,1"));
    assert.ok(env.includes("SUANLI_OUTPUT_DIR=/workspace/output"));
    assert.deepEqual(args.slice(-5), ["nvcr.io/nvidia/pytorch:24.03-py3", "python", "train.py", "--epochs", "3"]);
  });

  it("builds podman run arguments with CDI devices and a shell command", () => {
    const args = buildContainerRunArgs({
      engine: "podman",
      name: "suanli-t",
      taskId: "t",
      image: "docker.io/library/busybox",
      command: "echo hi && sleep 1",
      workspace: "/w/t",
      devices: ["GPU-a", "GPU-b"],
      env: {},
      limits: {},
      network: true,
      stopGraceMs: 500,
    });
    assert.deepEqual(args.flatMap((arg, i) => (arg === "--device" ? [args[i + 1]] : [])), ["nvidia.com/gpu=GPU-a", "nvidia.com/gpu=GPU-b"]);
    assert.ok(!args.includes("--gpus"));
    assert.ok(!args.includes("--network"));
    assert.ok(args.includes("/w/t:/workspace:Z"));
    assert.deepEqual(args.slice(-4), ["docker.io/library/busybox", "/bin/sh", "-c", "echo hi && sleep 1"]);
  });

  it("detects a working engine only when `info` reaches it, and says why not otherwise", async () => {
    const down = await script("docker-down", 'echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2; exit 1');
    const up = await script("docker-up", '[ "$1" = info ] && echo 27.3.1');
    const none = await detectContainerEngine("auto", { docker: down, podman: path.join(dir, "no-podman") });
    assert.equal(none.engine, null);
    assert.equal(none.reasons.length, 2);
    assert.match(none.reasons[0], /^docker: docker info failed \(Cannot connect to the Docker daemon/);
    assert.equal(none.reasons[1], "podman: not installed");
    const found = await detectContainerEngine("docker", { docker: up });
    assert.deepEqual(found.engine, { kind: "docker", path: up, version: "27.3.1" });

    // Whatever this machine has, detection answers with an engine or with reasons, never throws.
    const real = await detectContainerEngine();
    assert.ok(real.engine !== null || real.reasons.length === 2);
  });

  it("refuses to prepare a task without an engine, without an image, or with a multi-line secret", async () => {
    const down = await script("docker-down2", "exit 1");
    const rt = new ContainerRuntime({ workspaceRoot: path.join(dir, "ws"), engine: "docker", enginePaths: { docker: down } });
    await assert.rejects(rt.prepare({ taskId: "a", spec: spec({ image: "busybox", command: "true" }), devices: [], durationMs: 1000 }), { name: "RuntimeUnavailableError" });
    await assert.rejects(rt.prepare({ taskId: "b", spec: spec({ bundle: { url: "http://127.0.0.1:1/b.tgz", sha256: "a".repeat(64) }, command: "true" }), devices: [], durationMs: 1000 }), (error: unknown) => {
      assert.deepEqual((error as { fields: string[] }).fields, ["image"]);
      return true;
    });
    await assert.rejects(
      rt.prepare({ taskId: "c", spec: spec({ image: "busybox", command: "true", env: { KEY: { value: "a\nb", secret: true } } }), devices: [], durationMs: 1000 }),
      (error: unknown) => {
        assert.deepEqual((error as { fields: string[] }).fields, ["env.KEY"]);
        return true;
      },
    );
  });

  it("runs a task through the engine: secrets only in the 0600 env file, logs redacted, env file removed after", async () => {
    // The stand-in engine prints the arguments it was given and the env file it was pointed at.
    const engine = await script(
      "docker-echo",
      [
        'case "$1" in',
        "  info) echo 27.3.1 ;;",
        "  pull) echo ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff ;;",
        "  image) echo 1000 ;;",
        '  run) shift; envfile=""; prev=""',
        '       for a in "$@"; do echo "arg:$a"; [ "$prev" = "--env-file" ] && envfile="$a"; prev="$a"; done',
        '       echo "mode:$(stat -c %a "$envfile")"; cat "$envfile"; exit 0 ;;',
        "  stop) exit 0 ;;",
        "esac",
      ].join("\n"),
    );
    const rt = new ContainerRuntime({ workspaceRoot: path.join(dir, "ws"), engine: "docker", enginePaths: { docker: engine } });
    const secret = "hunter2-very-secret";
    const task = await rt.prepare({
      taskId: "run-1",
      spec: spec({ image: "busybox", command: ["env"], env: { PLAIN: "visible", TOKEN: { value: secret, secret: true } } }),
      devices: ["GPU-a"],
      durationMs: 10_000,
    });
    assert.equal(task.sandboxed, true);
    await task.start();
    const result = await task.wait();
    assert.equal(result.status, "succeeded");
    const texts = task.readLogs().lines.map((line) => line.text);
    assert.ok(texts.includes("arg:PLAIN=visible"), texts.join("\n"));
    assert.ok(texts.includes("arg:--gpus"));
    assert.ok(texts.includes("mode:600"));
    assert.ok(texts.includes("TOKEN=[secret:TOKEN]"), "the env file held the secret; the log shows it redacted");
    assert.ok(!texts.some((text) => text.includes(secret)));
    await assert.rejects(stat(path.join(dir, "ws", ".run-1.env")), { code: "ENOENT" });
    await task.cleanup();
  });

  it("stops a running container, falling back to the process group when `stop` fails", async () => {
    const engine = await script("docker-sleep", ['case "$1" in', "  info) echo 27.3.1 ;;", "  pull) echo ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff ;;", "  image) echo 1000 ;;", "  run) echo started; sleep 30 ;;", "  stop) exit 1 ;;", "esac"].join("\n"));
    const rt = new ContainerRuntime({ workspaceRoot: path.join(dir, "ws"), engine: "docker", enginePaths: { docker: engine }, stopGraceMs: 300 });
    const task = await rt.prepare({ taskId: "run-2", spec: spec({ image: "busybox", command: "sleep 30" }), devices: [], durationMs: 10_000 });
    await task.start();
    const deadline = Date.now() + 5_000;
    while (!task.readLogs().lines.some((line) => line.text === "started") && Date.now() < deadline) await sleep(20);
    const result = await task.stop(300);
    assert.equal(result.status, "stopped");
    assert.equal(task.state, "exited");
  });
});
