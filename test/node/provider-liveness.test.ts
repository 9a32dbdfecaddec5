/**
 * Task liveness on the provider's side (issue #34, finding 2): a renter that asked for it gets a
 * hung task stopped. A real provider node (devnet chain, libp2p on 127.0.0.1, level, bubblewrap)
 * runs a task that wrote its nonce once and then went silent: once its allowance is over the node
 * stops it and completes the lease as the renter's (TaskSilentError; paid until then, the rest of
 * the deposit refunded, no fault, no credit). A task that keeps its heartbeat runs to its end.
 */
import assert from "node:assert/strict";
import { readLease } from "../../common/chain/market.js";
import { stringifyTagged } from "../../common/json.js";
import { taskSpecSchema } from "../../common/protocols/task-spec.js";
import { detectBubblewrap } from "../../node/provider/runtime/sandbox.js";
import { parseSubmitParameters } from "../../sdk/actions/submitTask.js";
import { startBundleServer, type BundleServer, type ServedBundle } from "../support/bundles.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { TestRenter } from "../support/renter.js";
import { waitFor } from "../support/wait.js";

const show = (value: unknown) => stringifyTagged(value);
const NONCE = "ab".repeat(32);
const DURATION_SECONDS = 120;

/** Writes the nonce once, then hangs (a deadlocked training loop). */
const HANGS = ['printf %s "$SUANLI_LIVENESS_NONCE" > "$SUANLI_LIVENESS_FILE"', "echo heartbeat-once", "exec sleep 600", ""].join("\n");
/** Rewrites the nonce every second for 9 s (past a 5 s allowance), then exits 0. */
const BEATS = ['i=0; while [ $i -lt 9 ]; do printf %s "$SUANLI_LIVENESS_NONCE" > "$SUANLI_LIVENESS_FILE"; i=$((i + 1)); sleep 1; done', "echo done", ""].join("\n");

describe("provider: a task silent past its liveness allowance ends as the renter's (issue #34, finding 2)", function () {
  this.timeout(150_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let renter: TestRenter;
  let machineId: number;
  let hangs: ServedBundle;
  let beats: ServedBundle;

  before(async () => {
    assert.equal((await detectBubblewrap()).available, true, "CI installs bubblewrap (.ci/run)");
    devnet = await startDevnet({ wallClockBlocks: true });
    bundles = await startBundleServer();
    provider = await startTestProvider(devnet, 1, { provider: { reserve: { holdSeconds: 5 }, runtime: { sandbox: "bubblewrap", network: false } } });
    renter = await TestRenter.start(devnet, 2);
    machineId = provider.agent.machines[0]!.machineId;
    hangs = await bundles.bundle({ "run.sh": HANGS });
    beats = await bundles.bundle({ "run.sh": BEATS });
  });
  after(async () => {
    await renter?.close();
    await provider?.close();
    await bundles?.close();
    await devnet?.close();
  });

  async function run(spec: unknown) {
    const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: DURATION_SECONDS });
    assert.equal((await renter.sendTask(provider.peer, leaseId, spec)).state, "accepted");
    const status = await renter.waitStatus(provider.peer, leaseId, (s) => ["succeeded", "failed", "exceeded"].includes(s.state), "the task to end", 60_000);
    const lines = (await renter.allLogs(provider.peer, leaseId)).map((line) => line.text);
    const market = devnet.deployment.contracts.market!;
    await waitFor("the lease to end on chain", async () => !["Open", "Active"].includes((await readLease(devnet.admin.publicClient, market, leaseId)).status), {
      timeoutMs: 60_000,
    });
    return { leaseId, status, lines, lease: await readLease(devnet.admin.publicClient, market, leaseId) };
  }

  it("the SDK and the spec carry the allowance, bounded to 5 s .. a day", () => {
    const base = { gpuType: "A100", gpuCount: 1, duration: 600, maxPricePerGpuHour: "5", image: "busybox:1.36", command: "true" };
    assert.equal(parseSubmitParameters({ ...base, taskLiveness: { silenceSeconds: 30 } }).spec.taskLiveness?.silenceSeconds, 30);
    assert.equal(parseSubmitParameters({ ...base, taskLiveness: true }).spec.taskLiveness?.silenceSeconds, undefined, "true: the default (120 s)");
    assert.throws(() => parseSubmitParameters({ ...base, taskLiveness: { silenceSeconds: 2 } }), /at least 5 seconds/);
    const spec = parseSubmitParameters(base).spec;
    assert.equal(taskSpecSchema.safeParse({ ...spec, taskLiveness: { nonce: NONCE, silenceSeconds: 86_401 } }).success, false);
    assert.equal(taskSpecSchema.safeParse({ ...spec, taskLiveness: { nonce: NONCE, silenceSeconds: 1.5 } }).success, false);
  });

  it("a task that wrote its nonce once and hung is stopped after its allowance; the lease is completed early, the rest refunded, no fault", async () => {
    const started = Date.now();
    const { status, lines, lease } = await run({ bundle: hangs, command: "sh run.sh", taskLiveness: { nonce: NONCE, silenceSeconds: 5 } });
    const tookMs = Date.now() - started;
    assert.equal(status.state, "failed", `${show(status)}\n${lines.join("\n")}`);
    assert.equal(status.error?.name, "TaskSilentError", show(status.error));
    assert.match(status.error?.message ?? "", /no liveness heartbeat for over 5 s/);
    assert.ok(lines.includes("heartbeat-once"), lines.join("\n"));
    // Ended by the provider's completion (the renter's side), long before the lease's two minutes.
    assert.equal(lease.endReason, "Completed", show(lease));
    assert.ok(tookMs < (DURATION_SECONDS - 30) * 1000, `ended after ${tookMs} ms`);
    const ran = lease.stopAt - lease.activatedAt;
    assert.ok(ran >= 5 && ran < DURATION_SECONDS - 30, `metered ${ran} s: at least the allowance, far less than the lease`);
    // Paid for what ran; the unused deposit went back to the renter (the lease's deposit is now the provider's total).
    assert.equal(lease.deposit, lease.pricePerUnitSecond * BigInt(ran) * BigInt(lease.units), show(lease));
  });

  it("a task that keeps its heartbeat past the allowance runs to its end and succeeds", async () => {
    const { status, lines, lease } = await run({ bundle: beats, command: "sh run.sh", taskLiveness: { nonce: NONCE, silenceSeconds: 5 } });
    assert.equal(status.state, "succeeded", `${show(status)}\n${lines.join("\n")}`);
    assert.ok(lines.includes("done"), lines.join("\n"));
    assert.equal(lease.endReason, "Completed");
  });
});
