/**
 * Issue #33 item 8: a container task's secrets leave no copy in the engine. Before, they went
 * through `--env-file`: `podman inspect` showed them while the task ran, the OCI spec on disk
 * (`overlay-containers/<id>/userdata/config.json`) held them, and Podman's state database
 * (`libpod/bolt_state.db`) kept the plaintext after the container was removed. Real Podman with
 * runc, the local busybox image; the engine's state directories are searched for a random canary
 * while the task runs and after it is gone.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { execFile } from "node:child_process";
import { chmod, copyFile, lstat, mkdir, mkdtemp, open, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { parseInput } from "../../common/validation.js";
import { ownerId } from "../../node/provider/runtime/container-engine.js";
import { ContainerRuntime, containerName } from "../../node/provider/runtime/container-runtime.js";
import { findSecretsRoot, onRamFilesystem } from "../../node/provider/runtime/container-secrets.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";
import { BUSYBOX_IMAGE, requireContainerSupport } from "../support/container-images.js";
import { waitFor } from "../support/wait.js";

const exec = promisify(execFile);
const spec = (input: unknown) => parseInput(taskSpecSchema, input, "task") as TaskSpec;
const LOCAL_IMAGES = { allowNetworks: ["127.0.0.0/8"] };
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

async function podman(...args: string[]): Promise<string> {
  return (await exec("podman", args, { encoding: "utf8", timeout: 120_000 })).stdout;
}

/** Every regular file under `dir` (links not followed). */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const out: string[] = [];
  for (const entry of entries) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await filesUnder(file)));
    else if (entry.isFile()) out.push(file);
  }
  return out;
}

/** Files under `dirs` whose bytes contain `needle` (read in 1 MiB chunks, overlapping by the needle's length). */
async function filesContaining(dirs: readonly string[], needle: string): Promise<string[]> {
  const bytes = Buffer.from(needle);
  const hits: string[] = [];
  for (const dir of dirs) {
    for (const file of await filesUnder(dir)) {
      const handle = await open(file, "r").catch(() => undefined);
      if (!handle) continue;
      try {
        const chunk = Buffer.alloc(1 << 20);
        let carry = Buffer.alloc(0);
        for (let position = 0; ;) {
          const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
          if (bytesRead === 0) break;
          const window = Buffer.concat([carry, chunk.subarray(0, bytesRead)]);
          if (window.includes(bytes)) {
            hits.push(file);
            break;
          }
          carry = window.subarray(Math.max(0, window.length - bytes.length + 1));
          position += bytesRead;
        }
      } finally {
        await handle.close();
      }
    }
  }
  return hits;
}

describe("container runtime: secrets leave no copy in the engine (issue #33 item 8)", function () {
  this.timeout(240_000);
  let dir: string;
  let root: string;
  let runtime: ContainerRuntime;
  /** The engine's state: its database and the containers' configs (graph root), its run root, the OCI runtime's state. */
  let engineState: string[];
  const made: string[] = [];

  before(async () => {
    await requireContainerSupport();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-secrets-"));
    root = path.join(dir, "workspaces");
    await mkdir(root);
    runtime = new ContainerRuntime({ workspaceRoot: root, engine: "podman", network: false, gpus: false, fetchPolicy: LOCAL_IMAGES, stopGraceMs: 2_000 });
    await runtime.verify();
    const [graphRoot, runRoot] = (await podman("info", "--format", "{{.Store.GraphRoot}}\n{{.Store.RunRoot}}")).trim().split("\n") as [string, string];
    engineState = [path.join(graphRoot, "libpod"), path.join(graphRoot, "overlay-containers"), runRoot, "/run/runc", "/run/libpod"];
    assert.ok((await lstat(path.join(graphRoot, "libpod", "bolt_state.db")).catch(() => undefined))?.isFile(), "Podman keeps its state in bolt_state.db here");
  });
  after(async () => {
    for (const taskId of ["secret-env", "secret-argv", "secret-nosh"]) await podman("rm", "--force", "--time", "0", containerName(taskId)).catch(() => undefined);
    for (const image of made) await podman("rmi", "--force", image).catch(() => undefined);
    // The runtime's (now empty) directory for task secrets on the RAM filesystem.
    const secretsRoot = await findSecretsRoot(ownerId(path.resolve(root)), undefined, { create: false });
    if (secretsRoot) await rm(secretsRoot, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  });

  it("the task has its secrets in its environment (main command and exec) and in /run/secrets; podman inspect and the engine's state hold none, running or removed", async () => {
    const canary = `canary-${randomBytes(12).toString("hex")}`;
    const multi = `first-${randomBytes(8).toString("hex")}\nsecond 'quoted' $(not run) line`;
    const task = await runtime.prepare({
      taskId: "secret-env",
      spec: spec({
        image: BUSYBOX_IMAGE,
        command:
          'printf %s "$TOKEN" | sha256sum; sha256sum < /run/secrets/TOKEN; printf %s "$MULTI" | sha256sum; echo "plain=$PLAIN"; echo ready; while [ ! -e /workspace/go ]; do sleep 0.1; done',
        env: { TOKEN: { value: canary, secret: true }, MULTI: { value: multi, secret: true }, PLAIN: "visible" },
      }),
      devices: [],
      durationMs: 120_000,
    });
    await task.start();
    await waitFor("the task to run", () => task.readLogs().lines.some((line) => line.text === "ready"), { timeoutMs: 60_000 });

    // While it runs: the engine's view of the container and its state hold no secret.
    const inspected = await podman("inspect", containerName("secret-env"));
    assert.ok(inspected.includes("plain") && !inspected.includes(canary) && !inspected.includes("first-"), "podman inspect shows no secret");
    assert.deepEqual(await filesContaining(engineState, canary), [], "no file of the engine's state holds the secret while the task runs");
    // The one copy outside the task is on a RAM filesystem, in the node's own directory.
    const secretsRoot = await findSecretsRoot(ownerId(path.resolve(root)), undefined, { create: false });
    assert.ok(secretsRoot && (await onRamFilesystem(secretsRoot)));
    assert.equal(await readFile(path.join(secretsRoot, "secret-env", "TOKEN"), "utf8"), canary);
    assert.equal(((await lstat(secretsRoot)).mode & 0o777).toString(8), "700", "no other user of the host can reach it");

    // An exec in the running task sees them too, as in the process runtime.
    const launch = task.execLaunch(["sh", "-c", 'printf %s "$TOKEN" | sha256sum']);
    assert.ok(launch);
    const execOut = await new Promise<string>((resolve, reject) => {
      const child = spawn(launch.argv[0]!, launch.argv.slice(1), { cwd: launch.cwd, env: launch.env, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")));
      child.once("error", reject);
      child.once("close", () => resolve(out));
    });
    assert.match(execOut, new RegExp(`^${sha256(canary)}`));

    await writeFile(path.join(task.workspace, "go"), "");
    const result = await task.wait();
    const texts = task.readLogs().lines.map((line) => line.text);
    assert.equal(result.status, "succeeded", texts.join("\n"));
    assert.equal(texts.filter((text) => text.startsWith(sha256(canary))).length, 2, "the env value and the file are the secret, byte for byte");
    assert.ok(
      texts.some((text) => text.startsWith(sha256(multi))),
      "a multi-line secret with quotes and $( ) arrives intact",
    );
    assert.ok(texts.includes("plain=visible"));

    // After: the container, its secrets directory and every trace in the engine's state are gone.
    assert.deepEqual(await podman("ps", "--all", "--filter", `name=^${containerName("secret-env")}$`, "--format", "{{.Names}}").then((out) => out.trim()), "");
    await assert.rejects(lstat(path.join(secretsRoot, "secret-env")), { code: "ENOENT" });
    assert.deepEqual(await filesContaining(engineState, canary), [], "no file of the engine's state holds the secret after the container is removed");
    assert.deepEqual(await filesContaining(engineState, multi.split("\n")[0]!), []);
    await task.cleanup();
  });

  it("an argv command gets its secrets in its environment too", async () => {
    const canary = `argv-${randomBytes(12).toString("hex")}`;
    const task = await runtime.prepare({
      taskId: "secret-argv",
      spec: spec({ image: BUSYBOX_IMAGE, command: ["env"], env: { TOKEN: { value: canary, secret: true } } }),
      devices: [],
      durationMs: 60_000,
    });
    await task.start();
    const result = await task.wait();
    const texts = task.readLogs().lines.map((line) => line.text);
    assert.equal(result.status, "succeeded", texts.join("\n"));
    assert.ok(texts.includes("TOKEN=[secret:TOKEN]"), texts.join("\n"));
    assert.deepEqual(await filesContaining(engineState, canary), []);
    await task.cleanup();
  });

  it("an image without /bin/sh: the argv command runs as it is and finds its secrets in /run/secrets", async () => {
    // A rootfs with busybox at /app/busybox only: no /bin/sh to load the secrets into the environment.
    const rootfs = await mkdtemp(path.join(tmpdir(), "suanli-nosh-"));
    const image = `localhost/suanli-test/nosh:${randomBytes(4).toString("hex")}`;
    try {
      for (const sub of ["app", "tmp", "workspace", "proc", "sys", "dev", "run"]) await mkdir(path.join(rootfs, sub));
      await copyFile("/bin/busybox", path.join(rootfs, "app", "busybox"));
      await chmod(path.join(rootfs, "app", "busybox"), 0o755);
      await exec("sh", ["-c", 'tar -C "$1" -c . | podman import - "$2"', "sh", rootfs, image], { timeout: 120_000 });
      made.push(image);
    } finally {
      await rm(rootfs, { recursive: true, force: true });
    }
    const canary = `nosh-${randomBytes(12).toString("hex")}`;
    const task = await runtime.prepare({
      taskId: "secret-nosh",
      spec: spec({ image, command: ["/app/busybox", "sh", "-c", 'cat /run/secrets/TOKEN; echo; echo "in-env=${TOKEN:-none}"'], env: { TOKEN: { value: canary, secret: true } } }),
      devices: [],
      durationMs: 60_000,
    });
    await task.start();
    const result = await task.wait();
    const lines = task.readLogs().lines;
    const texts = lines.map((line) => line.text);
    assert.equal(result.status, "succeeded", texts.join("\n"));
    assert.ok(texts.includes("[secret:TOKEN]"), texts.join("\n"));
    assert.ok(texts.includes("in-env=none"));
    assert.ok(lines.some((line) => line.stream === "system" && /no \/bin\/sh: the task's secrets are the files in \/run\/secrets/.test(line.text)));
    assert.deepEqual(await filesContaining(engineState, canary), []);
    await task.cleanup();
  });

  it("without a RAM filesystem a task with secrets is refused (the provider's failure): a secret is never written to a disk", async () => {
    const onDisk = path.join(dir, "disk");
    await mkdir(onDisk);
    const noTmpfs = new ContainerRuntime({
      workspaceRoot: path.join(dir, "ws2"),
      engine: "podman",
      network: false,
      gpus: false,
      fetchPolicy: LOCAL_IMAGES,
      secretsBases: [onDisk],
    });
    const isolation = await noTmpfs.verify();
    assert.ok(isolation.warnings.some((warning) => /no RAM filesystem/.test(warning)));
    await assert.rejects(
      noTmpfs.prepare({
        taskId: "secret-disk",
        spec: spec({ image: BUSYBOX_IMAGE, command: "true", env: { TOKEN: { value: "x-secret", secret: true } } }),
        devices: [],
        durationMs: 60_000,
      }),
      (error: Error) => {
        assert.equal(error.name, "RuntimeUnavailableError");
        assert.match(error.message, /no RAM filesystem/);
        return true;
      },
    );
    assert.deepEqual(await readdir(onDisk), []);
  });
});
