/**
 * The provider agent: the role `npx suanli provider start` adds to a node. It puts the provider's
 * parts together on top of the daemon (store, chain, libp2p host, offer publisher):
 *
 * - setup on-chain from the inventory (register, stake, declare machines): agent/setup.ts;
 * - offers per machine with the free capacity, republished on every change: agent/offers.ts;
 * - the reserve protocol (holds written to level before answering): agent/reserve.ts;
 * - leases from the chain's events, tasks through the runtime, completion reports, the
 *   lease protocols (task, status, logs, cancel) with renter authorization: agent/leases.ts,
 *   agent/protocols.ts, agent/renter-auth.ts;
 * - claims on a schedule with claimMany: agent/claims.ts; task inputs: agent/task-inputs.ts;
 * - capacity switching between the idle workload, on-demand and interruptible tasks (capacity/).
 *
 * Everything that must survive a crash is in level before the node acts on it; a restart
 * replays the chain from the stored cursor and reconciles every lease (docs/provider.md).
 * @example
 * const daemon = await startDaemon(config, { publishesOffers: true });
 * const agent = await startProviderAgent(daemon); // attaches itself: daemon.stop() stops it first
 */
import path from "node:path";
import { startProviderAttestation } from "./agent/attestation.js";
import type { LocalAccount } from "viem";
import { readMachine } from "../../common/chain/market.js";
import type { SignedAttestation } from "../../common/offers/message.js";
import type { ChainEvent } from "../chain/follower.js";
import type { Daemon } from "../daemon.js";
import { Bucket } from "../store/buckets.js";
import { minBidForModel, priceForModel } from "./options.js";
import { PriceEngine } from "./pricing/engine.js";
import { createIdlePower, withPowerRestore } from "./power/idle-power.js";
import { createCapacityManager, createRuntime, gpuSampler, loadInventory } from "./provider.js";
import { OutputStore } from "./agent/outputs.js";
import { TaskIoService } from "./agent/task-io.js";
import type { RuntimeIsolation } from "./runtime/runtime.js";
import { announcedResources } from "./runtime/host-resources.js";
import { SealingKeyRing } from "./agent/sealing.js";
import { TxSender } from "./agent/chain-tx.js";
import { Claimer } from "./agent/claims.js";
import { LeaseController } from "./agent/leases.js";
import { providerInputs } from "./agent/task-inputs.js";
import { MachineMarket, type ChainCapacity } from "./agent/offers.js";
import { serveLeaseProtocols } from "./agent/protocols.js";
import { LeaseRecords } from "./agent/records.js";
import { RenterRequestVerifier } from "./agent/renter-auth.js";
import { HoldThrottle } from "./agent/hold-throttle.js";
import { ReservationBook } from "./agent/reservations.js";
import { ChainReadCache } from "./agent/reserve.js";
import { declareMachines, ensureRegistration, pricedMachines, type MachineBinding } from "./agent/setup.js";
import { runDetached } from "../../common/detached.js";

import { ProviderAgentError, type ProviderAgent, type ProviderAgentOptions, type ProviderAgentSummary } from "./agent/types.js";

export { ProviderAgentError, type ProviderAgent, type ProviderAgentOptions, type ProviderAgentSummary };

/**
 * Starts the provider role on a daemon started with `publishesOffers: true` and a wallet
 * (chain.privateKey). Throws StakeMissingError, ProviderNotRegisteredError or
 * MachineDeclarationError (with what to do) when the chain side cannot be set up.
 */
export async function startProviderAgent(daemon: Daemon, agentOptions: ProviderAgentOptions = {}): Promise<ProviderAgent> {
  const options = daemon.config.provider;
  const logger = daemon.logger.child({ module: "provider" });
  const publisher = daemon.offers.publisher;
  const walletClient = daemon.chain.walletClient;
  const account = daemon.account as LocalAccount | undefined;
  if (!publisher || !walletClient || !account) {
    throw new ProviderAgentError("The provider agent needs a node that signs offers: start the daemon with publishesOffers and chain.privateKey");
  }
  const { publicClient } = daemon.chain;
  const { metrics, store, deployment } = daemon;
  const address = account.address;
  const peerId = daemon.p2p.host.peerId.toString();
  const cleanups: (() => Promise<void>)[] = [];
  const runCleanups = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch((error: unknown) => logger.warn("Provider agent part failed to stop cleanly", {}, error));
  };

  try {
    const inventory = await loadInventory(options, agentOptions.commandRunner);
    for (const problem of inventory.problems) logger.warn("Inventory problem", { problem });
    // Renter code never runs without an isolation verified here, before anything is sold or sent to the chain (said at every start when none).
    const sampleGpus = gpuSampler(options, inventory, agentOptions.commandRunner);
    const baseRuntime = createRuntime(options, {
      dataDir: daemon.config.dataDir,
      logger: logger.child({ part: "runtime" }),
      sampleGpus,
      inventory,
      hiddenPaths: agentOptions.hiddenPaths,
    });
    cleanups.push(async () => baseRuntime.close?.()); // last to run: its staging folders in /tmp go once the tasks are stopped
    const isolation: RuntimeIsolation = baseRuntime.verify ? await baseRuntime.verify() : { sandboxed: true, description: `${baseRuntime.kind} runtime`, warnings: [] };
    for (const warning of isolation.warnings) logger.warn(warning);
    logger.info("Task isolation verified", { runtime: baseRuntime.kind, isolation: isolation.description });
    const tx = new TxSender({ publicClient, walletClient, metrics, logger });
    const setup = { publicClient, deployment, registry: daemon.registry, address, tx, logger };

    await ensureRegistration(setup, options.chain, peerId);
    daemon.chainView.invalidateProvider(address);
    const groups = pricedMachines(inventory, options.prices, logger);
    if (groups.length === 0) {
      throw new ProviderAgentError("Nothing to sell: no machine of the inventory has a price", {
        metaMessages: [
          `Inventory models: ${inventory.machines.map((machine) => machine.model).join(", ") || "none"}.`,
          'Add provider.prices, e.g. { "A100-80GB": { "usdPerGpuHour": 2 } }.',
        ],
      });
    }
    const machines = await declareMachines(setup, groups, store.repository<MachineBinding>(Bucket.providerMachines));
    for (const machine of machines) daemon.chainView.invalidateMachine(machine.machineId);

    // Idle GPUs run at a lower power limit when no idle workload uses them; a task's GPUs get it back first.
    const power = await createIdlePower(options, inventory, { runner: agentOptions.commandRunner, metrics, logger: logger.child({ part: "power" }) });
    const runtime = power ? withPowerRestore(baseRuntime, power) : baseRuntime;
    const capacity = createCapacityManager(options, inventory, logger.child({ part: "capacity" }));
    const records = new LeaseRecords(store);
    await records.load();
    const reservations = await ReservationBook.load(store, { ttlMs: options.reserve.holdSeconds * 1000 });
    const throttle = new HoldThrottle({ ...options.reserve.unopened });
    const reserveLogger = logger.child({ part: "reserve" });
    reservations.onUnopened((terms) => {
      metrics.providerHoldsUnopened.inc();
      throttle.record(terms.renter, terms.peer);
      const counts = throttle.counts(terms.renter, terms.peer);
      reserveLogger.info("Hold expired without a lease", {
        renter: terms.renter,
        peer: terms.peer,
        machineId: terms.machineId,
        units: terms.units,
        unopenedByRenter: counts.wallet,
        unopenedByPeer: counts.peer,
      });
    });
    const decimals = deployment.token.decimals;
    // Prices follow provider.pricing; the market republishes a model's offers when its price changes.
    const pricedModels = [...new Set(machines.map((machine) => machine.model))];
    const pricing = new PriceEngine({
      options,
      models: pricedModels,
      tokenDecimals: decimals,
      usage: (model) => market.usage(model),
      networkAsks: (model) => {
        const nowSeconds = Math.floor(Date.now() / 1000);
        return daemon.offers.book
          .all()
          .filter((entry) => entry.model === model && entry.provider !== address && entry.expiry > nowSeconds && !entry.message.tier)
          .map((entry) => entry.pricePerUnitSecond);
      },
      onChange: (models) => {
        for (const model of models) market.markModelDirty(model);
      },
      metrics,
      logger: logger.child({ part: "pricing" }),
    });
    const market: MachineMarket = new MachineMarket({
      machines,
      table: reservations.table,
      publisher,
      options,
      tokenDecimals: decimals,
      prices: (model) => pricing.current(model),
      floor: (model) => pricing.explain(model)?.idleFloorPerUnitSecond ?? null,
      lowestBid: (machineId) => {
        let lowest: bigint | null = null;
        for (const record of records.open()) {
          if (record.machineId !== machineId || !record.interruptible || (record.chain.status !== "Open" && record.chain.status !== "Active")) continue;
          if (lowest === null || record.pricePerUnitSecond < lowest) lowest = record.pricePerUnitSecond;
        }
        return lowest;
      },
      resources: announcedResources(options.runtime.bounds, inventory, (warning) => logger.warn(warning)),
      // Stated only where tasks can checkpoint: a data plane and sandboxed tasks (providerInputs below).
      checkpointRetentionSeconds: daemon.data && isolation.sandboxed ? daemon.data.options.checkpointRetentionSeconds : undefined,
      logger,
    });
    cleanups.push(() => market.close());
    await pricing.start();
    cleanups.push(async () => pricing.stop());
    const verifier = new RenterRequestVerifier({ domain: daemon.domain, provider: address, delegations: daemon.delegations });
    const outputs = new OutputStore({
      dir: options.outputs.dir ?? path.join(daemon.config.dataDir, "outputs"),
      retentionSeconds: options.outputs.retentionSeconds,
      maxBytes: options.outputs.maxBytes,
      quotaBytes: options.outputs.quotaBytes,
      logger: logger.child({ part: "outputs" }),
    });
    await outputs.start();
    cleanups.push(async () => outputs.stop());
    // A key per epoch (provider.sealing.rotateSeconds); its grace covers an acceptance given just
    // before a rotation: the hold, then the renter's open transaction and its sealing.
    const sealing = await SealingKeyRing.load(daemon.config.dataDir, account, deployment.chainId, {
      rotateSeconds: options.sealing.rotateSeconds,
      graceSeconds: options.reserve.holdSeconds + 600,
      ...(agentOptions.sealingKeys?.now ? { now: agentOptions.sealingKeys.now } : {}),
    });
    // Published with every offer too, so a renter can seal to it before reserving.
    publisher.setSealingKey(sealing.current());
    const leases = new LeaseController({
      publicClient,
      market: daemon.market,
      domain: daemon.domain,
      account,
      tx,
      records,
      runtime,
      capacity,
      machines: market,
      reservations,
      inventory,
      verifier,
      options,
      metrics,
      logger: logger.child({ part: "leases" }),
      outputs,
      confirmations: Number(daemon.follower.confirmations),
      confirmationWaitMs: daemon.config.chain.confirmationWaitMs,
      sealing: { ring: sealing, chainId: deployment.chainId },
      inputs: providerInputs(daemon.data, daemon.config.dataDir, isolation.sandboxed, logger),
    });

    // Units of leases that were running stay away from the idle workload while they are sorted out.
    for (const record of records.open()) {
      if (record.unitIds.length === 0 || record.released || record.phase === "ended") continue;
      await capacity
        .assign(leases.units.taskId(record.leaseId), record.unitIds, record.interruptible ? "interruptible" : "ai")
        .catch((error: unknown) => logger.warn("Cannot take a lease's units back", { leaseId: record.leaseId }, error));
    }
    const unitModes = () => {
      const counts = { idle: 0, ai: 0, interruptible: 0 };
      for (const { mode } of Object.values(capacity.modes())) counts[mode]++;
      for (const [mode, count] of Object.entries(counts)) metrics.providerUnits.set({ mode }, count);
    };
    capacity.on("mode", unitModes);
    const powerModes = () => {
      if (power) runDetached(power.apply(capacity.modes()), logger, "Applying the idle power limits");
    };
    if (power) capacity.on("mode", powerModes);
    await capacity.start();
    unitModes();
    powerModes();
    cleanups.push(async () => {
      capacity.off("mode", unitModes);
      capacity.off("mode", powerModes);
      await capacity.close();
      await power?.restoreAll();
    });
    await leases.start();
    cleanups.push(() => leases.stop());

    const claimer = new Claimer({
      publicClient,
      market: daemon.market,
      tx,
      records,
      ...options.claims,
      chainNow: () => leases.chainNow(),
      onClaimed: (ids) => {
        for (const id of ids) leases.schedule(id);
      },
      logger: logger.child({ part: "claims" }),
    });
    cleanups.push(() => claimer.stop());

    // The agent follows the chain from where it stopped: leases opened, preempted or ended while
    // it was down arrive as events. Capacity counts apply per transaction, after the lease events
    // of the same transaction (a lease's own CapacityChanged comes before its LeaseOpened).
    const ours = new Set(machines.map((machine) => machine.machineId));
    const pending = new Map<number, ChainCapacity>();
    let lastTx: string | undefined;
    const flushCapacity = () => {
      for (const [machineId, counts] of pending) market.setChainCapacity(machineId, counts);
      pending.clear();
    };
    const state = store.repository<string>(Bucket.providerState);
    // Before the one follower, the agent kept its next block under "cursor": read once, as the start.
    const legacyCursor = await state.get("cursor");
    const chainSubscription = await daemon.follower.subscribe(
      "provider",
      async (event: ChainEvent, delivery) => {
        if (event.transactionHash !== lastTx) {
          flushCapacity();
          lastTx = event.transactionHash ?? undefined;
        }
        if (event.eventName === "CapacityChanged") {
          const machineId = Number(event.args.machineId);
          if (ours.has(machineId)) pending.set(machineId, { onDemand: event.args.onDemandUnits, interruptible: event.args.interruptibleUnits, idle: event.args.idleUnits });
          return;
        }
        await leases.onChainEvent(event, delivery);
        if (event.eventName === "LeaseEnded" && records.get(event.args.leaseId)) claimer.trigger();
        if (event.eventName === "LeaseOpened" || event.eventName === "LeaseEnded") {
          const record = records.get(event.args.leaseId);
          if (record) market.markDirty(record.machineId);
        }
      },
      { from: legacyCursor ? BigInt(legacyCursor) : deployment.deploymentBlock, onRange: flushCapacity },
    );
    cleanups.push(() => daemon.follower.unsubscribe(chainSubscription));
    await daemon.follower.sync();
    // Exact counts now, whatever the replay went through.
    for (const machine of machines) {
      const view = await readMachine(publicClient, daemon.registry, machine.machineId);
      market.setChainCapacity(machine.machineId, { onDemand: view.onDemandUnits, interruptible: view.interruptibleUnits, idle: view.idleUnits });
    }
    // The first prices were set before the chain's counts were known: set them again from those.
    pricing.evaluate({ fromScratch: true });

    const unserve = await serveLeaseProtocols(daemon.p2p.host, {
      inventory,
      reserve: {
        deployment,
        domain: daemon.domain,
        market: daemon.market,
        registry: daemon.registry,
        delegations: daemon.delegations,
        account,
        publicClient,
        machines: market,
        reservations,
        leases: () => records.open(),
        chainNow: () => leases.chainNow(),
        throttle,
        reads: new ChainReadCache(),
        options,
        metrics,
        logger: reserveLogger,
        sealingKey: () => sealing.current(),
      },
      leases,
      metrics,
      logger,
    });
    cleanups.push(unserve);
    const taskIo = new TaskIoService({ leases, outputs, options, metrics, logger: logger.child({ part: "task-io" }) });
    cleanups.push(await taskIo.serve(daemon.p2p.host));

    // Holds that expire without a lease give their units back to the offer (nothing sent if unchanged).
    const holdSweep = setInterval(
      () => {
        const expired = reservations.table.sweep().length + reservations.collectUnopened().length;
        if (expired > 0) runDetached(reservations.persist(), logger, "Writing the reservations");
        market.markDirty();
      },
      Math.min(5_000, options.leases.reconcileIntervalMs),
    );
    holdSweep.unref();
    cleanups.push(async () => clearInterval(holdSweep));
    // Rotates the sealing key and deletes old ones once no live lease can need them.
    const stopSealing = sealing.startMaintenance({
      liveLeases: () => records.open().filter((record) => record.phase !== "ended"),
      onRotated: (key) => {
        publisher.setSealingKey(key);
        runDetached(publisher.reannounce(), logger, "Announcing the offers with the new sealing key");
      },
      logger,
      ...(agentOptions.sealingKeys?.maintainIntervalMs ? { intervalMs: agentOptions.sealingKeys.maintainIntervalMs } : {}),
    });
    cleanups.push(async () => stopSealing());

    // The expiry gauge starts at 0, so an alert on "expired" covers "never attested" too.
    for (const machine of machines) metrics.providerAttestationExpiry.set({ machine: String(machine.machineId) }, 0);
    const setAttestations = (machineId: number, attestations: readonly SignedAttestation[]) => {
      market.setAttestations(machineId, attestations);
      metrics.providerAttestationExpiry.set({ machine: String(machineId) }, Math.max(0, ...attestations.map((signed) => signed.attestation.expiry)));
    };
    // Attestors challenge the machines (proof of capacity) and probe the leases (liveness).
    const attestation = await startProviderAttestation(daemon, {
      machines,
      setAttestations,
      holdsLease: (leaseId) => records.get(leaseId)?.chain.status === "Active",
      ...{ records, leaseCheckShareBps: options.terms.leaseCheckShareBps },
      logger,
    });
    cleanups.push(() => attestation.stop());

    leases.sweep();
    await market.flush();
    market.markDirty();
    claimer.start();
    claimer.trigger();

    if (sampleGpus) {
      const units = new Map(inventory.units.map((unit) => [unit.id, unit]));
      const sample = async () => {
        try {
          for (const gpu of await sampleGpus(inventory.units.map((unit) => unit.device))) {
            const labels = { unit: gpu.unitId, model: units.get(gpu.unitId)?.model ?? "unknown" };
            if (gpu.utilizationPct !== null) metrics.gpuUtilization.set(labels, gpu.utilizationPct);
            if (gpu.temperatureC !== null) metrics.gpuTemperature.set(labels, gpu.temperatureC);
            if (gpu.powerDrawW !== null) metrics.gpuPower.set(labels, gpu.powerDrawW);
            if (gpu.powerLimitW !== null) metrics.gpuPowerLimit.set(labels, gpu.powerLimitW);
            if (gpu.memoryUsedMiB !== null) metrics.gpuMemoryUsed.set(labels, gpu.memoryUsedMiB);
          }
        } catch (error) {
          logger.warn("Cannot sample GPU metrics", {}, error);
        }
      };
      await sample();
      const timer = setInterval(() => runDetached(sample(), logger, "Sampling the GPU metrics"), options.metricsSampleMs);
      timer.unref();
      cleanups.push(async () => clearInterval(timer));
    }

    const summary = (): ProviderAgentSummary => ({
      address,
      peerId,
      addrs: daemon.p2p.host.getMultiaddrs().map(String),
      inventorySource: inventory.source,
      runtime: runtime.kind,
      isolation,
      machines: machines.map((machine) => ({
        machineId: machine.machineId,
        model: machine.model,
        units: machine.units,
        vramMiB: machine.vramMiB,
        region: machine.region,
        pricePerUnitSecond: pricing.current(machine.model)?.pricePerUnitSecond ?? priceForModel(options, machine.model, decimals) ?? 0n,
        minBidPerUnitSecond: pricing.current(machine.model)?.minBidPerUnitSecond ?? minBidForModel(options, machine.model, decimals) ?? 0n,
        offered: market.terms(machine.machineId) !== undefined,
      })),
      problems: inventory.problems,
    });
    logger.info("Provider agent started", {
      address,
      peerId,
      machines: machines.map((machine) => `${machine.machineId}:${machine.model}x${machine.units}`),
      leases: records.open().length,
    });

    let stopped = false;
    const agent: ProviderAgent = {
      name: "provider",
      inventory,
      machines,
      capacity,
      leases,
      claimer,
      market,
      pricing,
      chainSubscription,
      reservations,
      setAttestations,
      lease: (leaseId) => records.get(leaseId),
      activeLeases: () => records.open().filter((record) => record.chain.status === "Active"),
      summary,
      async stop() {
        if (stopped) return;
        stopped = true;
        await runCleanups();
        logger.info("Provider agent stopped");
      },
    };
    daemon.attach(agent);
    return agent;
  } catch (error) {
    await runCleanups();
    throw error;
  }
}
