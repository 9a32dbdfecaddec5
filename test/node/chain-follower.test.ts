import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { providerRegistryAbi } from "../../common/abi.js";
import { devnetAccount } from "../../common/devnet.js";
import { modelHash } from "../../common/gpu.js";
import { CachedChainView } from "../../common/offers/chain-view.js";
import { RegistryChainView } from "../../common/chain/registry-view.js";
import { ChainFollower, type ChainEvent } from "../../node/chain/follower.js";
import { silentLogger, type Logger } from "../../node/log/logger.js";
import { Store } from "../../node/store/store.js";
import { registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";

describe("chain reads and the chain follower (devnet)", function () {
  this.timeout(60_000);
  let devnet: Devnet;
  before(async () => {
    devnet = await startDevnet({ attestors: [devnetAccount(7).address] });
  });
  after(async () => devnet?.close());

  it("reads providers, machines, attestors and nonces from the registry", async () => {
    const provider = await devnet.wallet(1);
    const [machineId] = await registerProvider(devnet, provider, {
      peerId: "12D3KooWProviderOne",
      stake: 5_000_000n,
      machines: [{ model: "A100-80GB", units: 4, vramMiB: 81_920, region: "eu-west" }],
    });
    const view = new RegistryChainView(devnet.admin.publicClient, devnet.deployment.contracts.registry!);
    const record = await view.getProvider(provider.account.address);
    assert.deepEqual(record, { registered: true, peerId: "12D3KooWProviderOne", freeStake: 5_000_000n });
    assert.equal(await view.getProvider(devnetAccount(9).address), undefined);
    const machine = await view.getMachine(machineId!);
    assert.equal(machine?.owner, provider.account.address);
    assert.equal(machine?.model, modelHash("A100-80GB"));
    assert.equal(machine?.units, 4);
    assert.equal(machine?.interconnect, "nvlink");
    assert.equal(await view.getMachine(999), undefined);
    assert.equal(await view.isAttestor(devnetAccount(7).address), true);
    assert.equal(await view.isAttestor(devnetAccount(8).address), false);
    assert.equal(await view.attestationQuorum(), 1);
    assert.equal(await view.isNonceRevoked(provider.account.address, 5n), false);
    await send(provider, { address: devnet.deployment.contracts.registry!, abi: providerRegistryAbi, functionName: "revokeNonce", args: [5n] });
    assert.equal(await view.isNonceRevoked(provider.account.address, 5n), true);
  });

  it("delivers registry events in order and resumes from its stored cursor; the cache follows them", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-follower-"));
    const store = await Store.open(dir);
    try {
      const seen: ChainEvent[] = [];
      const follower = new ChainFollower({ publicClient: devnet.admin.publicClient, deployment: devnet.deployment, store, logger: silentLogger(), pollIntervalMs: 50 });
      await follower.subscribe("all", (event) => {
        seen.push(event);
      });
      await follower.start();
      const names = seen.map((event) => event.eventName);
      assert.ok(names.includes("ProviderRegistered"));
      assert.ok(names.indexOf("ProviderRegistered") < names.indexOf("MachineAdded"), "chain order is kept");

      const view = new CachedChainView(new RegistryChainView(devnet.admin.publicClient, devnet.deployment.contracts.registry!));
      const provider = await devnet.wallet(1);
      assert.equal((await view.getProvider(provider.account.address))?.registered, true);
      await follower.subscribe(
        "cache",
        (event) => {
          if (event.eventName === "StakeChanged" || event.eventName === "ProviderDeregistered") view.invalidateProvider(event.args.provider);
        },
        { from: "head", persist: false },
      );

      // Unstake everything, remove the machine and deregister: the follower sees it and the cache drops the record.
      const registry = devnet.deployment.contracts.registry!;
      await send(provider, { address: registry, abi: providerRegistryAbi, functionName: "removeMachine", args: [1] });
      await send(provider, { address: registry, abi: providerRegistryAbi, functionName: "deregister", args: [] });
      await follower.sync();
      assert.ok(seen.some((event) => event.eventName === "ProviderDeregistered"));
      assert.equal((await view.getProvider(provider.account.address))?.registered, false);
      await follower.stop();

      // A new follower over the same store resumes the subscriber where it stopped: it sees only what came after.
      const later: string[] = [];
      await send(provider, { address: registry, abi: providerRegistryAbi, functionName: "revokeNoncesBelow", args: [10n] });
      const resumed = new ChainFollower({ publicClient: devnet.admin.publicClient, deployment: devnet.deployment, store, logger: silentLogger() });
      await resumed.subscribe("all", (event) => {
        later.push(event.eventName);
      });
      await resumed.start();
      await resumed.stop();
      assert.deepEqual(later, ["OfferNonceFloorRaised"]);
    } finally {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("does not lose an event whose handler throws: it is delivered again after a backoff, while other subscribers go on", async () => {
    const provider = await devnet.wallet(2);
    const registry = devnet.deployment.contracts.registry!;
    const follower = new ChainFollower({
      publicClient: devnet.admin.publicClient,
      deployment: devnet.deployment,
      logger: silentLogger(),
      pollIntervalMs: 20,
      retry: { initialMs: 50, maxMs: 200 },
    });
    const flaky: bigint[] = [];
    const steady: bigint[] = [];
    let failuresLeft = 2;
    let redelivered!: () => void;
    const done = new Promise<void>((resolve) => {
      redelivered = resolve;
    });
    const flakySubscription = await follower.subscribe(
      "flaky",
      (event) => {
        if (event.eventName !== "OfferNonceRevoked") return;
        if (failuresLeft > 0) {
          failuresLeft--;
          throw new Error("handler failed");
        }
        flaky.push(event.args.nonce);
        if (event.args.nonce === 32n) redelivered();
      },
      { from: "head" },
    );
    const steadySubscription = await follower.subscribe(
      "steady",
      (event) => {
        if (event.eventName === "OfferNonceRevoked") steady.push(event.args.nonce);
      },
      { from: "head" },
    );
    await follower.sync();
    await send(provider, { address: registry, abi: providerRegistryAbi, functionName: "revokeNonce", args: [31n] });
    await send(provider, { address: registry, abi: providerRegistryAbi, functionName: "revokeNonce", args: [32n] });
    await follower.sync();
    assert.deepEqual(steady, [31n, 32n], "the other subscriber is not held up");
    assert.deepEqual(flaky, []);
    assert.equal(flakySubscription.failures, 1);
    assert.equal(flakySubscription.lastError?.message, "handler failed");
    assert.ok(flakySubscription.cursor.block < steadySubscription.cursor.block, "the failing subscriber's cursor stays on the failed event");
    // The follower retries on its own, after the backoff: the second try fails too, the third gets through.
    await follower.start();
    await done;
    await follower.stop();
    assert.deepEqual(flaky, [31n, 32n], "every event arrives once it is handled, in order");
    assert.equal(failuresLeft, 0);
    assert.equal(flakySubscription.failures, 0);
    assert.equal(flakySubscription.lastError, undefined);
  });

  it("after a restart resumes each subscriber from its own cursor", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-follower-"));
    const store = await Store.open(dir);
    const provider = await devnet.wallet(2);
    const registry = devnet.deployment.contracts.registry!;
    const revoke = (nonce: bigint) => send(provider, { address: registry, abi: providerRegistryAbi, functionName: "revokeNonce", args: [nonce] });
    const nonces = (into: bigint[]) => (event: ChainEvent) => {
      if (event.eventName === "OfferNonceRevoked") into.push(event.args.nonce);
    };
    try {
      // First run: "ahead" handles everything; "behind" fails from nonce 42 on (and waits an hour to retry).
      const first = new ChainFollower({ publicClient: devnet.admin.publicClient, deployment: devnet.deployment, store, logger: silentLogger(), retry: { initialMs: 3_600_000 } });
      const ahead: bigint[] = [];
      const behind: bigint[] = [];
      await first.subscribe("ahead", nonces(ahead), { from: "head" });
      await first.subscribe(
        "behind",
        (event) => {
          if (event.eventName === "OfferNonceRevoked" && event.args.nonce === 42n) throw new Error("not now");
          nonces(behind)(event);
        },
        { from: "head" },
      );
      await first.start();
      await revoke(41n);
      await revoke(42n);
      await revoke(43n);
      await first.sync();
      await first.stop();
      assert.deepEqual(ahead, [41n, 42n, 43n]);
      assert.deepEqual(behind, [41n]);

      // While the node is down, one more event.
      await revoke(44n);

      // Second run over the same store: "from: head" is ignored, each stored cursor wins.
      const second = new ChainFollower({ publicClient: devnet.admin.publicClient, deployment: devnet.deployment, store, logger: silentLogger() });
      const aheadAgain: bigint[] = [];
      const behindAgain: bigint[] = [];
      await second.subscribe("ahead", nonces(aheadAgain), { from: "head" });
      await second.subscribe("behind", nonces(behindAgain), { from: "head" });
      const fresh: bigint[] = [];
      await second.subscribe("fresh", nonces(fresh), { from: "head" });
      await second.start();
      await second.stop();
      assert.deepEqual(aheadAgain, [44n], "resumes after what it handled");
      assert.deepEqual(behindAgain, [42n, 43n, 44n], "resumes at the event that failed");
      assert.deepEqual(fresh, [], "a new subscriber starts where it asked");
    } finally {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("on a chain younger than its confirmations, waits without a failing poll", async () => {
    const warnings: string[] = [];
    const logger: Logger = {
      level: "warn",
      trace: () => undefined,
      debug: () => undefined,
      info: () => undefined,
      warn: (message) => void warnings.push(message),
      error: (message) => void warnings.push(message),
      child: () => logger,
    };
    const follower = new ChainFollower({ publicClient: devnet.admin.publicClient, deployment: devnet.deployment, logger, confirmations: 1_000 });
    const seen: string[] = [];
    await follower.subscribe("all", (event) => void seen.push(event.eventName));
    await follower.start();
    await follower.sync();
    await follower.stop();
    assert.deepEqual(seen, []);
    assert.deepEqual(warnings, []);
  });

  it("with confirmations, delivers an event only once enough blocks bury it", async () => {
    const seen: string[] = [];
    const follower = new ChainFollower({ publicClient: devnet.admin.publicClient, deployment: devnet.deployment, logger: silentLogger(), confirmations: 2 });
    const head = await devnet.admin.publicClient.getBlockNumber();
    await follower.subscribe(
      "all",
      (event) => {
        seen.push(event.eventName);
      },
      { from: head + 1n },
    );
    await follower.start();
    const provider = await devnet.wallet(1);
    const registry = devnet.deployment.contracts.registry!;
    await send(provider, { address: registry, abi: providerRegistryAbi, functionName: "revokeNonce", args: [77n] });
    await follower.sync();
    assert.deepEqual(seen, [], "no block on top of it yet");
    await devnet.admin.publicClient.request({ method: "hardhat_mine" as never, params: ["0x1"] as never });
    await follower.sync();
    assert.deepEqual(seen, [], "one block on top of it: one to go");
    await devnet.admin.publicClient.request({ method: "hardhat_mine" as never, params: ["0x1"] as never });
    await follower.sync();
    assert.deepEqual(seen, ["OfferNonceRevoked"]);
    assert.equal(follower.head, (await devnet.admin.publicClient.getBlockNumber()) - 2n);
    await follower.stop();
  });
});
