/**
 * The attestor role on a running node (`npx suanli attestor start`): proof-of-capacity challenges of
 * the machines in the offer book (on a schedule and on request), results kept in level, liveness
 * probes of providers that hold active leases, and faults signed, exchanged with the other
 * attestors and submitted once a quorum agrees. docs/attestation.md describes the whole role.
 *
 * @example
 * const daemon = await startDaemon(config);
 * const attestor = await startAttestorService(daemon);
 * daemon.attach(attestor);
 * const record = await attestor.challenge(7);   // challenge machine 7 now
 */
import { loadCcPolicy, DeviceRegistry } from "./cc/index.js";
import type { Address, LocalAccount } from "viem";
import { getAddress } from "viem";
import { attestorStakingAbi, providerRegistryAbi } from "../../common/abi.js";
import type { RowRecomputer } from "../../common/attest/verify.js";
import { TypedDataRecoverer } from "../../common/eip712-recover.js";
import type { Daemon, DaemonModule } from "../daemon.js";
import { Attestor, Challenger, ChallengeResults, type ChallengeRecord, FailureHistory, FailureNotifier } from "./challenge/index.js";
import { NotAnAttestorError } from "./errors.js";
import { FaultCoordinator, LeaseTracker, LivenessProber, nonDecreasingClock, faultPeeringWarning } from "./faults/index.js";
import { CapacityEvidence, InLeaseChecker, AttestorCount } from "./lease-checks/index.js";
import { CpuRunner } from "./runner/index.js";
import { DisputeAnswerer } from "./disputes/index.js";
import { Bucket } from "../store/buckets.js";

export type AttestorService = DaemonModule & {
  /** The attestor's wallet address (holds ATTESTOR_ROLE). */
  address: Address;
  results: ChallengeResults;
  /** Failed challenges per machine and provider, which only time clears (the backoff, and `failures` in attestations). */
  failures: FailureHistory;
  challenger: Challenger;
  /** Present while `attest.liveness.enabled`. */
  leases: LeaseTracker | undefined;
  prober: LivenessProber | undefined;
  faults: FaultCoordinator | undefined;
  /** Present while `attest.liveness.enabled` and `attest.leaseChecks.enabled`. */
  leaseChecks: InLeaseChecker | undefined;
  /** Answers disputes of this attestor's attestations from its records (AttestorStaking). */
  disputes: DisputeAnswerer;
  /** Challenges a machine now and returns the recorded result. */
  challenge(machineId: number): Promise<ChallengeRecord>;
};

/** Milliseconds between scans for disputes (the shortest answer window is 10 minutes). */
const DISPUTE_SCAN_INTERVAL_MS = 10_000;

export type StartAttestorServiceOptions = {
  /** Row recomputation for checking answers; default the CPU runner's worker pool (`attest.runner.workers`). */
  recompute?: RowRecomputer;
  /** Clock in unix ms (tests). */
  now?: () => number;
};

function attestorAccount(daemon: Daemon): LocalAccount {
  const account = daemon.account;
  if (!account || account.type !== "local") {
    throw new NotAnAttestorError("The attestor role needs a wallet: no chain.privateKey is configured", {
      metaMessages: ["Set chain.privateKey (or SUANLI_CHAIN__PRIVATE_KEY) to the key of an address that holds ATTESTOR_ROLE."],
    });
  }
  return account;
}

/**
 * Starts the attestor role on a node. The node's wallet must hold ATTESTOR_ROLE on the
 * deployment's ProviderRegistry (NotAnAttestorError otherwise). Attach the result to the daemon
 * (`daemon.attach(service)`) so it stops with the node.
 */
export async function startAttestorService(daemon: Daemon, options: StartAttestorServiceOptions = {}): Promise<AttestorService> {
  const account = attestorAccount(daemon);
  const address = getAddress(account.address);
  const walletClient = daemon.chain.walletClient;
  if (!walletClient) throw new NotAnAttestorError("The attestor role needs a wallet client to submit faults");
  const holdsRole = await daemon.chain.publicClient.readContract({ address: daemon.registry, abi: providerRegistryAbi, functionName: "isAttestor", args: [address] });
  if (!holdsRole) {
    const role = await daemon.chain.publicClient.readContract({ address: daemon.registry, abi: providerRegistryAbi, functionName: "ATTESTOR_ROLE" });
    if (await daemon.chain.publicClient.readContract({ address: daemon.registry, abi: providerRegistryAbi, functionName: "hasRole", args: [role, address] })) {
      const staking = await daemon.chain.publicClient.readContract({ address: daemon.registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
      throw new NotAnAttestorError(`${address} holds ATTESTOR_ROLE but not the minimum stake in the AttestorStaking ${staking}: its signatures would not count`, {
        metaMessages: [
          'Stake the settlement token: AttestorStaking.stake(amount) after approving it (params().minStake is the minimum); see docs/attestation-threats.md, "Trust in attestors".',
        ],
      });
    }
    throw new NotAnAttestorError(`${address} does not hold ATTESTOR_ROLE on the registry ${daemon.registry}`, {
      metaMessages: [
        'Governance grants it: ProviderRegistry.grantRole(ATTESTOR_ROLE, address), ATTESTOR_ROLE = keccak256("ATTESTOR_ROLE").',
        "On the devnet, accounts 7, 8 and 9 are attestors (`npm run devnet -- --attestors 7,8,9` chooses others).",
      ],
    });
  }

  const { config } = daemon;
  const logger = daemon.logger.child({ module: "attestor" });
  // One clock that never runs backwards for receipts, outages and fault signatures (liveness.ts nonDecreasingClock).
  const now = nonDecreasingClock(options.now ?? Date.now);
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse()) {
      try {
        await stop();
      } catch (error) {
        logger.warn("Attestor part failed to stop cleanly", {}, error);
      }
    }
  };

  try {
    let recompute = options.recompute;
    if (!recompute) {
      const pool = new CpuRunner({ workers: config.attest.runner.workers });
      stops.push(() => pool.close());
      recompute = pool.recompute;
    }
    const cc = await loadCcPolicy(config.attest.cc);
    if (cc)
      logger.info("Confidential-computing evidence verified", {
        roots: cc.roots.length,
        required: cc.required,
        boards: cc.boards?.size ?? 0,
        requireCcMode: cc.requireCcMode,
        crls: cc.revocation?.crls.length ?? 0,
        crlRequired: cc.revocation?.required ?? false,
      });
    // Which machine each GPU backs, kept across restarts (one GPU, one machine).
    const devices = new DeviceRegistry(undefined, daemon.store.repository(Bucket.attestDevices), logger);
    await devices.load();
    // Set once the fault coordinator runs (below); the attestor reads it when it signs a pass.
    let faults: FaultCoordinator | undefined;
    const attestor = new Attestor({
      account,
      domain: daemon.domain,
      profile: config.attest.challenge,
      attestationTtlSeconds: config.attest.attestationTtlSeconds,
      recompute,
      now,
      logger,
      ...(cc ? { cc } : {}),
      devices,
      gpuReuseWindowMs: config.attest.attestor.gpuReuseWindowSeconds * 1000,
      // No pass of a machine in the fault window after a capacity fault of it this attestor signed (issue #34, finding 3).
      passHeldUntil: (provider, machineId) => faults?.passHeldUntil(provider, machineId),
    });
    const results = new ChallengeResults(daemon.store, config.attest.attestor.keepResultsPerMachine, now);
    // Failed challenges per machine, which only time clears: the backoff and the attestations' `failures`.
    const failures = new FailureHistory(daemon.store.repository(Bucket.attestFailures), {
      windowMs: config.attest.attestor.failureHistorySeconds * 1000,
      firstRetryMs: config.attest.attestor.retryAfterFailureSeconds * 1000,
      maxRetryMs: config.attest.attestor.maxRetryAfterFailureSeconds * 1000,
    });
    let leaseChecks: InLeaseChecker | undefined;
    let leases: LeaseTracker | undefined;
    // A machine's active lease's end (unix s), or undefined: such a machine gets only light in-lease checks.
    const leased = (machineId: number): number | undefined => {
      const active = leases?.active().filter((lease) => lease.machineId === machineId) ?? [];
      return active.length ? Math.max(...active.map((lease) => lease.end)) : undefined;
    };
    const attestorCount = new AttestorCount({ publicClient: daemon.chain.publicClient, registry: daemon.registry, now });
    // Every failed challenge is announced to the offer books (issue 35 item 9).
    const notifier = new FailureNotifier({ account, domain: daemon.domain, publish: (notice) => daemon.offers.failures.publish(notice), logger });
    const challenger = new Challenger({
      host: daemon.p2p.host,
      chainId: daemon.deployment.chainId,
      publicClient: daemon.chain.publicClient,
      registry: daemon.registry,
      book: daemon.offers.book,
      attestor,
      results,
      failures,
      options: config.attest.attestor,
      memory: config.attest.memory,
      metrics: daemon.metrics,
      logger,
      // Both listeners run even when one throws (the challenger logs the rejection).
      onResult: async (record) => {
        await Promise.all([notifier.onResult(record), leaseChecks?.onResult(record)]);
      },
      // In-lease checks are light (issue 35 item 4); a leased machine is left out of the schedule and of requests.
      lightRateShare: config.attest.leaseChecks.rateShare,
      leasedUntil: (machineId) => leased(machineId),
      now,
    });
    const disputes = new DisputeAnswerer({
      publicClient: daemon.chain.publicClient,
      walletClient,
      registry: daemon.registry,
      attestor: address,
      results,
      fromBlock: daemon.deployment.deploymentBlock,
      intervalMs: DISPUTE_SCAN_INTERVAL_MS,
      logger: logger.child({ part: "disputes" }),
    });
    await disputes.start();
    stops.push(() => disputes.stop());

    let prober: LivenessProber | undefined;
    if (config.attest.liveness.enabled) {
      const recoverer = new TypedDataRecoverer(daemon.deployment.chainId, daemon.market);
      leases = new LeaseTracker({
        publicClient: daemon.chain.publicClient,
        deployment: daemon.deployment,
        market: daemon.market,
        store: daemon.store,
        follower: daemon.follower,
        logger: logger.child({ part: "leases" }),
        onEnded: (leaseId, reason) => faults?.onLeaseEnded(leaseId, reason),
        now,
      });
      prober = new LivenessProber({
        host: daemon.p2p.host,
        chainId: daemon.deployment.chainId,
        domain: daemon.domain,
        account,
        recoverer,
        chainView: daemon.chainView,
        book: daemon.offers.book,
        tracker: leases,
        options: config.attest.liveness,
        metrics: daemon.metrics,
        logger: logger.child({ part: "liveness" }),
        onProbe: (lease, result, state) => faults?.onProbe(lease, result, state),
        store: daemon.store,
        now,
      });
      if (config.attest.leaseChecks.enabled) {
        leaseChecks = new InLeaseChecker({
          tracker: leases,
          challenger,
          results,
          book: daemon.offers.book,
          faults: () => faults,
          options: config.attest.leaseChecks,
          attestorCount: () => attestorCount.get(),
          logger: logger.child({ part: "lease-checks" }),
          now,
        });
      }
      // A liveness fault waits out max(qosWindowSeconds, the staking's faultWindow) after observedAt
      // (liveness.ts mayFaultAt): a receipt inside that window would make the signature slashable.
      const staking = await daemon.chain.publicClient.readContract({ address: daemon.registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
      const readFaultWindow =
        staking === "0x0000000000000000000000000000000000000000"
          ? undefined
          : async () => (await daemon.chain.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "params" })).faultWindow;
      faults = new FaultCoordinator({
        readFaultWindow,
        host: daemon.p2p.host,
        chainId: daemon.deployment.chainId,
        domain: daemon.domain,
        market: daemon.market,
        recoverer,
        account,
        publicClient: daemon.chain.publicClient,
        walletClient,
        chainView: daemon.chainView,
        store: daemon.store,
        tracker: leases,
        prober,
        liveness: config.attest.liveness,
        evidence: leaseChecks ? [new CapacityEvidence(leaseChecks, results, leases, config.attest.leaseChecks)] : [],
        recompute,
        peers: config.attest.attestor.peers,
        metrics: daemon.metrics,
        logger: logger.child({ part: "faults" }),
        now,
      });
      // The fault protocol is served before the first probe, so peers can ask from the start.
      await faults.start();
      stops.push(() => faults!.stop());
      await leases.start();
      stops.push(() => leases!.stop());
      await prober.start();
      stops.push(() => prober!.stop());
      if (leaseChecks) {
        leaseChecks.start();
        stops.push(() => leaseChecks!.stop());
      }
    }

    // Started once the lease tracker has read the chain: its first scan must already leave leased machines out.
    await challenger.start();
    stops.push(() => challenger.stop());

    const peering = faultPeeringWarning({
      peers: config.attest.attestor.peers,
      dhtEnabled: config.p2p.dht.enabled,
      // The chain away at start: warn as for any quorum above one.
      quorum: faults ? await daemon.chainView.attestationQuorum().catch(() => 2) : 0,
      livenessEnabled: config.attest.liveness.enabled,
    });
    if (peering) logger.warn(`No other attestor configured: ${peering}`);
    logger.info("Attestor started", {
      address,
      preset: config.attest.challenge.preset,
      liveness: config.attest.liveness.enabled,
      leaseChecks: leaseChecks !== undefined,
      qosWindowSeconds: config.attest.liveness.qosWindowSeconds,
      peers: config.attest.attestor.peers.length,
    });
    return {
      name: "attestor",
      address,
      results,
      failures,
      challenger,
      leases,
      prober,
      faults,
      leaseChecks,
      disputes,
      challenge: (machineId) => challenger.challenge(machineId, "request"),
      async stop() {
        await stopAll();
        logger.info("Attestor stopped", { address });
      },
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
