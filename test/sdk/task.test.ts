import assert from "node:assert/strict";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { testTokenAbi } from "../../common/abi.js";
import { readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { createClient, type SuanliClient, type TaskLogLine } from "../../sdk/index.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { fund, startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { waitFor } from "../support/wait.js";

const SECRET = "sdk-secret-never-in-logs";

describe("SDK against a real provider node: submit, logs, wait, cancel, extend", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let client: SuanliClient;
  let stateDir: string | undefined;
  const renter = devnetAccount(5);

  const balance = (who: `0x${string}`) =>
    devnet.admin.publicClient.readContract({ address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "balanceOf", args: [who] });

  before(async () => {
    devnet = await startDevnet({ wallClockBlocks: true });
    bundles = await startBundleServer();
    provider = await startTestProvider(devnet, 1);
    await fund(devnet, await devnet.wallet(5), 100_000_000n);
    stateDir = await mkdtemp(path.join(tmpdir(), "suanli-sdk-state-"));
    client = await createClient({
      rpcUrl: devnet.rpcUrl,
      account: renter,
      bootstrap: [provider.peer.addr],
      deployment: devnet.deploymentsDir,
      stateFile: path.join(stateDir, "tasks-{deployment}.json"),
    });
    await waitFor("the provider's offer in the SDK", async () => (await client.queryOffers()).some((o) => o.freeUnits === 2), { timeoutMs: 20_000 });
  });
  after(async () => {
    await client?.close();
    await provider?.close();
    await bundles?.close();
    await devnet?.close();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  });

  it("runs a task end to end: logs stream, the receipt adds up and the completion report is verified", async () => {
    const bundle = await bundles.bundle({
      "run.sh": ["echo computing", 'echo "secret is $API_TOKEN"', "mkdir -p output", "echo 7 > output/answer", "sleep 1", "echo finished"].join("\n"),
    });
    const before = await balance(renter.address);
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 30,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "sh run.sh",
      env: { API_TOKEN: { value: SECRET, secret: true } },
    });
    assert.equal(submitted.status, "submitted");
    assert.equal(submitted.provider, provider.peer.address);

    const lines: TaskLogLine[] = [];
    for await (const line of client.logs(submitted.taskId)) lines.push(line);
    const text = lines.map((line) => line.text).join("\n");
    assert.match(text, /computing/);
    assert.match(text, /finished/);
    assert.ok(!text.includes(SECRET), "the secret never appears in logs");

    const receipt = await client.wait(submitted.taskId);
    assert.equal(receipt.state, "succeeded");
    assert.equal(receipt.exitCode, 0);
    assert.equal(receipt.completion?.verified, true);
    const [lease] = receipt.leases;
    assert.equal(lease!.endReason, "Completed");
    assert.equal(lease!.cost + lease!.refunded, lease!.deposit, "cost plus refund is the whole deposit");
    assert.equal(lease!.cost, BigInt(lease!.seconds) * 100n, "units × price × metered seconds");
    const gas = lease!.gas.reduce((sum, step) => sum + step.gasUsed, 0n);
    assert.ok(gas > 0n);
    assert.equal(await balance(renter.address), before - lease!.cost, "the renter paid exactly the cost");
  });

  it("a bundle whose sha256 differs is refused before any reservation or transaction (issue #22 item 7)", async () => {
    const bundle = await bundles.bundle({ "run.sh": "echo never" });
    const before = await balance(renter.address);
    const nonce = await devnet.admin.publicClient.getTransactionCount({ address: renter.address });
    await assert.rejects(
      client.submitTask({
        gpuType: "A100",
        gpuCount: 1,
        duration: 30,
        maxPricePerGpuHour: "1",
        attestedOnly: false,
        bundleUrl: bundle.url,
        sha256: "ab".repeat(32),
        command: "sh run.sh",
      }),
      (error: Error & { fields?: string[] }) => {
        assert.equal(error.name, "InvalidInputError");
        assert.deepEqual(error.fields, ["sha256"]);
        assert.ok(error.message.includes(bundle.sha256), "names the digest the bundle really has");
        return true;
      },
    );
    assert.equal(await balance(renter.address), before, "nothing paid");
    assert.equal(await devnet.admin.publicClient.getTransactionCount({ address: renter.address }), nonce, "no transaction sent");
  });

  it("cancel stops the task and closes the lease, refunding what did not accrue", async () => {
    const bundle = await bundles.bundle({ "long.sh": "echo started; sleep 60; echo never" });
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "sh long.sh",
    });
    await waitFor("the task running", async () => (await client.status(submitted.taskId)).state === "running", { timeoutMs: 20_000 });
    const status = await client.status(submitted.taskId);
    assert.equal(status.lease.status, "Active");
    assert.equal(status.image, null, "a bundle task runs in no container image");

    const extended = await client.extend(submitted.taskId, { seconds: 30 });
    assert.equal(extended.extraDeposit, 30n * 100n);
    assert.ok(extended.newEnd >= status.lease.end + 30);

    const receipt = await client.cancel(submitted.taskId);
    const [lease] = receipt.leases;
    assert.equal(lease!.endReason, "RenterClosed");
    assert.ok(lease!.refunded > 0n);
    assert.equal(lease!.cost + lease!.refunded, lease!.deposit);
    const onChain = await readLease(devnet.admin.publicClient, devnet.deployment.contracts.market!, submitted.leaseId);
    assert.equal(onChain.status === "Ended" || onChain.status === "Settled", true);
    await waitFor("the provider stopped the task", async () => ["stopped", "failed"].includes((await client.status(submitted.taskId)).state), { timeoutMs: 20_000 });
  });

  it("keeps its tasks: status and listing know the submitted ones", async () => {
    const tasks = await client.tasks();
    assert.equal(tasks.length, 2);
    assert.ok(
      tasks.every((task) => !JSON.stringify(task.spec.env).includes(SECRET)),
      "stored specs hold no secret values",
    );
  });

  it("a fresh client (as each CLI command is) extends a running task at once, with or without a bootstrap (issue #22 item 3)", async () => {
    const bundle = await bundles.bundle({ "long.sh": "echo started; sleep 60" });
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "sh long.sh",
    });
    await waitFor("the task running", async () => (await client.status(submitted.taskId)).state === "running", { timeoutMs: 20_000 });
    const [file] = await readdir(stateDir!);
    assert.match(file!, /^tasks-31337-[0-9a-f]{8}-[0-9a-f]{12}\.json$/, "one task file per deployment");
    const stateFile = path.join(stateDir!, "tasks-{deployment}.json");
    const before = (await client.status(submitted.taskId)).lease.end;

    // Bootstrapped: the offer arrives through the feed's first sync, which extend now awaits.
    const viaBootstrap = await createClient({ rpcUrl: devnet.rpcUrl, account: renter, bootstrap: [provider.peer.addr], deployment: devnet.deploymentsDir, stateFile });
    try {
      const extended = await viaBootstrap.extend(submitted.taskId, { seconds: 30 });
      assert.ok(extended.newEnd >= before + 30);
    } finally {
      await viaBootstrap.close();
    }
    // No bootstrap at all (`suanli extend <taskId>` without --bootstrap): the provider is asked.
    const alone = await createClient({ rpcUrl: devnet.rpcUrl, account: renter, bootstrap: [], deployment: devnet.deploymentsDir, stateFile });
    try {
      const extended = await alone.extend(submitted.taskId, { seconds: 30 });
      assert.ok(extended.newEnd >= before + 60);
      const receipt = await alone.cancel(submitted.taskId);
      const [lease] = receipt.leases;
      assert.equal(lease!.deposit, 120n * 100n + 60n * 100n, "both extensions are in the stored deposit");
      assert.equal(lease!.cost + lease!.refunded, lease!.deposit);
    } finally {
      await alone.close();
    }
  });

  it("cancel succeeds when the provider ends the lease before the renter's close lands", async () => {
    // A JSON-RPC relay that holds the renter's transactions until the provider has ended the
    // lease (after its cancel grace), so the renter's close arrives too late and reverts.
    let leaseId: bigint | undefined;
    let held = 0;
    const relay = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        void (async () => {
          const body = Buffer.concat(chunks).toString("utf8");
          if (leaseId !== undefined && body.includes("eth_sendRawTransaction")) {
            held++;
            await waitFor(
              "the provider to end the lease",
              async () => !["Open", "Active"].includes((await readLease(devnet.admin.publicClient, devnet.deployment.contracts.market!, leaseId!)).status),
              { timeoutMs: 20_000 },
            );
          }
          const upstream = await fetch(devnet.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body });
          res.writeHead(upstream.status, { "content-type": "application/json" }).end(await upstream.text());
        })().catch((error: unknown) => res.writeHead(502).end(String(error)));
      });
    });
    await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
    const late = devnetAccount(6);
    await fund(devnet, await devnet.wallet(6), 100_000_000n);
    const lateClient = await createClient({
      rpcUrl: `http://127.0.0.1:${(relay.address() as AddressInfo).port}`,
      account: late,
      bootstrap: [provider.peer.addr],
      deployment: devnet.deploymentsDir,
    });
    try {
      await waitFor("a free unit", async () => (await lateClient.queryOffers()).some((o) => o.freeUnits >= 1), { timeoutMs: 20_000 });
      const bundle = await bundles.bundle({ "long.sh": "echo started; sleep 60" });
      const before = await balance(late.address);
      const submitted = await lateClient.submitTask({
        gpuType: "A100",
        gpuCount: 1,
        duration: 120,
        maxPricePerGpuHour: "1",
        attestedOnly: false,
        bundleUrl: bundle.url,
        sha256: bundle.sha256,
        command: "sh long.sh",
      });
      await waitFor("the task running", async () => (await lateClient.status(submitted.taskId)).state === "running", { timeoutMs: 20_000 });
      leaseId = submitted.leaseId;

      const receipt = await lateClient.cancel(submitted.taskId);
      assert.ok(held >= 1, "the renter's close was held back");
      const [lease] = receipt.leases;
      assert.equal(lease!.endReason, "Completed", "the provider ended it, with its completion report");
      assert.equal(lease!.cost + lease!.refunded, lease!.deposit);
      assert.equal(await balance(late.address), before - lease!.cost, "refunded all that did not accrue");
    } finally {
      await lateClient.close();
      await new Promise((resolve) => relay.close(resolve));
    }
  });
});
