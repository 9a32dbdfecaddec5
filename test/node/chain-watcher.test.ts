import assert from "node:assert/strict";
import { providerRegistryAbi } from "../../common/abi.js";
import { devnetAccount } from "../../common/devnet.js";
import { modelHash } from "../../common/gpu.js";
import { CachedChainView } from "../../common/offers/chain-view.js";
import { RegistryChainView } from "../../node/chain/registry-view.js";
import { ChainWatcher, type ChainEvent } from "../../node/chain/watcher.js";
import { silentLogger, type Logger } from "../../node/log/logger.js";
import { registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";

describe("chain reads and the event watcher (devnet)", function () {
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
    const machine = await view.getMachine(machineId);
    assert.equal(machine?.owner, provider.account.address);
    assert.equal(machine?.model, modelHash("A100-80GB"));
    assert.equal(machine?.units, 4);
    assert.equal(machine?.interconnect, "nvlink");
    assert.equal(await view.getMachine(999), undefined);
    assert.equal(await view.isAttestor(devnetAccount(7).address), true);
    assert.equal(await view.isAttestor(devnetAccount(8).address), false);
    assert.equal(await view.attestationQuorum(), 1);
    assert.equal(await view.isNonceRevoked(provider.account.address, 5n), false);
    await send(provider, { address: devnet.deployment.contracts.registry!, abi: providerRegistryAbi, functionName: "revokeNonce", args: [5n] } as never);
    assert.equal(await view.isNonceRevoked(provider.account.address, 5n), true);
  });

  it("delivers registry events in order and resumes from a cursor; the cache follows them", async () => {
    const seen: ChainEvent[] = [];
    let cursor = 0n;
    const watcher = new ChainWatcher({
      publicClient: devnet.admin.publicClient,
      deployment: devnet.deployment,
      logger: silentLogger(),
      pollIntervalMs: 50,
      onCursor: (next) => {
        cursor = next;
      },
    });
    watcher.handle((event) => {
      seen.push(event);
    });
    await watcher.start();
    const names = seen.map((event) => event.eventName);
    assert.ok(names.includes("ProviderRegistered"));
    assert.ok(names.indexOf("ProviderRegistered") < names.indexOf("MachineAdded"), "chain order is kept");

    const view = new CachedChainView(new RegistryChainView(devnet.admin.publicClient, devnet.deployment.contracts.registry!));
    const provider = await devnet.wallet(1);
    assert.equal((await view.getProvider(provider.account.address))?.registered, true);
    watcher.handle((event) => {
      if (event.eventName === "StakeChanged" || event.eventName === "ProviderDeregistered") view.invalidateProvider(event.args.provider);
    });

    // Unstake everything, remove the machine and deregister: the watcher sees it and the cache drops the record.
    const registry = devnet.deployment.contracts.registry!;
    await send(provider, { address: registry, abi: providerRegistryAbi, functionName: "removeMachine", args: [1] } as never);
    await send(provider, { address: registry, abi: providerRegistryAbi, functionName: "deregister", args: [] } as never);
    await watcher.sync();
    assert.ok(seen.some((event) => event.eventName === "ProviderDeregistered"));
    assert.equal((await view.getProvider(provider.account.address))?.registered, false);
    await watcher.stop();

    // A new watcher from the saved cursor sees only what came after it.
    const later: string[] = [];
    await send(provider, { address: registry, abi: providerRegistryAbi, functionName: "revokeNoncesBelow", args: [10n] } as never);
    const resumed = new ChainWatcher({ publicClient: devnet.admin.publicClient, deployment: devnet.deployment, logger: silentLogger(), fromBlock: cursor });
    resumed.handle((event) => {
      later.push(event.eventName);
    });
    await resumed.start();
    await resumed.stop();
    assert.deepEqual(later, ["OfferNonceFloorRaised"]);
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
    const watcher = new ChainWatcher({ publicClient: devnet.admin.publicClient, deployment: devnet.deployment, logger, confirmations: 1_000 });
    const seen: string[] = [];
    watcher.handle((event) => void seen.push(event.eventName));
    await watcher.start();
    await watcher.sync();
    await watcher.stop();
    assert.deepEqual(seen, []);
    assert.deepEqual(warnings, []);
  });

  it("with confirmations, delivers an event only once enough blocks bury it", async () => {
    const seen: string[] = [];
    const head = await devnet.admin.publicClient.getBlockNumber();
    const watcher = new ChainWatcher({ publicClient: devnet.admin.publicClient, deployment: devnet.deployment, logger: silentLogger(), fromBlock: head + 1n, confirmations: 2 });
    watcher.handle((event) => {
      seen.push(event.eventName);
    });
    await watcher.start();
    const provider = await devnet.wallet(1);
    const registry = devnet.deployment.contracts.registry!;
    await send(provider, { address: registry, abi: providerRegistryAbi, functionName: "revokeNonce", args: [77n] } as never);
    await watcher.sync();
    assert.deepEqual(seen, [], "no block on top of it yet");
    await devnet.admin.publicClient.request({ method: "hardhat_mine" as never, params: ["0x1"] as never });
    await watcher.sync();
    assert.deepEqual(seen, [], "one block on top of it: one to go");
    await devnet.admin.publicClient.request({ method: "hardhat_mine" as never, params: ["0x1"] as never });
    await watcher.sync();
    assert.deepEqual(seen, ["OfferNonceRevoked"]);
    assert.equal(watcher.head, (await devnet.admin.publicClient.getBlockNumber()) - 2n);
    await watcher.stop();
  });
});
