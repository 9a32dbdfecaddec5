import { multiaddr } from "@multiformats/multiaddr";
import { z } from "zod";
import { challengeProfileSchema } from "../../common/attest/params.js";
import { memoryProfileSchema } from "../../common/attest/memory-params.js";
import { canonicalGpuName, knownGpuNames } from "../../common/gpu.js";

/**
 * Options of attestation (config key `attest`): the challenge profile an attestor issues, how
 * long its attestations last, the runner a provider computes challenges with, and the attestor
 * role's schedule, liveness probes and fault exchange.
 * Documented in docs/configuration.md; the reasoning in docs/attestation.md.
 */
export const attestRunnerOptionsSchema = z
  .strictObject({
    /** `cpu`: the reference runner on worker threads; `external`: a program speaking the runner contract (a GPU runner). */
    kind: z.enum(["cpu", "external"]).default("cpu"),
    /** CPU runner worker threads; default: the machine's available parallelism. */
    workers: z.number().int().min(1).max(1024).optional(),
    /** External runner: the program to start. */
    command: z.string().min(1).optional(),
    /** External runner: its arguments. */
    args: z.array(z.string()).default([]),
    /** External runner: time to print its hello line. */
    startTimeoutMs: z.number().int().min(100).max(600_000).default(30_000),
  })
  .refine((runner) => runner.kind !== "external" || runner.command !== undefined, {
    message: "attest.runner.command is required when attest.runner.kind is external",
    path: ["command"],
  });

/** A multiaddr that names its peer: `/ip4/10.0.0.7/tcp/4001/p2p/12D3Koo…`. */
const peerAddrSchema = z
  .string()
  .min(1)
  .max(512)
  .refine(
    (value) => {
      try {
        return multiaddr(value)
          .getComponents()
          .some((component) => component.name === "p2p");
      } catch {
        return false;
      }
    },
    { message: "expected a multiaddr ending in /p2p/<peer id>, such as /ip4/10.0.0.7/tcp/4001/p2p/12D3KooW…" },
  );

/**
 * The attestor role (`npx suanli attestor start`): which machines it challenges and when, and which
 * other attestors it exchanges faults with.
 */
export const attestorRoleOptionsSchema = z.strictObject({
  /** How often the offer book is scanned for machines due a challenge. */
  scheduleIntervalMs: z.number().int().min(100).max(86_400_000).default(60_000),
  /**
   * A machine is challenged again once this attestor's own attestation of it has less than this
   * left. Six hours before a one-day expiry: a provider never goes unattested while the attestor runs.
   */
  refreshBeforeExpirySeconds: z
    .number()
    .int()
    .min(0)
    .max(30 * 86_400)
    .default(21_600),
  /**
   * After a failed challenge, a machine waits this long for the next one (scheduled or requested,
   * forced included; an in-lease check never waits), doubled for each further failure it holds in
   * its failure history, up to `maxRetryAfterFailureSeconds` (node/attest/challenge/failure-history.ts).
   */
  retryAfterFailureSeconds: z
    .number()
    .int()
    .min(0)
    .max(30 * 86_400)
    .default(300),
  /**
   * The longest wait after failures. With the defaults (300 s doubling to 6 h) a machine that fails
   * every try gets at most 10 challenges in any 24 hours (docs/attestation-threats.md, "Retrying").
   */
  maxRetryAfterFailureSeconds: z
    .number()
    .int()
    .min(0)
    .max(30 * 86_400)
    .default(21_600),
  /**
   * How long a failed challenge stays in the machine's failure history: it counts towards the wait
   * and is signed into the machine's attestations (`failures`, `lastFailureAt`) until then, whatever
   * passes after it. A week.
   */
  failureHistorySeconds: z
    .number()
    .int()
    .min(0)
    .max(90 * 86_400)
    .default(604_800),
  /**
   * Challenge requests (`/suanli/attest-request/1.0.0`) one requester (its Noise-authenticated peer
   * id) may have answered per hour, cached answers included; beyond it the request is refused
   * `backoff` with when to retry. A requested challenge never leads to a fault (docs/attestation.md,
   * "Requests from anyone").
   */
  requestsPerRequesterPerHour: z.number().int().min(1).max(3_600).default(30),
  /** Challenges in flight at once: each recomputes opened rows on this machine's CPU. */
  maxConcurrentChallenges: z.number().int().min(1).max(64).default(2),
  /** Challenge results kept per machine in the database (older ones are pruned). */
  keepResultsPerMachine: z.number().int().min(1).max(1_000).default(20),
  /**
   * Other attestors to exchange faults with, beyond the peers this node meets on the network that
   * serve the fault protocol. Trust never comes from this list: every signature is checked against
   * the on-chain attestor set.
   */
  peers: z.array(peerAddrSchema).max(64).default([]),
  /**
   * A GPU UUID that one machine named in a passed challenge may not be named for another machine
   * (any provider's) within this many seconds: the commit fails `duplicate_gpus` (docs/attestation.md,
   * "One GPU, one machine"). One day, the attestation's lifetime: while one machine's attestation
   * stands on a card, no other machine's can. 0 turns the check off.
   */
  gpuReuseWindowSeconds: z
    .number()
    .int()
    .min(0)
    .max(30 * 86_400)
    .default(86_400),
});

/**
 * Liveness probes of providers that hold active leases, and the QoS window after which an
 * unresponsive provider is faulted. Defaults suit a devnet; see docs/attestation.md ("Liveness").
 */
export const livenessOptionsSchema = z.strictObject({
  /** Probe providers of active leases (attestor role). */
  enabled: z.boolean().default(true),
  /** Time between two probes of one lease. */
  probeIntervalMs: z.number().int().min(100).max(3_600_000).default(2_000),
  /** A probe not answered within this counts as failed. */
  probeTimeoutMs: z.number().int().min(100).max(60_000).default(5_000),
  /**
   * A provider that has not answered for longer than this is faulted. 30 s suits a devnet; on a
   * real network choose minutes: it is the outage a renter pays for before the SLA credit applies.
   * At most 300 s: observedAt is the start of the outage, and the market refuses a fault more than
   * FAULT_SUBMISSION_WINDOW (600 s) after it, so the window plus the backup delay must leave time to
   * collect the quorum and land the transaction.
   */
  qosWindowSeconds: z.number().int().min(1).max(300).default(30),
  /** Failed probes in a row needed before a fault is proposed, whatever the window. */
  minFailedProbes: z.number().int().min(1).max(1_000).default(2),
  /** Probes in flight at once. */
  maxConcurrentProbes: z.number().int().min(1).max(1_024).default(32),
  /**
   * An attestor that co-signed a fault submits the quorum itself when the lease is still active
   * this long after it signed (the proposer may have gone away). A minute leaves the proposer's
   * own transaction time to be mined first, so two submitters rarely both pay gas.
   */
  backupSubmitDelayMs: z.number().int().min(0).max(120_000).default(60_000),
});

/**
 * The memory phase (docs/attestation.md, "Memory phase"), run by the attestor after a passed GEMM
 * phase. Off by default: the external (GPU) runner contract has no memory operations yet, so
 * turning it on would fail every honest GPU provider until a GPU memory runner exists.
 */
export const memoryOptionsSchema = z.strictObject({
  enabled: z.boolean().default(false),
  profile: memoryProfileSchema.prefault({}),
});

/**
 * Confidential-computing evidence (docs/attestation-threats.md, "Confidential-computing evidence"): the
 * attestor verifies the per-unit GPU evidence a commit carries against these roots. Off while
 * `rootFiles` is empty (evidence is then ignored).
 */
export const ccOptionsSchema = z
  .strictObject({
    /** Fail a commit that carries no evidence (`cc_evidence`): only for attestors whose providers all run CC-mode GPUs. */
    required: z.boolean().default(false),
    /** PEM files of the device identity roots to trust: NVIDIA's device identity CA in production. */
    rootFiles: z.array(z.string().min(1).max(4096)).max(8).default([]),
    /**
     * Board key (`<project>-<project SKU>-<chip SKU>`, from the evidence) → GPU class. Empty: the
     * check stops at the chip (a GH100 backs H100 and H200 alike). Given: a board not listed fails.
     */
    boards: z
      .record(
        z.string().regex(/^[0-9A-Za-z]{1,16}-[0-9A-Za-z]{1,16}-[0-9A-Za-z]{1,16}$/, "a board key is <project>-<project SKU>-<chip SKU>, e.g. 1010-0200-882"),
        z
          .string()
          .refine((name) => canonicalGpuName(name) !== undefined, { message: `expected a known GPU class name: ${knownGpuNames().join(", ")}` })
          .transform((name) => canonicalGpuName(name)!),
      )
      .default({}),
    /**
     * NVIDIA's reference integrity manifests (RIMs): the golden firmware measurements a GPU's
     * report is compared with (docs/attestation-threats.md, "Confidential-computing evidence in a
     * challenge"). `files`: RIM XML files (one per VBIOS and per driver version in use, from
     * NVIDIA's RIM service), each verified at start-up to one of `rootFiles` (NVIDIA's RIM root,
     * another root than the devices'). `required`: a unit whose VBIOS or driver has no valid RIM
     * here fails; otherwise what the RIMs here cover is compared, and the rest is not.
     */
    rims: z
      .strictObject({
        rootFiles: z.array(z.string().min(1).max(4096)).max(8).default([]),
        files: z.array(z.string().min(1).max(4096)).max(256).default([]),
        required: z.boolean().default(false),
      })
      .refine((r) => r.files.length === 0 || r.rootFiles.length > 0, { message: "attest.cc.rims.files needs attest.cc.rims.rootFiles (NVIDIA's RIM root)", path: ["rootFiles"] })
      .refine((r) => !r.required || r.files.length > 0, { message: "attest.cc.rims.required needs attest.cc.rims.files", path: ["files"] })
      .prefault({}),
    /**
     * Every unit's evidence must report the host's CC mode ON and the GPUs ready (`mode`: the
     * output of `nvidia-smi conf-compute -f` and `-grs`); a unit whose report says OFF, DEVTOOLS or
     * not-ready, or says nothing, fails `cc_evidence` (`cc_mode`). The host's word: the signed
     * report carries no CC-mode field. false accepts any mode (e.g. to test with CC off).
     */
    requireCcMode: z.boolean().default(true),
    /**
     * Revocation, offline: CRL files (DER or PEM), NVIDIA's as the release bundles them
     * (ops/nvidia-crl/). A certificate a CRL signed by its issuer lists fails the unit (`revoked`).
     * With `required`, every certificate of a unit's chain that names a CRL distribution point
     * needs a fresh CRL of its issuer here (`revocation_unknown` otherwise): not past its
     * nextUpdate and issued at most `maxAgeDays` ago.
     */
    crl: z
      .strictObject({
        files: z.array(z.string().min(1).max(4096)).max(64).default([]),
        maxAgeDays: z.number().int().min(1).max(365).default(90),
        required: z.boolean().default(false),
      })
      .prefault({}),
    /** A GPU presented for one machine may not answer for another within this many seconds. */
    reuseWindowSeconds: z
      .number()
      .int()
      .min(0)
      .max(30 * 86_400)
      .default(86_400),
  })
  .refine((o) => !o.required || o.rootFiles.length > 0, { message: "attest.cc.required needs attest.cc.rootFiles (the roots to verify evidence against)", path: ["rootFiles"] });

/**
 * In-lease capacity checks (docs/attestation.md, "In-lease checks"): an attestor challenges each
 * leased machine at random times, within the share of the lease its offer announces, and proposes
 * a capacity fault (kind 2) when the machine fails.
 */
export const leaseChecksOptionsSchema = z
  .strictObject({
    /** Challenge leased machines (needs `attest.liveness.enabled`: the lease tracker and the fault exchange). */
    enabled: z.boolean().default(true),
    /** How often the active leases are looked at for a check that is due. */
    tickMs: z.number().int().min(50).max(600_000).default(5_000),
    /** The cost assumed for a lease's first check, before one was measured (the budget counts measured durations). */
    assumedChallengeMs: z.number().int().min(100).max(600_000).default(15_000),
    /**
     * The share of each GPU an in-lease (light) check needs: its rows, and so its required rate,
     * are this share of a full challenge's in the same time, so an honest machine answers it while
     * the renter's task uses the rest. Its pass signs no attestation.
     */
    rateShare: z.number().min(0.05).max(1).default(0.25),
    /**
     * A light check that fails other than with wrong rows (slow, late, refused...) leads to a
     * capacity fault only when at least this many of the lease's last `failureWindow` light checks
     * by this attestor failed; wrong rows fault at once. The co-signer applies the same rule.
     */
    failuresToFault: z.number().int().min(1).max(100).default(3),
    failureWindow: z.number().int().min(1).max(100).default(4),
  })
  .refine((o) => o.failuresToFault <= o.failureWindow, {
    message: "attest.leaseChecks.failuresToFault must be at most attest.leaseChecks.failureWindow",
    path: ["failuresToFault"],
  });

export const attestOptionsSchema = z.strictObject({
  challenge: challengeProfileSchema.prefault({}),
  memory: memoryOptionsSchema.prefault({}),
  cc: ccOptionsSchema.prefault({}),
  /** Validity of an attestation this node signs, seconds. One day: machines are re-challenged daily. */
  attestationTtlSeconds: z
    .number()
    .int()
    .min(60)
    .max(30 * 86_400)
    .default(86_400),
  /** Largest challenge a provider computes, in tera-ops (10¹² int8 ops); larger ones are refused. */
  maxChallengeTeraOps: z.number().positive().max(1e9).default(1e6),
  runner: attestRunnerOptionsSchema.prefault({}),
  attestor: attestorRoleOptionsSchema.prefault({}),
  liveness: livenessOptionsSchema.prefault({}),
  leaseChecks: leaseChecksOptionsSchema.prefault({}),
  /**
   * Provider: dispute a liveness fault of one of this provider's leases that an attestor signed
   * while its own probe receipt says it heard from the provider inside the fault window
   * (AttestorStaking.disputeFault, from the provider's wallet; docs/provider.md). Needs the
   * attestor staking on the registry; the provider is owed the disputer's share of the slash.
   */
  disputeFalseFaults: z.boolean().default(true),
});
export type AttestOptions = z.output<typeof attestOptionsSchema>;
export type AttestorRoleOptions = z.output<typeof attestorRoleOptionsSchema>;
export type LivenessOptions = z.output<typeof livenessOptionsSchema>;
export type MemoryOptions = z.output<typeof memoryOptionsSchema>;
export type CcOptions = z.output<typeof ccOptionsSchema>;
export type LeaseChecksOptions = z.output<typeof leaseChecksOptionsSchema>;

/**
 * Why this attestor may never reach a fault quorum, or undefined. Attestors find each other only
 * through `attest.attestor.peers` and the peers they are connected to (identify): with the DHT off
 * and no peers listed, nothing connects one attestor to another (a shared bootstrap node connects
 * each to it, not to each other), so every fault it proposes keeps its own signature alone.
 */
export function faultPeeringWarning(o: { peers: readonly string[]; dhtEnabled: boolean; quorum: number; livenessEnabled: boolean }): string | undefined {
  if (!o.livenessEnabled || o.quorum <= 1 || o.peers.length > 0 || o.dhtEnabled) return undefined;
  return (
    `faults need ${o.quorum} attestor signatures, but attest.attestor.peers is empty and the DHT is off (p2p.dht.enabled): ` +
    "this attestor meets another only if that one connects to it, and a fault it proposes may never reach the quorum. " +
    "List the other attestors in attest.attestor.peers (/ip4/…/tcp/…/p2p/<peer id>)"
  );
}
