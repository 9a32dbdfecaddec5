/**
 * Task inputs in the container runtime (issue 36): the argv mounts each input read-only, and a
 * real Podman container reads its input at the mount and cannot write to it as its root. The
 * input is had through a real DataStore (Helia, level on disk) and InputCache. docs/data.md cites these tests.
 */
import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseInput } from "../../common/validation.js";
import { InputCache } from "../../node/data/inputs.js";
import { DataStore } from "../../node/data/store.js";
import { silentLogger } from "../../node/log/logger.js";
import { startNodeHost, type NodeHost } from "../../node/p2p/start.js";
import { providerInputs, refuseUnmountableInputs } from "../../node/provider/agent/task-inputs.js";
import { buildContainerCreateArgs } from "../../node/provider/runtime/container-args.js";
import { ContainerRuntime } from "../../node/provider/runtime/container-runtime.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";
import { BUSYBOX_IMAGE, requireContainerSupport } from "../support/container-images.js";
import { loopbackP2pOptions } from "../support/nodes.js";

const spec = (input: unknown) => parseInput(taskSpecSchema, input, "task") as TaskSpec;
const CID = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy";

describe("task inputs: refusal and container mounts", function () {
  this.timeout(120_000);
  let dir: string;
  let host: NodeHost;
  let data: DataStore;

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-container-inputs-"));
    host = await startNodeHost({ dataDir: path.join(dir, "node"), options: loopbackP2pOptions(), logger: silentLogger() });
    data = await DataStore.open({ dataDir: path.join(dir, "node"), libp2p: host.host });
  });
  after(async () => {
    await data?.stop();
    await host?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("a provider with its data plane off, or running tasks unsandboxed, refuses a task with inputs (and takes one without)", () => {
    const withInputs = { inputs: [{ cid: CID, mount: "/data/set" }] };
    assert.throws(() => refuseUnmountableInputs(providerInputs(undefined, dir, true), withInputs), { name: "TaskInputsUnavailableError", message: /data\.enabled is false/ });
    assert.throws(() => refuseUnmountableInputs(providerInputs(data, dir, false), withInputs), { name: "TaskInputsUnavailableError", message: /unsandboxed/ });
    refuseUnmountableInputs(providerInputs(undefined, dir, true), {});
    refuseUnmountableInputs(providerInputs(data, dir, true), withInputs);
  });

  it("argv: each input a read-only bind mount at its path (shared SELinux label on Podman)", () => {
    const base = {
      name: "suanli-lease-3",
      taskId: "lease-3",
      owner: "0123456789abcdef",
      image: "busybox",
      command: "true",
      workspace: "/w/lease-3",
      devices: [],
      units: 1,
      env: {},
      limits: {},
      network: false,
      stopGraceMs: 1_000,
    };
    const inputs = [{ hostPath: "/var/lib/suanli/data/inputs/bafy1", mount: "/data/set" }];
    const mounts = (args: string[]) => args.flatMap((arg, i) => (arg === "--mount" ? [args[i + 1]] : []));
    assert.deepEqual(mounts(buildContainerCreateArgs({ ...base, engine: "podman", inputs })), [
      "type=bind,src=/var/lib/suanli/data/inputs/bafy1,dst=/data/set,ro=true,relabel=shared",
    ]);
    assert.deepEqual(mounts(buildContainerCreateArgs({ ...base, engine: "docker", inputs })), ["type=bind,src=/var/lib/suanli/data/inputs/bafy1,dst=/data/set,ro=true"]);
    assert.deepEqual(mounts(buildContainerCreateArgs({ ...base, engine: "podman" })), []);
  });

  it("Podman: the container reads its input at the mount, and its root cannot write to it", async () => {
    await requireContainerSupport();
    const dataset = path.join(dir, "dataset");
    await mkdir(dataset);
    await writeFile(path.join(dataset, "hello.txt"), "hello from the dataset\n");
    const { cid } = await data.add(dataset);
    const prepared = await new InputCache(data, path.join(dir, "node")).prepare(cid, { timeoutMs: 5_000 });
    // Writable on the host: only the read-only mount stands between the container's root and it.
    await chmod(prepared.path, 0o777);
    await chmod(path.join(prepared.path, "hello.txt"), 0o666);
    const runtime = new ContainerRuntime({
      workspaceRoot: path.join(dir, "node", "workspaces"),
      engine: "podman",
      network: false,
      gpus: false,
      fetchPolicy: { allowNetworks: ["127.0.0.0/8"] },
      stopGraceMs: 1_000,
    });
    await runtime.verify();
    const task = await runtime.prepare({
      taskId: "inputs-1",
      spec: spec({
        image: BUSYBOX_IMAGE,
        command: [
          "cat /data/set/hello.txt",
          "echo uid=$(id -u)",
          "if echo x > /data/set/new.txt; then echo WROTE-NEW; else echo NEW-REFUSED; fi",
          "if echo x >> /data/set/hello.txt; then echo WROTE-OLD; else echo OLD-REFUSED; fi",
        ].join("; "),
        inputs: [{ cid, mount: "/data/set" }],
      }),
      devices: [],
      durationMs: 60_000,
      inputs: [{ mount: "/data/set", hostPath: prepared.path }],
    });
    await task.start();
    const lines: string[] = [];
    for await (const line of task.logs()) lines.push(line.text);
    const result = await task.wait();
    await task.cleanup();
    assert.equal(result.status, "succeeded", lines.join("\n"));
    assert.ok(lines.includes("hello from the dataset"), lines.join("\n"));
    assert.ok(lines.includes("uid=0"), "the task runs as the container's root");
    assert.ok(lines.includes("NEW-REFUSED") && lines.includes("OLD-REFUSED"), lines.join("\n"));
    assert.ok(
      lines.some((line) => /Read-only file system/.test(line)),
      lines.join("\n"),
    );
  });
});
