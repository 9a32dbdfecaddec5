/**
 * The provider agent: the role `suanli provider start` adds to a node. It puts the provider's
 * parts together on top of the daemon (store, chain, libp2p host, offer publisher):
 *
 * - setup on-chain from the inventory (register, stake, declare machines): agent/setup.ts;
 * - offers per machine with the free capacity, republished on every change: agent/offers.ts;
 * - the reserve protocol (holds written to level before answering): agent/reserve.ts;
 * - leases from the chain's events, tasks through the runtime, completion reports, the
 *   lease protocols (task, status, logs, cancel) with renter authorization: agent/leases.ts,
 *   agent/protocols.ts, agent/renter-auth.ts;
 * - claims on a schedule with claimMany: agent/claims.ts;
 * - capacity switching between the idle workload, on-demand and interruptible tasks
 *   (capacity/capacity-manager.ts), following the chain.
 *
 * Everything that must survive a crash is in level before the node acts on it; a restart
 * replays the chain from the stored cursor and reconciles every lease (docs/provider.md).
 *
 * @example
 * const daemon = await startDaemon(config, { publishesOffers: true });
 * const agent = await startProviderAgent(daemon); // attaches itself: daemon.stop() stops it first
 */
import { startProviderAttestation } from "./agent/attestation.js";
import type { Address, LocalAccount } from "viem";
import { readMachine } from "../../common/chain/market.js";
import type { SignedAttestation } from "../../common/offers/message.js";
import { SuanliError } from "../../common/errors.js";
import { ChainWatcher, type ChainEvent } from "../chain/watcher.js";
import type { Daemon, DaemonModule } from "../daemon.js";
import { Bucket } from "../store/buckets.js";
import type { CapacityManager } from "./capacity/capacity-manager.js";
import type { CommandRunner, Inventory } from "./inventory/inventory.js";
import { minBidForModel, priceForModel } from "./options.js";
import { createCapacityManager, createRuntime, gpuSampler, loadInventory } from "./provider.js";
import type { Runtime } from "./runtime/runtime.js";
import { TxSender } from "./agent/chain-tx.js";
import { Claimer } from "./agent/claims.js";
import { LeaseController } from "./agent/leases.js";
import { MachineMarket, type ChainCapacity } from "./agent/offers.js";
import { serveLeaseProtocols } from "./agent/protocols.js";
import { LeaseRecords, type LeaseRecord } from "./agent/records.js";
import { RenterRequestVerifier } from "./agent/renter-auth.js";
import { ReservationBook } from "./agent/reservations.js";
import { declareMachines, ensureRegistration, pricedMachines, type DeclaredMachine, type MachineBinding } from "./agent/setup.js";

export class ProviderAgentError extends SuanliError {
  override name = "ProviderAgentError";
}

export type ProviderAgentOptions = {
  /** Runs nvidia-smi (tests play recordings through it); the default spawns the real binary. */
  commandRunner?: CommandRunner;
};

export type ProviderAgentSummary = {
  address: Address;
  peerId: string;
  addrs: string[];
  inventorySource: Inventory["source"];
  runtime: Runtime["kind"];
  machines: { machineId: number; model: string; units: number; vramMiB: number; region: string; pricePerUnitSecond: bigint; minBidPerUnitSecond: bigint; offered: boolean }[];
  problems: string[];
};

export type ProviderAgent = DaemonModule & {
  inventory: Inventory;
  machines: readonly DeclaredMachine[];
  capacity: CapacityManager;
  leases: LeaseController;
  claimer: Claimer;
  market: MachineMarket;
  watcher: ChainWatcher;
  /** Signed hardware attestations to publish with a machine's offer (from the attestor), replacing earlier ones. */
  setAttestations(machineId: number, attestations: readonly SignedAttestation[]): void;
  /** What level holds about a lease. */
  lease(leaseId: bigint): LeaseRecord | undefined;
  /** Leases active on-chain (metering), as last read: what liveness probes ask about. */
  activeLeases(): LeaseRecord[];
  summary(): ProviderAgentSummary;
};

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

    const sampleGpus = gpuSampler(options, inventory, agentOptions.commandRunner);
    const runtime = createRuntime(options, { dataDir: daemon.config.dataDir, logger: logger.child({ part: "runtime" }), sampleGpus });
    const capacity = createCapacityManager(options, inventory, logger.child({ part: "capacity" }));
    const records = new LeaseRecords(store);
    await records.load();
    const reservations = await ReservationBook.load(store, { ttlMs: options.reserve.holdSeconds * 1000 });
    const decimals = deployment.token.decimals;
    const market = new MachineMarket({
      machines,
      table: reservations.table,
      publisher,
      options,
      tokenDecimals: decimals,
      lowestBid: (machineId) => {
        let lowest: bigint | null = null;
        for (const record of records.open()) {
          if (record.machineId !== machineId || !record.interruptible || (record.chain.status !== "Open" && record.chain.status !== "Active")) continue;
          if (lowest === null || record.pricePerUnitSecond < lowest) lowest = record.pricePerUnitSecond;
        }
        return lowest;
      },
      logger,
    });
    cleanups.push(() => market.close());
    const verifier = new RenterRequestVerifier({ domain: daemon.domain, provider: address });
    const leases = new LeaseController({
      publicClient,
      market: daemon.market,
      domain: daemon.domain,
      account: account as never,
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
    });

    // Units of leases that were running stay away from the idle workload while they are sorted out.
    for (const record of records.open()) {
      if (record.unitIds.length === 0 || record.released || record.phase === "ended") continue;
      await capacity.assign(`lease-${record.leaseId}`, record.unitIds, record.interruptible ? "interruptible" : "ai").catch((error: unknown) => logger.warn("Cannot take a lease's units back", { leaseId: record.leaseId }, error));
    }
    const unitModes = () => {
      const counts = { idle: 0, ai: 0, interruptible: 0 };
      for (const { mode } of Object.values(capacity.modes())) counts[mode]++;
      for (const [mode, count] of Object.entries(counts)) metrics.providerUnits.set({ mode }, count);
    };
    capacity.on("mode", unitModes);
    await capacity.start();
    unitModes();
    cleanups.push(async () => {
      capacity.off("mode", unitModes);
      await capacity.close();
    });
    await leases.start();
    cleanups.push(() => leases.stop());

    const claimer = new Claimer({
      publicClient,
      market: daemon.market,
      tx,
      records,
      intervalMs: options.claims.intervalMs,
      minAmount: options.claims.minAmount,
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
    const cursor = await state.get("cursor");
    const watcher = new ChainWatcher({
      publicClient,
      deployment,
      fromBlock: cursor ? BigInt(cursor) : deployment.deploymentBlock,
      pollIntervalMs: daemon.config.chain.pollingIntervalMs,
      confirmations: daemon.config.chain.confirmations,
      logger: logger.child({ part: "chain" }),
      onCursor: async (next) => {
        flushCapacity();
        await state.put("cursor", next.toString());
      },
    });
    watcher.handle(async (event: ChainEvent) => {
      if (event.transactionHash !== lastTx) {
        flushCapacity();
        lastTx = event.transactionHash ?? undefined;
      }
      if (event.eventName === "CapacityChanged") {
        const machineId = Number(event.args.machineId);
        if (ours.has(machineId)) pending.set(machineId, { onDemand: event.args.onDemandUnits, interruptible: event.args.interruptibleUnits, idle: event.args.idleUnits });
        return;
      }
      await leases.onChainEvent(event);
      if (event.eventName === "LeaseEnded" && records.get(event.args.leaseId)) claimer.trigger();
      if (event.eventName === "LeaseOpened" || event.eventName === "LeaseEnded") {
        const record = records.get(event.args.leaseId);
        if (record) market.markDirty(record.machineId);
      }
    });
    await watcher.start();
    cleanups.push(() => watcher.stop());
    // Exact counts now, whatever the replay went through.
    for (const machine of machines) {
      const view = await readMachine(publicClient, daemon.registry, machine.machineId);
      market.setChainCapacity(machine.machineId, { onDemand: view.onDemandUnits, interruptible: view.interruptibleUnits, idle: view.idleUnits });
    }

    const unserve = await serveLeaseProtocols(daemon.p2p.host, {
      reserve: {
        deployment,
        domain: daemon.domain,
        market: daemon.market,
        registry: daemon.registry,
        account,
        publicClient,
        machines: market,
        reservations,
        leases: () => records.open(),
        chainNow: () => leases.chainNow(),
        options,
        metrics,
        logger: logger.child({ part: "reserve" }),
      },
      leases,
      metrics,
      logger,
    });
    cleanups.push(unserve);

    // Holds that expire without a lease give their units back to the offer (the publisher sends
    // nothing when no offer changed).
    const holdSweep = setInterval(() => {
      if (reservations.table.sweep().length > 0) void reservations.persist().catch((error: unknown) => logger.warn("Cannot write the reservations", {}, error));
      market.markDirty();
    }, Math.min(5_000, options.leases.reconcileIntervalMs));
    holdSweep.unref();
    cleanups.push(async () => clearInterval(holdSweep));

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
      const timer = setInterval(() => void sample(), options.metricsSampleMs);
      timer.unref();
      cleanups.push(async () => clearInterval(timer));
    }

    const summary = (): ProviderAgentSummary => ({
      address,
      peerId,
      addrs: daemon.p2p.host.getMultiaddrs().map(String),
      inventorySource: inventory.source,
      runtime: runtime.kind,
      machines: machines.map((machine) => ({
        machineId: machine.machineId,
        model: machine.model,
        units: machine.units,
        vramMiB: machine.vramMiB,
        region: machine.region,
        pricePerUnitSecond: priceForModel(options, machine.model, decimals) ?? 0n,
        minBidPerUnitSecond: minBidForModel(options, machine.model, decimals) ?? 0n,
        offered: market.terms(machine.machineId) !== undefined,
      })),
      problems: inventory.problems,
    });
    logger.info("Provider agent started", { address, peerId, machines: machines.map((machine) => `${machine.machineId}:${machine.model}x${machine.units}`), leases: records.open().length });

    let stopped = false;
    const agent: ProviderAgent = {
      name: "provider",
      inventory,
      machines,
      capacity,
      leases,
      claimer,
      market,
      watcher,
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
