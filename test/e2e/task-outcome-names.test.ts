/**
 * The renter sees how a task ended by name (issue #34, "Show"): a task whose liveness heartbeat
 * stopped is ended by its provider as the renter's side; the SDK's receipt names it
 * (`error.name` TaskSilentError) and marks the lease an early completion (the provider's report
 * alone, the unused deposit refunded), and the CLI's `wait` and `tasks` say the same in words.
 */
import assert from "node:assert/strict";
import { runCli } from "../support/cli.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";

/** Writes the liveness nonce once, then hangs. */
const HANGS = ['printf %s "$SUANLI_LIVENESS_NONCE" > "$SUANLI_LIVENESS_FILE"', "exec sleep 600", ""].join("\n");

describe("task outcomes by name: a silent task's receipt and the CLI", function () {
  this.timeout(150_000);
  let market: RenterMarket;

  before(async () => {
    market = await startRenterMarket({ name: "outcome-names", provider: { provider: { runtime: { sandbox: "bubblewrap", network: false } } } });
  });
  after(async () => market?.close());

  it("a task that went silent: TaskSilentError in the receipt, an early completion, the rest refunded; wait and tasks say so", async () => {
    const { client, bundles, devnet, provider, work } = market;
    const bundle = await bundles.bundle({ "run.sh": HANGS });
    const { taskId } = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 300,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "sh run.sh",
      taskLiveness: { silenceSeconds: 5 },
    });
    const receipt = await client.wait(taskId);
    assert.equal(receipt.state, "failed");
    assert.equal(receipt.error?.name, "TaskSilentError", JSON.stringify(receipt.error));
    const lease = receipt.leases[0]!;
    assert.equal(lease.endReason, "Completed");
    assert.equal(lease.earlyCompletion, true);
    assert.ok(lease.refunded > 0n && lease.seconds < 120, `ran ${lease.seconds} s, refunded ${lease.refunded}`);
    assert.equal(lease.credit, 0n, "no SLA credit: the renter's own task went silent");

    const base = ["--rpc-url", devnet.rpcUrl, "--deployments", devnet.deploymentsDir, "--bootstrap", provider.peer.addr, "--state-dir", work, "--devnet-account", "5"];
    // The CLI keeps its own task file: it knows the task once it submitted it, so submit a second one by the CLI.
    const submitted = await runCli([
      "submit",
      "--gpu",
      "A100",
      "--count",
      "1",
      "--duration",
      "300",
      "--max-price",
      "1",
      "--allow-unattested",
      "--bundle",
      bundle.url,
      "--sha256",
      bundle.sha256,
      "--liveness",
      "5",
      ...base,
      "--",
      "sh run.sh",
    ]);
    assert.equal(submitted.code, 0, submitted.stderr);
    const cliTask = /Task (task-\S+) submitted/.exec(submitted.stdout)?.[1];
    assert.ok(cliTask, submitted.stdout);
    const waited = await runCli(["wait", cliTask, ...base], { timeoutMs: 120_000 });
    assert.equal(waited.code, 5, "a failed task exits 5");
    assert.match(waited.stdout, /why: TaskSilentError: The task wrote no liveness heartbeat for over 5 s/);
    assert.match(waited.stdout, /ended Completed early \(by the provider alone, not co-signed/);
    const tasks = await runCli(["tasks", ...base]);
    assert.match(tasks.stdout, new RegExp(`${cliTask} +failed +\\(TaskSilentError\\)`));
  });
});
