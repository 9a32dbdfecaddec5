/**
 * The provider's side of the attestor protocols, mounted on a running node by the provider agent:
 *
 * - `/suanli/attest/1.0.0`: answers proof-of-capacity challenges with the ChallengeResponder
 *   (commit, then the opened rows) and receives the result; a pass carries the signed attestation,
 *   which is checked and handed to `onAttestation` so the agent puts it in its offers.
 * - `/suanli/liveness/1.0.0`: answers attestors' signed liveness probes of the leases this
 *   provider really holds active with a Heartbeat signed by its wallet.
 *
 * @example
 * const mounted = await mountProviderAttestation(daemon, {
 *   runner: createRunner(config.attest.runner, logger),
 *   machines: (machineId) => inventory.machine(machineId),
 *   onAttestation: (machineId, signed) => offers.addAttestation(machineId, signed),
 * });
 * daemon.attach(mounted);
 */
import type { z } from "zod";
import { LRUCache } from "lru-cache";
import { getAddress, type Address, type Hex, type LocalAccount } from "viem";
import { verifyAttestation, type SignedAttestation } from "../../common/attest/attestation.js";
import {
  MAX_CONTROL_MESSAGE_BYTES,
  ATTEST_PROTOCOL_VERSION,
  LEGACY_V1_MESSAGE,
  legacyV1MessageSchema,
  type ChallengeMessage,
  type LegacyV1Message,
} from "../../common/attest/messages.js";
import { livenessProbeDigest, signHeartbeat } from "../../common/attest/liveness.js";
import { attestAnswerSchema, attestRequestSchema, livenessProbeSchema, signedHeartbeatSchema, type ResultMessage } from "../../common/attest/wire.js";
import { readLease } from "../../common/chain/market.js";
import { MAX_ROUND_MACHINES } from "../../common/attest/bounds.js";
import { recoverDigestSigner } from "../../common/eip712-recover.js";
import { modelHash } from "../../common/gpu.js";
import { ATTEST_PROTOCOL, LIVENESS_PROTOCOL } from "../../common/p2p/protocols.js";
import { handleProtocol } from "../../common/p2p/reqresp.js";
import type { Daemon, DaemonModule } from "../daemon.js";
import type { Logger } from "../log/logger.js";
import { maxChallengeOps } from "./create.js";
import { WrongChainError } from "../offers/gossip.js";
import { ChallengeRefusedError, LeaseNotHeldError, NoProviderWalletError, UnauthorizedProbeError } from "./errors.js";
import { ChallengeResponder, type ChallengeResponderOptions, type ProviderMachine } from "./challenge/index.js";
import { AttestorCount } from "./lease-checks/index.js";
import { type Runner, CpuMemoryRunner, MemoryResponder, type MemoryRunner } from "./runner/index.js";
import { ProbeReceipts, FalseFaultDisputer, PassedAttestations } from "./disputes/index.js";
import type { MemChallenge, MemOpen, MemWalk } from "../../common/attest/memory-messages.js";
import { runDetached } from "../../common/detached.js";

/** Longest a challenge exchange may stay open on the provider: the compute runs inside it (the responder stops at the cutoff). */
const CHALLENGE_EXCHANGE_TIMEOUT_MS = 15 * 60_000;
/** A liveness probe issued further than this from our clock is refused (bounds replays; clocks are NTP-synced). */
const PROBE_MAX_AGE_MS = 60_000;
/** Default time between two scans for false liveness faults. */
const FALSE_FAULT_SCAN_INTERVAL_MS = 10_000;
/** Time between two prunings of old probe receipts. */
const RECEIPT_PRUNE_INTERVAL_MS = 3_600_000;
/** How long a provider remembers which attestor sent a challenge, for its open and result requests. */
const SESSION_TTL_MS = 15 * 60_000;

export type ProviderAttestationOptions = {
  /** Computes challenges: the CPU reference runner or a GPU runner (createRunner). The caller owns and closes it. */
  runner: Runner;
  /** This provider's machines as declared on-chain: a list, or a lookup the agent keeps current. */
  machines: readonly ProviderMachine[] | ((machineId: number) => ProviderMachine | undefined);
  /** A machine passed a challenge: the checked attestation, to carry in the machine's offers. */
  onAttestation?: (machineId: number, attestation: SignedAttestation) => void | Promise<void>;
  /**
   * Whether this provider holds `leaseId` active (heartbeats are signed only for those). Default:
   * reads the lease on-chain (cached for `leaseCacheMs`). The agent may pass its own lease table.
   */
  holdsLease?: (leaseId: bigint) => boolean | Promise<boolean>;
  /** Milliseconds between scans for false liveness faults to dispute (`attest.disputeFalseFaults`). Default 10 s. */
  falseFaultScanMs?: number;
  /** How long an on-chain lease read is reused. Default 2 s. */
  leaseCacheMs?: number;
  /** Runs the memory phase; default the runner's own (`runner.memory`, an external program's), else the CPU memory runner (exact, small sizes only). */
  memoryRunner?: MemoryRunner;
  /** A machine's active lease, for the one check budget of its challenges (ChallengeResponder `leaseOf`); absent: no budget is enforced. */
  leaseOf?: ChallengeResponderOptions["leaseOf"];
  /** Largest challenge accepted (int8 ops); default from `attest.maxChallengeTeraOps`. */
  maxOps?: bigint;
  now?: () => number;
};

export type ProviderAttestation = DaemonModule & {
  responder: ChallengeResponder;
  /** Attestors' probe receipts this provider keeps (evidence against a false liveness fault). */
  receipts: ProbeReceipts;
  /** The passes of this provider's machines of the last 20 minutes (evidence against a false capacity fault). */
  passes: PassedAttestations;
  /** Disputes false liveness faults (absent when `attest.disputeFalseFaults` is off or there is no wallet client). */
  disputer: FalseFaultDisputer | undefined;
};

type Session = { peer: string; attestor: Address; machineId: number; model: string; units: number; vramMiB: number };

/** The provider's local wallet, or a clear error. */
function providerAccount(daemon: Daemon): LocalAccount {
  const account = daemon.account;
  if (!account || account.type !== "local") {
    throw new NoProviderWalletError("Answering attestors needs the provider's wallet on this node", {
      metaMessages: ["Set chain.privateKey (or SUANLI_CHAIN__PRIVATE_KEY) to the provider's registered wallet."],
    });
  }
  return account;
}

/**
 * Registers the provider's attest and liveness handlers on the daemon's libp2p host. Stop the
 * returned module (or attach it to the daemon) to unregister them.
 */
export async function mountProviderAttestation(daemon: Daemon, options: ProviderAttestationOptions): Promise<ProviderAttestation> {
  const account = providerAccount(daemon);
  const logger: Logger = daemon.logger.child({ module: "attest-provider" });
  const now = options.now ?? Date.now;
  const provider = getAddress(account.address);
  const lookup = typeof options.machines === "function" ? options.machines : listLookup(options.machines);
  const isAttestor = (address: Address) => daemon.chainView.isAttestor(address);
  // The attestor set's size splits a lease's check budget (common/attest/bounds.ts); read at most once a minute.
  const attestorCount = new AttestorCount({ publicClient: daemon.chain.publicClient, registry: daemon.registry, now });

  const responder = new ChallengeResponder({
    provider,
    signer: account,
    machine: lookup,
    runner: options.runner,
    domain: daemon.domain,
    isAttestor,
    maxOps: options.maxOps ?? maxChallengeOps(daemon.config.attest),
    ...(options.leaseOf ? { leaseOf: options.leaseOf } : {}),
    attestorCount: () => attestorCount.get(),
    now,
    logger,
  });
  const sessions = new LRUCache<string, Session>({ max: 1_024, ttl: SESSION_TTL_MS });

  const passes = new PassedAttestations(daemon.store, now);
  const handleResult = async (result: ResultMessage, session: Session): Promise<void> => {
    if (result.outcome === "fail") {
      logger.warn("Machine failed an attestor's challenge", { machineId: session.machineId, attestor: session.attestor, reason: result.reason, detail: result.detail });
      return;
    }
    const verdict = await verifyAttestation(result.attestation, {
      domain: daemon.domain,
      isAttestor,
      now: Math.floor(now() / 1000),
      expected: { provider, machineId: session.machineId, model: modelHash(session.model), units: session.units, vramMiB: session.vramMiB },
    });
    if (!verdict.valid) {
      logger.warn("Attestation refused", { machineId: session.machineId, attestor: session.attestor, reason: verdict.reason });
      return;
    }
    if (verdict.attestor !== session.attestor) {
      logger.warn("Attestation refused", { machineId: session.machineId, attestor: session.attestor, reason: "signed by another attestor than the challenger" });
      return;
    }
    logger.info("Attestation received", {
      machineId: session.machineId,
      attestor: verdict.attestor,
      throughput: result.attestation.attestation.throughput,
      expiry: result.attestation.attestation.expiry,
    });
    // Kept apart from the offers (which carry each attestor's newest only): a pass inside a capacity fault's window
    // proves its signer's fault false (disputes/false-faults.ts).
    await passes
      .add(verdict.attestor, result.attestation)
      .catch((error: unknown) => logger.warn("Could not keep a passed attestation", { machineId: session.machineId, attestor: verdict.attestor }, error));
    await options.onAttestation?.(session.machineId, result.attestation);
  };

  // The memory phase runs inside the session of a GEMM challenge this node committed to, with the attestor that sent it.
  const memory = new MemoryResponder({
    provider,
    signer: account,
    domain: daemon.domain,
    runner: options.memoryRunner ?? options.runner.memory ?? new CpuMemoryRunner(),
    unitsOf: (challengeId) => sessions.get(challengeId)?.units,
    now,
  });
  const memorySessions = new LRUCache<string, string>({ max: 1_024, ttl: SESSION_TTL_MS });
  const answerMemory = async (request: MemChallenge | MemWalk | MemOpen, peer: string) => {
    try {
      if (request.type === "mem-challenge") {
        // Only the attestor of the GEMM challenge may start its memory phase.
        if (sessions.get(request.challengeId)?.peer !== peer) throw new ChallengeRefusedError("expired", "No challenge with this id from this peer.");
        memorySessions.set(request.id, peer);
        return await memory.fill(request);
      }
      if (memorySessions.get(request.id) !== peer) throw new ChallengeRefusedError("expired", "No memory phase with this id from this peer.");
      return request.type === "mem-walk" ? await memory.walk(request) : await memory.open(request);
    } catch (error) {
      refused();
      const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : undefined;
      logger.info("Memory phase refused", { id: request.id, peer, reason: (error as ChallengeRefusedError).reason ?? "runner_failed", ...(cause ? { cause } : {}) });
      return ChallengeResponder.refusal(request.id, error);
    }
  };

  // Refusals travel as answers (the attestor records them), and count as refused requests here.
  const refused = () => daemon.metrics.p2pRequestErrors.inc({ protocol: ATTEST_PROTOCOL, name: "ChallengeRefusedError" });
  const unhandleAttest = await handleProtocol(daemon.p2p.host, ATTEST_PROTOCOL, {
    requestSchema: attestRequestSchema,
    responseSchema: attestAnswerSchema,
    // A memory open request names up to 256 walks: more than a control message.
    maxMessageBytes: 4 * MAX_CONTROL_MESSAGE_BYTES,
    timeoutMs: CHALLENGE_EXCHANGE_TIMEOUT_MS,
    // A round challenges up to MAX_ROUND_MACHINES of this node's machines at once, one stream each.
    maxInboundStreamsPerPeer: MAX_ROUND_MACHINES + 2,
    onError: (error, peer) => {
      daemon.metrics.p2pRequestErrors.inc({ protocol: ATTEST_PROTOCOL, name: error.name });
      logger.debug("Attest request failed", { peer: peer.toString(), error: error.name });
    },
    handler: async (request, context) => {
      const peer = context.peer.toString();
      if (isLegacyV1(request)) {
        const legacy = { data: request };
        // A version-1 attestor (one tree for the whole machine): say which version this node speaks.
        logger.warn("Attest request in protocol v1 refused: this node speaks v2", { peer, type: legacy.data.type });
        refused();
        return ChallengeResponder.refusal(legacy.data.id ?? legacy.data.challengeId ?? `0x${"00".repeat(32)}`, new ChallengeRefusedError("unsupported_version", LEGACY_V1_MESSAGE));
      }
      if (request.type === "mem-challenge" || request.type === "mem-walk" || request.type === "mem-open") {
        return answerMemory(request, peer);
      }
      if (request.type === "challenge") {
        const challenge = request as ChallengeMessage;
        try {
          const commit = await responder.respond(challenge, { signal: context.signal });
          sessions.set(challenge.id, {
            peer,
            attestor: getAddress(challenge.attestor),
            machineId: challenge.machineId,
            model: challenge.model,
            units: challenge.units,
            vramMiB: challenge.vramMiB,
          });
          return commit;
        } catch (error) {
          const reason = (error as ChallengeRefusedError).reason ?? "runner_failed";
          // At start every attestor challenges at once: "busy" is the normal answer to all but one,
          // and the attestor retries later. Said as what it is, not as a refusal (issue #40 item 7).
          if (reason === "busy") logger.info("Challenge deferred: another one is being computed; the attestor retries later (nothing to do)", { challengeId: challenge.id, peer });
          else logger.info("Challenge refused", { challengeId: challenge.id, peer, reason });
          refused();
          // Out of bounds, attestor share, lease budget: signed, so the attestor can check it (common/attest/refusal.ts).
          return await responder.signedRefusal(challenge.id, error);
        }
      }
      const session = sessions.get(request.challengeId);
      // Only the attestor that sent a challenge may open its rows or report on it: a third peer
      // that learned the id could otherwise make the provider release the answer early.
      if (!session || session.peer !== peer) {
        refused();
        return ChallengeResponder.refusal(request.challengeId, new ChallengeRefusedError("expired", "No challenge with this id from this peer."));
      }
      if (request.type === "open") {
        try {
          return await responder.open(request);
        } catch (error) {
          refused();
          return ChallengeResponder.refusal(request.challengeId, error);
        }
      }
      sessions.delete(request.challengeId);
      await handleResult(request as ResultMessage, session);
      return { v: ATTEST_PROTOCOL_VERSION as typeof ATTEST_PROTOCOL_VERSION, type: "ack" as const, challengeId: request.challengeId };
    },
  });

  const leaseCache = new LRUCache<string, { held: boolean }>({ max: 10_000, ttl: options.leaseCacheMs ?? 2_000 });
  const holdsLease =
    options.holdsLease ??
    (async (leaseId: bigint) => {
      const key = leaseId.toString();
      const cached = leaseCache.get(key);
      if (cached) return cached.held;
      const lease = await readLease(daemon.chain.publicClient, daemon.market, leaseId);
      const held = lease.status === "Active" && lease.provider === provider;
      leaseCache.set(key, { held });
      return held;
    });

  const receipts = new ProbeReceipts(daemon.store, { domain: daemon.domain, now, logger });
  const unhandleLiveness = await handleProtocol(daemon.p2p.host, LIVENESS_PROTOCOL, {
    requestSchema: livenessProbeSchema,
    responseSchema: signedHeartbeatSchema,
    // A probe with its receipt is about 700 bytes.
    maxMessageBytes: 2_048,
    timeoutMs: 10_000,
    maxInboundStreamsPerPeer: 8,
    onError: (error, peer) => {
      daemon.metrics.p2pRequestErrors.inc({ protocol: LIVENESS_PROTOCOL, name: error.name });
      logger.debug("Liveness probe refused", { peer: peer.toString(), error: error.name });
    },
    handler: async (probe) => {
      if (probe.chainId !== daemon.deployment.chainId) {
        throw new WrongChainError(`This node serves chain ${daemon.deployment.chainId}, not ${probe.chainId}`);
      }
      // Cheapest first: the clock, the signature (native recovery), the cached attestor set; only
      // then a chain read and a signature of ours.
      if (Math.abs(now() - probe.issuedAtMs) > PROBE_MAX_AGE_MS) {
        throw new UnauthorizedProbeError(`The probe was issued ${Math.round((now() - probe.issuedAtMs) / 1000)} s from this node's clock; at most ${PROBE_MAX_AGE_MS / 1000} s`);
      }
      const fields = { leaseId: probe.leaseId, challenge: probe.challenge as Hex, attestor: probe.attestor, issuedAtMs: probe.issuedAtMs };
      const signer = recoverDigestSigner(livenessProbeDigest(daemon.domain, fields), probe.signature);
      if (signer !== probe.attestor) throw new UnauthorizedProbeError("The probe's signature is not its attestor's");
      if (!(await isAttestor(signer))) throw new UnauthorizedProbeError(`${signer} is not in the attestor set`);
      if (!(await holdsLease(probe.leaseId))) {
        throw new LeaseNotHeldError(`Lease ${probe.leaseId} is not an active lease of ${provider}`);
      }
      // Nothing the renter's task writes decides the answer (issue #34, finding 2): a heartbeat says this node
      // serves the lease. A task-liveness task gone silent is not faulted by the attestors; the provider's
      // agent ending its lease as the renter's side is not yet done (issue #34 keeps it open).
      // The attestor's receipt of its previous answered probe: kept as evidence against a false
      // liveness fault (disputes/probe-receipts.ts). A bad one is dropped; the probe is still answered.
      if (probe.receipt) {
        await receipts
          .accept(probe.leaseId, signer, probe.receipt)
          .catch((error: unknown) => logger.warn("Could not keep a probe receipt", { leaseId: probe.leaseId, attestor: signer }, error));
      }
      const heartbeat = { leaseId: probe.leaseId, challenge: probe.challenge as Hex, respondedAt: Math.floor(now() / 1000) };
      const signature = await signHeartbeat(account, daemon.domain, heartbeat);
      return { v: 1 as const, heartbeat, signature };
    },
  });

  // Receipts are evidence only if someone sends them: dispute false liveness faults of this provider's leases.
  let disputer: FalseFaultDisputer | undefined;
  const walletClient = daemon.chain.walletClient;
  if (daemon.config.attest.disputeFalseFaults && walletClient) {
    disputer = new FalseFaultDisputer({
      publicClient: daemon.chain.publicClient,
      walletClient,
      registry: daemon.registry,
      market: daemon.market,
      domain: daemon.domain,
      receipts,
      passes,
      provider,
      fromBlock: daemon.deployment.deploymentBlock,
      intervalMs: options.falseFaultScanMs ?? FALSE_FAULT_SCAN_INTERVAL_MS,
      logger: logger.child({ part: "false-faults" }),
    });
    await disputer.start();
  }
  const pruner = setInterval(() => runDetached(receipts.prune(), logger, "Pruning old probe receipts"), RECEIPT_PRUNE_INTERVAL_MS);
  pruner.unref();

  // The runner starts now (a GPU context takes seconds), not inside the first challenge's deadline.
  if (options.runner.warm) runDetached(options.runner.warm(), logger, "Starting the runner (the first challenge will try again)", { runner: options.runner.name });
  logger.info("Provider attestation mounted", { provider, runner: options.runner.name });
  return {
    name: "attest-provider",
    responder,
    receipts,
    passes,
    disputer,
    async stop() {
      clearInterval(pruner);
      await disputer?.stop();
      await unhandleAttest();
      await unhandleLiveness();
      await responder.close();
      await memory.close();
    },
  };
}

function listLookup(machines: readonly ProviderMachine[]): (machineId: number) => ProviderMachine | undefined {
  const byId = new Map(machines.map((machine) => [machine.machineId, machine]));
  return (machineId) => byId.get(machineId);
}

/** A version-1 GEMM message (memory-phase messages carry their own version, 1, and are not this). */
function isLegacyV1(message: z.output<typeof attestRequestSchema>): message is LegacyV1Message {
  return legacyV1MessageSchema.safeParse(message).success;
}
