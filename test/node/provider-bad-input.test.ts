import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { TASK_NOT_STARTED_EXIT_CODE } from "../../common/protocols/lease.js";
import { startBundleServer, type BundleServer, type ServedBundle } from "../support/bundles.js";
import { runCli } from "../support/cli.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { leaseEvents, TestRenter } from "../support/renter.js";
import { waitFor } from "../support/wait.js";

type Ended = { reason: number; stopAt: number; providerTotal: bigint; refund: bigint };

describe("provider agent: bad input", function () {
  this.timeout(60_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let renter: TestRenter;
  let stranger: TestRenter;
  let machineId: number;
  let good: ServedBundle;

  before(async () => {
    // Blocks carry the wall clock's time (no drift ahead under many transactions): lease times
    // and offer expiries in these tests are a few seconds.
    devnet = await startDevnet({ wallClockBlocks: true });
    bundles = await startBundleServer();
    provider = await startTestProvider(devnet, 1, { provider: { reserve: { holdSeconds: 5 } } });
    renter = await TestRenter.start(devnet, 2);
    stranger = await TestRenter.start(devnet, 3);
    machineId = provider.agent.machines[0]!.machineId;
    good = await bundles.bundle({ "run.sh": "echo started\nsleep 2\necho finished\n" });
  });
  after(async () => {
    await stranger?.close();
    await renter?.close();
    await provider?.close();
    await bundles?.close();
    await devnet?.close();
  });

  /** Opens a lease, sends `spec`, waits for the task to fail with `errorName`, and for the lease to settle. */
  async function failingTask(spec: unknown, errorName: string, duration = 60) {
    const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration });
    const before = await renter.lease(leaseId);
    assert.equal((await renter.sendTask(provider.peer, leaseId, spec)).state, "accepted");
    const status = await renter.waitStatus(provider.peer, leaseId, (s) => s.state === "failed" || s.state === "exceeded", `the task to fail with ${errorName}`);
    assert.equal(status.error?.name, errorName, JSON.stringify(status.error));
    const settled = await renter.waitLease(leaseId, ["Settled"]);
    const events = await leaseEvents(devnet, leaseId);
    const ended = events.find((e) => e.eventName === "LeaseEnded")!.args as unknown as Ended;
    const reported = events.find((e) => e.eventName === "CompletionReported")?.args as { exitCode: number } | undefined;
    return { leaseId, status, settled, ended, reported, deposit: before.deposit };
  }

  it("refuses reservations it cannot honour, saying why", async () => {
    const base = { machineId, units: 1, duration: 60 };
    const reasons = async (reply: Promise<{ accepted: boolean; reason?: string }>) => ((await reply) as { reason?: string }).reason;
    assert.equal(await reasons(renter.reserve(provider.peer, { ...base, units: 3 })), "insufficient-units");
    assert.equal(await reasons(renter.reserve(provider.peer, { ...base, duration: 30 * 86_400 })), "duration-out-of-range");
    assert.equal(await reasons(renter.reserve(provider.peer, { ...base, machineId: machineId + 100 })), "offer-withdrawn");
    assert.equal(await reasons(renter.reserve(provider.peer, { ...base, interruptible: true, bidPerUnitSecond: 50n })), "offer-withdrawn");
    assert.equal(await reasons(renter.reserve(provider.peer, base, { chainId: 1 })), "invalid-request");
    assert.equal(await reasons(renter.reserve(provider.peer, base, { signWith: stranger })), "invalid-request");
    assert.equal(await reasons(renter.reserve(provider.peer, base, { issuedAt: Math.floor(Date.now() / 1000) - 3_600 })), "invalid-request");
    const poor = await TestRenter.start(devnet, 4, 0n);
    try {
      assert.equal(await reasons(poor.reserve(provider.peer, base)), "renter-unfunded");
    } finally {
      await poor.close();
    }
    // Two holds of one unit each take both units: a third is refused.
    const first = await renter.reserve(provider.peer, base);
    const second = await stranger.reserve(provider.peer, base);
    assert.equal(first.accepted && second.accepted, true);
    const third = await renter.reserve(provider.peer, base);
    assert.equal(third.accepted, false);
    assert.equal((third as { availableUnits?: number }).availableUnits, 0);
    const publisher = provider.daemon.offers.publisher!;
    await waitFor("the offer to show the held units", () => publisher.current(machineId)?.capacity.freeUnits === 0);
    // Nobody opened a lease with them: the holds expire and the units are offered again (the
    // offers expire in chain time, which on the devnet runs a few seconds ahead).
    await waitFor("the holds to expire", () => publisher.current(machineId)?.capacity.freeUnits === 2, { timeoutMs: 30_000 });
    assert.equal((await renter.reserve(provider.peer, base)).accepted, true);
  });

  it("a bundle whose sha256 differs: nothing runs, the lease ends at once and the renter gets all but a second or two back", async () => {
    const { status, settled, ended, reported, deposit } = await failingTask(
      { bundle: { url: good.url, sha256: "ab".repeat(32) }, command: "sh run.sh" },
      "BundleDigestMismatchError",
    );
    assert.equal(status.state, "failed");
    assert.match(status.error!.message, /sha256/);
    assert.equal(status.startedAt, null);
    assert.equal(settled.endReason, "Completed");
    assert.equal(reported?.exitCode, TASK_NOT_STARTED_EXIT_CODE);
    // Activation and completion are consecutive blocks: the renter pays for at most a few seconds.
    assert.ok(ended.providerTotal <= 100n * 3n, `paid ${ended.providerTotal}`);
    assert.equal(ended.refund, deposit - ended.providerTotal);
  });

  it("an unreachable bundle URL: a fetch error, the lease ends the same way", async () => {
    const { status, settled, reported, ended, leaseId } = await failingTask(
      { bundle: { url: "http://127.0.0.1:1/nothing.tar.gz", sha256: good.sha256 }, command: "sh run.sh" },
      "BundleFetchError",
    );
    assert.match(status.error!.message, /127\.0\.0\.1:1/);
    assert.equal(settled.endReason, "Completed");
    assert.equal(reported?.exitCode, TASK_NOT_STARTED_EXIT_CODE);
    assert.ok(ended.providerTotal <= 300n);
    const logs = await renter.logs(provider.peer, leaseId, 0);
    assert.equal(logs.done, true);
    assert.match(logs.lines[0]!.text, /BundleFetchError/);
  });

  it("a command that does not exist: refused before the start (argv) or reported with exit code 127 (shell)", async () => {
    const argv = await failingTask({ bundle: good, command: ["./no-such-program", "--flag"] }, "CommandNotFoundError");
    assert.equal(argv.reported?.exitCode, TASK_NOT_STARTED_EXIT_CODE);
    const shell = await failingTask({ bundle: good, command: "no-such-program-either" }, "CommandNotFoundError");
    assert.equal(shell.status.exitCode, 127);
    assert.equal(shell.reported?.exitCode, 127);
    assert.equal(shell.settled.endReason, "Completed");
  });

  it("a task that runs past its lease time is stopped; the renter paid for the whole duration and nothing is refunded", async () => {
    const slow = await bundles.bundle({ "run.sh": "echo starting\nsleep 60\n" });
    const { status, settled, ended, deposit } = await failingTask({ bundle: slow, command: "sh run.sh" }, "TaskExceededError", 3);
    assert.equal(status.state, "exceeded");
    assert.equal(settled.endReason, "Completed");
    assert.equal(ended.providerTotal, deposit);
    assert.equal(ended.refund, 0n);
  });

  it("a config with a wrong field: the command names the key and exits 2", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-config-"));
    try {
      const file = path.join(dir, "provider.json");
      await writeFile(file, JSON.stringify({ chain: { rpcUrl: devnet.rpcUrl }, provider: { inventory: { source: "declared", declard: [] } } }));
      const result = await runCli(["provider", "start", "--config", file]);
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, /provider\.inventory\.declard: unknown key/);
      const flag = await runCli(["provider", "start", "--config", file, "--provider.grace.taskStopMs", "soon"]);
      assert.equal(flag.code, 2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a task spec, status, log request or cancel signed by anyone but the lease's renter is refused; so is a replayed one", async () => {
    const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 60 });
    const spec = { bundle: good, command: "sh run.sh" };
    await assert.rejects(renter.sendTask(provider.peer, leaseId, spec, { signWith: stranger }), { name: "RenterAuthError" });
    await assert.rejects(renter.status(provider.peer, leaseId, { signWith: stranger }), { name: "RenterAuthError" });
    await assert.rejects(renter.logs(provider.peer, leaseId, 0, { signWith: stranger }), { name: "RenterAuthError" });
    await assert.rejects(renter.cancel(provider.peer, leaseId, { signWith: stranger }), { name: "RenterAuthError" });
    // The stranger's own request about someone else's lease is refused as well.
    await assert.rejects(stranger.sendTask(provider.peer, leaseId, spec), { name: "RenterAuthError" });
    assert.equal((await renter.status(provider.peer, leaseId)).state, "waiting_spec");
    assert.equal(provider.agent.lease(leaseId)?.spec, null);

    // A body that does not match the signed hash, and a replayed authorization.
    const { signLeaseRequest } = await import("../../common/protocols/lease.js");
    const { request } = await import("../../common/p2p/reqresp.js");
    const { TASK_PROTOCOL } = await import("../../common/p2p/protocols.js");
    const { taskAnswerSchema } = await import("../../common/protocols/lease.js");
    const { multiaddr } = await import("@multiformats/multiaddr");
    const auth = await signLeaseRequest(renter.signer(), renter.domain, { leaseId, provider: provider.peer.address, action: "task", body: { spec } });
    const send = (body: unknown) => request(renter.host, multiaddr(provider.peer.addr), TASK_PROTOCOL, body as never, { responseSchema: taskAnswerSchema });
    await assert.rejects(send({ auth, spec: { ...spec, command: "sh -c 'echo tampered'" } }), { name: "RenterAuthError" });
    assert.equal((await send({ auth, spec })).state, "accepted");
    await assert.rejects(send({ auth, spec }), { name: "RenterAuthError" });
    const stale = await signLeaseRequest(renter.signer(), renter.domain, {
      leaseId,
      provider: provider.peer.address,
      action: "status",
      body: {},
      nowSeconds: Math.floor(Date.now() / 1000) - 3_600,
    });
    const { STATUS_PROTOCOL } = await import("../../common/p2p/protocols.js");
    const { taskStatusSchema } = await import("../../common/protocols/lease.js");
    await assert.rejects(request(renter.host, multiaddr(provider.peer.addr), STATUS_PROTOCOL, { auth: stale }, { responseSchema: taskStatusSchema }), { name: "RenterAuthError" });
    await renter.waitStatus(provider.peer, leaseId, (s) => s.state === "succeeded", "the renter's own task to finish");
  });

  it("a renter's cancel stops the task; if the renter does not close the lease, the provider completes it after the grace period", async () => {
    const slow = await bundles.bundle({ "run.sh": "echo working\nsleep 60\n" });
    const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 120 });
    await renter.sendTask(provider.peer, leaseId, { bundle: slow, command: "sh run.sh" });
    await renter.waitStatus(provider.peer, leaseId, (s) => s.state === "running", "the task to run");
    const answer = await renter.cancel(provider.peer, leaseId);
    assert.equal(answer.state, "stopped");
    const settled = await renter.waitLease(leaseId, ["Settled"]);
    assert.equal(settled.endReason, "Completed");
    const ended = (await leaseEvents(devnet, leaseId)).find((e) => e.eventName === "LeaseEnded")!.args as unknown as Ended;
    assert.ok(ended.refund > 0n && ended.providerTotal > 0n);
    assert.equal(ended.providerTotal + ended.refund, 100n * 120n);
  });

  it("a provider whose wallet cannot reach the stake target does not start, and says how much is missing", async () => {
    await assert.rejects(startTestProvider(devnet, 6, {}, { fundTokens: 0n }), (error: Error) => {
      assert.equal(error.name, "StakeMissingError");
      assert.match(error.message, /1000 tUSD needed/);
      assert.match(error.message, /wallet faucet/);
      return true;
    });
  });
});
