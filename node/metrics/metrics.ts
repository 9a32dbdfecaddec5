/**
 * Every Prometheus metric of the node, declared in one place. Counters end in `_total`,
 * durations in `_seconds`. Each node instance owns its registry (several nodes can share a
 * process in tests and benchmarks); the HTTP API serves `registry.metrics()`.
 */
import { statfs } from "node:fs/promises";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export type Metrics = ReturnType<typeof createMetrics>;

/** Where an offer message came from. */
export type OfferSource = "gossip" | "sync" | "local";

/**
 * Creates the node's metrics in `registry` (a fresh one by default).
 *
 * @example
 * const metrics = createMetrics();
 * metrics.offersAccepted.inc({ source: "gossip" });
 * console.log(await metrics.registry.metrics());
 */
export function createMetrics(options: { registry?: Registry; processMetrics?: boolean; dataDir?: string } = {}) {
  const registry = options.registry ?? new Registry();
  if (options.processMetrics) collectDefaultMetrics({ register: registry, prefix: "suanli_" });
  const { dataDir } = options;
  // Read at scrape time: the disk fills while nothing in the node changes.
  const dataDirStat = async () => (dataDir ? statfs(dataDir).catch(() => undefined) : undefined);
  return {
    registry,
    offersAccepted: new Counter({
      name: "suanli_offers_accepted_total",
      help: "Offer messages that passed validation and entered the book",
      labelNames: ["source"] as const,
      registers: [registry],
    }),
    offersRejected: new Counter({
      name: "suanli_offers_rejected_total",
      help: "Offer messages refused, by reason; action=reject lowered the sender's gossip score, ignore did not",
      labelNames: ["source", "reason", "action"] as const,
      registers: [registry],
    }),
    offerValidation: new Histogram({
      name: "suanli_offers_validation_seconds",
      help: "Time to validate one offer message",
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25],
      registers: [registry],
    }),
    offersEvicted: new Counter({
      name: "suanli_offers_evicted_total",
      help: "Offers removed from the book, by reason (expired, chain changes)",
      labelNames: ["reason"] as const,
      registers: [registry],
    }),
    offersPublished: new Counter({
      name: "suanli_offers_published_total",
      help: "Offer messages this node published for its own machines",
      labelNames: ["trigger"] as const,
      registers: [registry],
    }),
    offersSynced: new Counter({
      name: "suanli_offers_sync_requests_total",
      help: "Offers-sync exchanges, by role and outcome",
      labelNames: ["role", "outcome"] as const,
      registers: [registry],
    }),
    bookOffers: new Gauge({
      name: "suanli_offers_book_offers",
      help: "Offers held in the book",
      registers: [registry],
    }),
    p2pPeers: new Gauge({
      name: "suanli_p2p_peers",
      help: "Connected peers",
      registers: [registry],
    }),
    providerLeases: new Gauge({
      name: "suanli_provider_leases",
      help: "Leases of this provider node, by the state of their task",
      labelNames: ["state"] as const,
      registers: [registry],
    }),
    providerTasks: new Counter({
      name: "suanli_provider_tasks_total",
      help: "Tasks that ended, by result (succeeded, failed, exceeded, stopped, preempted, lost)",
      labelNames: ["result"] as const,
      registers: [registry],
    }),
    providerEarnings: new Counter({
      name: "suanli_provider_earnings_claimed_total",
      help: "Payments received for this provider's leases, in base units of the settlement token, after the protocol fee",
      registers: [registry],
    }),
    providerReservations: new Counter({
      name: "suanli_provider_reservations_total",
      help: "Reserve requests answered, by outcome (accepted or the refusal reason)",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
    providerHoldsUnopened: new Counter({
      name: "suanli_provider_holds_unopened_total",
      help: "Reservations (held units) that expired without the renter opening a lease",
      registers: [registry],
    }),
    p2pPeersRefused: new Counter({
      name: "suanli_p2p_peers_refused_total",
      help: "Connections refused because the peer or its address misbehaved recently, by what matched (peer, address)",
      labelNames: ["match"] as const,
      registers: [registry],
    }),
    providerTransactions: new Counter({
      name: "suanli_provider_transactions_total",
      help: "Transactions this provider node sent, by contract function and outcome",
      labelNames: ["function", "outcome"] as const,
      registers: [registry],
    }),
    providerUnits: new Gauge({
      name: "suanli_provider_units",
      help: "Units of this node by mode: idle (idle workload), ai (on-demand lease), interruptible",
      labelNames: ["mode"] as const,
      registers: [registry],
    }),
    providerPrice: new Gauge({
      name: "suanli_provider_price_per_unit_second",
      help: "Price this node publishes per model, in base units per unit-second (kind: on_demand, interruptible_min_bid)",
      labelNames: ["model", "kind"] as const,
      registers: [registry],
    }),
    providerPriceTarget: new Gauge({
      name: "suanli_provider_price_target_per_unit_second",
      help: "Where the pricing policy wants a model's price (before the step bound and the idle floor)",
      labelNames: ["model", "policy"] as const,
      registers: [registry],
    }),
    providerPriceInput: new Gauge({
      name: "suanli_provider_price_input",
      help: "Inputs of the last price evaluation per model (input: utilization_bps, network_index, idle_floor; prices in base units per unit-second)",
      labelNames: ["model", "input"] as const,
      registers: [registry],
    }),
    providerPriceChanges: new Counter({
      name: "suanli_provider_price_changes_total",
      help: "Price changes per model, by policy and by what set the price (policy target, step bound, idle floor)",
      labelNames: ["model", "policy", "limited_by"] as const,
      registers: [registry],
    }),
    providerPowerState: new Gauge({
      name: "suanli_gpu_power_state",
      help: "Power management of each GPU: 1 for its current state (normal, idle-limited: power limit lowered while idle, unmanaged: the limit could not be set)",
      labelNames: ["gpu", "state"] as const,
      registers: [registry],
    }),
    providerPowerLimit: new Gauge({
      name: "suanli_gpu_power_limit_set_watts",
      help: "Power limit the node's idle power management set on each GPU (its normal limit, or the idle one)",
      labelNames: ["gpu"] as const,
      registers: [registry],
    }),
    providerPowerCommands: new Counter({
      name: "suanli_gpu_power_commands_total",
      help: "Power limit changes the node ran, by action (lower, restore) and outcome",
      labelNames: ["action", "outcome"] as const,
      registers: [registry],
    }),
    gpuUtilization: new Gauge({
      name: "suanli_gpu_utilization_percent",
      help: "GPU utilization by unit (whole GPUs; MIG slices report none)",
      labelNames: ["unit", "model"] as const,
      registers: [registry],
    }),
    gpuTemperature: new Gauge({
      name: "suanli_gpu_temperature_celsius",
      help: "GPU temperature by unit (MIG slices report their GPU's)",
      labelNames: ["unit", "model"] as const,
      registers: [registry],
    }),
    gpuPower: new Gauge({
      name: "suanli_gpu_power_watts",
      help: "GPU power draw by unit (MIG slices report their GPU's)",
      labelNames: ["unit", "model"] as const,
      registers: [registry],
    }),
    gpuPowerLimit: new Gauge({
      name: "suanli_gpu_power_limit_watts",
      help: "GPU power limit by unit (the cap the driver enforces; a draw at the limit means the GPU is power capped)",
      labelNames: ["unit", "model"] as const,
      registers: [registry],
    }),
    gpuMemoryUsed: new Gauge({
      name: "suanli_gpu_memory_used_mib",
      help: "GPU memory in use by unit",
      labelNames: ["unit", "model"] as const,
      registers: [registry],
    }),
    p2pRequestErrors: new Counter({
      name: "suanli_p2p_request_errors_total",
      help: "Request/response exchanges answered with an error, by protocol and error name",
      labelNames: ["protocol", "name"] as const,
      registers: [registry],
    }),
    attestChallenges: new Counter({
      name: "suanli_attest_challenges_total",
      help: "Proof-of-capacity challenges this attestor ran, by outcome (pass, fail, error) and reason",
      labelNames: ["outcome", "reason", "trigger"] as const,
      registers: [registry],
    }),
    attestProbes: new Counter({
      name: "suanli_attest_probes_total",
      help: "Liveness probes of leased providers, by outcome (ok, failed)",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
    attestFaults: new Counter({
      name: "suanli_attest_faults_total",
      help: "Fault handling steps: proposed, cosigned, declined (with reason), submitted, landed, abandoned",
      labelNames: ["event", "reason"] as const,
      registers: [registry],
    }),
    providerAttestationExpiry: new Gauge({
      name: "suanli_provider_attestation_expiry_timestamp_seconds",
      help: "Unix time at which the newest attestation of this provider's machine expires (0: never attested since the node started)",
      labelNames: ["machine"] as const,
      registers: [registry],
    }),
    chainPolls: new Counter({
      name: "suanli_chain_polls_total",
      help: "Polls of the chain RPC endpoint for new blocks and contract logs, by outcome (ok, error)",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
    chainLastPollSuccess: new Gauge({
      name: "suanli_chain_last_poll_success_timestamp_seconds",
      help: "Unix time of the last poll of the chain RPC endpoint that succeeded",
      registers: [registry],
    }),
    chainHead: new Gauge({
      name: "suanli_chain_head_block",
      help: "Newest block whose contract logs this node has read",
      registers: [registry],
    }),
    dataDirFree: new Gauge({
      name: "suanli_data_dir_free_bytes",
      help: "Bytes available to the node on the filesystem of its data directory (store, task bundles, logs)",
      registers: [registry],
      async collect() {
        const stat = await dataDirStat();
        if (stat) this.set(stat.bavail * stat.bsize);
      },
    }),
    dataDirSize: new Gauge({
      name: "suanli_data_dir_size_bytes",
      help: "Size in bytes of the filesystem of the node's data directory",
      registers: [registry],
      async collect() {
        const stat = await dataDirStat();
        if (stat) this.set(stat.blocks * stat.bsize);
      },
    }),
    dataServedBytes: new Counter({
      name: "suanli_data_served_bytes_total",
      help: "Bytes of blocks this node sent to peers over bitswap (the data plane's upload)",
      registers: [registry],
    }),
    dataServedBlocks: new Counter({
      name: "suanli_data_served_blocks_total",
      help: "Blocks this node sent to peers over bitswap",
      registers: [registry],
    }),
    dataReceivedBytes: new Counter({
      name: "suanli_data_received_bytes_total",
      help: "Bytes of blocks this node fetched from peers (verified, then stored)",
      registers: [registry],
    }),
    dataReceivedBlocks: new Counter({
      name: "suanli_data_received_blocks_total",
      help: "Blocks this node fetched from peers",
      registers: [registry],
    }),
    dataCacheLookups: new Counter({
      name: "suanli_data_cache_lookups_total",
      help: "Requests for a dataset, input or checkpoint root, by result: hit (every block already here, pinned or cached) or miss (fetched)",
      labelNames: ["result"] as const,
      registers: [registry],
    }),
    dataFetchSeconds: new Histogram({
      name: "suanli_data_fetch_seconds",
      help: "Time to fetch a root that was not all here (a cache miss), by outcome (ok, not_found, error)",
      labelNames: ["outcome"] as const,
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers: [registry],
    }),
    dataServeLimited: new Counter({
      name: "suanli_data_serve_limited_total",
      help: "Peers' block requests held by the per-peer serving limits, by action (throttled: delayed; refused: blocks or stream dropped) and reason",
      labelNames: ["action", "reason"] as const,
      registers: [registry],
    }),
    attestLeasesWatched: new Gauge({
      name: "suanli_attest_leases_watched",
      help: "Active leases whose providers this attestor probes",
      registers: [registry],
    }),
  };
}
