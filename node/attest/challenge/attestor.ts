/**
 * The attestor's side of a proof-of-capacity challenge, as a transport-agnostic state machine:
 *
 *   const challenge = await attestor.startChallenge(claim);   // send challenge.message
 *   challenge.onCommit(commit, receivedAtMs)                   // → open request to send, or a failure
 *   await challenge.onOpen(rows, receivedAtMs)                 // → pass (signed attestation) or failure
 *   challenge.onTimeout(nowMs)                                 // when nothing came by timeoutAtMs
 *
 * Incoming messages are parsed here, so a transport hands over whatever JSON it read. Times are
 * the attestor's clock in unix milliseconds; the transport stamps `receivedAtMs` when a message
 * arrives, before anything else.
 *
 * A commit after the class deadline but before the cutoff is still opened and checked, so the
 * failure can say how fast the machine really is (`slow_for_class`, with the measured rate and
 * the fastest model it would qualify as); it never earns an attestation.
 */
import { bytesToHex, getAddress, type Address, type Hex, type LocalAccount, type TypedDataDomain } from "viem";
import type { SignedAttestation } from "../../../common/attest/attestation.js";
import { signAttestation } from "../../../common/chain/sign.js";
import { signChallenge } from "../../../common/attest/challenge.js";
import { commitDigest, gpusHash, type CommitFraudProof } from "../../../common/attest/commit.js";
import { duplicateDevice, rootsHash } from "../../../common/attest/units.js";
import { recoverDigestSigner } from "../../../common/eip712-recover.js";
import {
  commitMessageSchema,
  openResponseMessageSchema,
  refusalMessageSchema,
  ATTEST_PROTOCOL_VERSION,
  type ChallengeMessage,
  type CommitMessage,
  type FailureReason,
  type OpenRequestMessage,
} from "../../../common/attest/messages.js";
import {
  deriveChallengeParams,
  fastestClassFor,
  THROUGHPUT_CEILING_HEADROOM,
  unitInt8OpsPerSecond,
  type ChallengeParams,
  type ResolvedChallengeProfile,
} from "../../../common/attest/params.js";
import { verifyOpening, type RowRecomputer } from "../../../common/attest/verify.js";
import { canonicalGpuName, knownGpuNames, modelHash } from "../../../common/gpu.js";
import { describeIssues } from "../../../common/validation.js";
import type { Logger } from "../../log/logger.js";
import { UnknownGpuModelError } from "../../../common/attest/errors.js";
import { ChallengeStateError, PassWithheldError } from "../errors.js";
import { ccIdentitiesHash } from "../../../common/attest/cc.js";
import { checkCommitEvidence, type CcPolicy, type CcVerifiedUnit, DeviceRegistry, uuidKey } from "../cc/index.js";
import { pickIndices } from "./row-picks.js";

/** The machine a challenge tests, as declared on-chain (the caller checks it against the registry). */
export type MachineClaim = {
  provider: Address;
  machineId: number;
  model: string;
  units: number;
  vramMiB: number;
  /**
   * The machine's failure history at this attestor (failure-history.ts), signed into the attestation
   * on a pass: failures held and when the latest ended (unix s, 0 with none). Default none.
   */
  history?: { failures: number; lastFailureAt: number };
};

export type ChallengePass = {
  outcome: "pass";
  challengeId: Hex;
  /** int8 ops per second over the whole machine: ops / (commit received − challenge issued). */
  measuredThroughput: bigint;
  elapsedMs: number;
  attestation: SignedAttestation;
  /** The provider's signed commit (per-unit roots and devices, EIP-712 signature; the challenge id is the attestation's): the answer to a dispute of this attestation. */
  commit: PassCommit;
  /** What the units' confidential-computing evidence established (cc/cc-policy.ts), when the commit carried it and this attestor verifies it. */
  cc?: CcVerifiedUnit[];
};

/** What an attestor keeps of a passed challenge's provider-signed commit, to answer a dispute (AttestorStaking.answerDispute). */
export type PassCommit = { rowsPerUnit: number; roots: Hex[]; devices: string[]; signature: Hex };

export type ChallengeFailure = {
  outcome: "fail";
  challengeId: Hex;
  reason: FailureReason;
  detail: string;
  /** Set when the machine committed (late or not) and its rows checked out or were not yet checked. */
  measuredThroughput?: bigint;
  /** For slow_for_class: the fastest model whose requirement the measured rate meets, if any. */
  fastestFittingModel?: string;
  /**
   * For wrong_rows: the signed challenge, the provider's signed commit and the opened rows, which
   * prove the false answer to anyone (common/attest/commit.ts verifyCommitFraud).
   */
  evidence?: CommitFraudProof;
};

/**
 * A light check passed (an in-lease check sized to `rateShare` of the GPUs, docs/attestation.md
 * "In-lease checks"): correct rows in time, which proves the machine is still what it was. It signs
 * no attestation: one needs a full check, outside a lease.
 */
export type ChallengeLightPass = { outcome: "light_pass"; challengeId: Hex; measuredThroughput: bigint; elapsedMs: number };

export type ChallengeOutcome = ChallengePass | ChallengeLightPass | ChallengeFailure;
export type CommitResult = { outcome: "open"; request: OpenRequestMessage } | ChallengeFailure;

export type AttestorOptions = {
  /** The attestor's key: signs challenges and attestations. Must hold ATTESTOR_ROLE on-chain. */
  account: Pick<LocalAccount, "address" | "signTypedData">;
  /** suanliDomain(chainId, marketAddress). */
  domain: TypedDataDomain;
  profile: ResolvedChallengeProfile;
  /** How long an attestation stays valid. Default one day. */
  attestationTtlSeconds?: number;
  /** Row recomputation; default single-threaded inline. Nodes pass CpuRunner.recompute. */
  recompute?: RowRecomputer;
  /** Clock, unix ms. */
  now?: () => number;
  /** Source of the seeds and of the rows to open. */
  randomBytes?: (length: number) => Uint8Array;
  logger?: Logger;
  /** Roots remembered to catch replayed answers. Default 10 000. */
  rememberRoots?: number;
  /** `attest.cc` (cc/cc-policy.ts loadCcPolicy): verify the commits' confidential-computing evidence; absent: evidence is ignored. */
  cc?: CcPolicy;
  /** Which machine presented each GPU (UUIDs and CC identities); default in memory. The role passes one kept in level. */
  devices?: DeviceRegistry;
  /**
   * A GPU UUID a machine named in a passed challenge fails another machine's commit within this
   * many ms (`duplicate_gpus`). Default 0: off (the attestor role passes attest.attestor.gpuReuseWindowSeconds).
   */
  gpuReuseWindowMs?: number;
  /** Until when (unix s) a pass of the machine is withheld: a capacity fault of it this attestor signed (faults/faults.ts passHeldUntil). */
  passHeldUntil?: (provider: Address, machineId: number) => number | undefined;
};

function cryptoRandomBytes(length: number): Uint8Array {
  return globalThis.crypto.getRandomValues(new Uint8Array(length));
}

/** Issues challenges and remembers answers already seen (replay detection across challenges). */
export class Attestor {
  readonly address: Address;
  private readonly options: AttestorOptions;
  private readonly seenRoots = new Set<string>();
  /** Which machine presented each GPU last, by UUID and by CC identity (one GPU is not two machines). */
  readonly devices: DeviceRegistry;

  constructor(options: AttestorOptions) {
    this.options = options;
    this.address = getAddress(options.account.address);
    this.devices = options.devices ?? new DeviceRegistry();
  }

  get now(): number {
    return this.options.now ? this.options.now() : Date.now();
  }

  /**
   * Derives the parameters for the claim, draws a fresh seed, signs the challenge. `rateShare` < 1:
   * a light check (deriveChallengeParams), whose pass signs nothing. `issuedAtMs`: the issue time
   * the challenges of one round share (challenger.ts), default now.
   */
  async startChallenge(claim: MachineClaim, options: { rateShare?: number; issuedAtMs?: number } = {}): Promise<AttestorChallenge> {
    const model = canonicalGpuName(claim.model);
    if (!model) throw new UnknownGpuModelError(claim.model, knownGpuNames());
    const rateShare = options.rateShare ?? 1;
    const params = deriveChallengeParams(this.options.profile, { model, units: claim.units }, rateShare);
    const issuedAtMs = Math.floor(options.issuedAtMs ?? this.now);
    const message = await signChallenge(this.options.account, this.options.domain, {
      attestor: this.address,
      provider: getAddress(claim.provider),
      machineId: claim.machineId,
      model,
      units: claim.units,
      vramMiB: claim.vramMiB,
      seed: bytesToHex(this.random(32)),
      rowsPerUnit: params.rowsPerUnit,
      cols: params.cols,
      rounds: params.rounds,
      issuedAtMs,
      deadlineAtMs: issuedAtMs + params.deadlineMs,
      cutoffAtMs: issuedAtMs + params.cutoffMs,
    });
    this.options.logger?.info("Challenge issued", {
      challengeId: message.id,
      provider: message.provider,
      machineId: message.machineId,
      model,
      units: claim.units,
      rowsPerUnit: params.rowsPerUnit,
      deadlineMs: params.deadlineMs,
      ...(rateShare < 1 ? { rateShare } : {}),
    });
    return new AttestorChallenge(this, message, params, claim.history, rateShare < 1);
  }

  random(length: number): Uint8Array {
    return (this.options.randomBytes ?? cryptoRandomBytes)(length);
  }

  /** Records a committed root; false when it was seen before (an old answer sent again). */
  noteRoot(root: Hex): boolean {
    const key = root.toLowerCase();
    if (this.seenRoots.has(key)) return false;
    this.seenRoots.add(key);
    const cap = this.options.rememberRoots ?? 10_000;
    // Sets iterate in insertion order: drop the oldest.
    while (this.seenRoots.size > cap) this.seenRoots.delete(this.seenRoots.values().next().value!);
    return true;
  }

  /** @internal */
  get settings(): AttestorOptions {
    return this.options;
  }
}

type Phase = "awaiting_commit" | "awaiting_open" | "done";

export class AttestorChallenge {
  readonly message: ChallengeMessage;
  readonly params: ChallengeParams;
  private readonly attestor: Attestor;
  private phase: Phase = "awaiting_commit";
  private commit: { message: CommitMessage; receivedAtMs: number; late: boolean } | undefined;
  private ccUnits: CcVerifiedUnit[] | undefined;
  private openRequest: OpenRequestMessage | undefined;
  private openDeadlineAtMs: number | undefined;
  private finalOutcome: ChallengeOutcome | undefined;

  constructor(
    attestor: Attestor,
    message: ChallengeMessage,
    params: ChallengeParams,
    private readonly history: MachineClaim["history"] = undefined,
    /** A light check (in-lease): its pass signs no attestation. */
    readonly light = false,
  ) {
    this.attestor = attestor;
    this.message = message;
    this.params = params;
  }

  get id(): Hex {
    return this.message.id;
  }

  /** `awaiting_commit`, `awaiting_open` or `done`. */
  get state(): Phase {
    return this.phase;
  }

  get outcome(): ChallengeOutcome | undefined {
    return this.finalOutcome;
  }

  /** When the transport should call onTimeout if the awaited message has not come (unix ms). */
  get timeoutAtMs(): number | undefined {
    if (this.phase === "awaiting_commit") return this.message.cutoffAtMs;
    if (this.phase === "awaiting_open") return this.openDeadlineAtMs;
    return undefined;
  }

  private ensureOpen(): void {
    if (this.phase === "done") throw new ChallengeStateError(`Challenge ${this.id} has already ended (${this.finalOutcome?.outcome}).`);
  }

  private fail(reason: FailureReason, detail: string, extra: Partial<ChallengeFailure> = {}): ChallengeFailure {
    const failure: ChallengeFailure = { outcome: "fail", challengeId: this.id, reason, detail, ...extra };
    this.phase = "done";
    this.attestor.devices.unhold(this.id);
    this.finalOutcome = failure;
    this.attestor.settings.logger?.warn("Challenge failed", {
      challengeId: this.id,
      provider: this.message.provider,
      machineId: this.message.machineId,
      reason,
      detail,
      measuredThroughput: extra.measuredThroughput,
    });
    return failure;
  }

  private measured(receivedAtMs: number): bigint {
    const elapsed = Math.max(1, Math.round(receivedAtMs - this.message.issuedAtMs));
    return (this.params.ops * 1000n) / BigInt(elapsed);
  }

  /** Handles the provider's commit. Returns the open request to send, or the failure. */
  onCommit(input: unknown, receivedAtMs: number): CommitResult {
    this.ensureOpen();
    if (this.phase !== "awaiting_commit") return this.fail("malformed", "a second commit arrived");
    const parsed = commitMessageSchema.safeParse(input);
    if (!parsed.success) return this.fail("malformed", `commit: ${describe(commitMessageSchema, parsed.error)}`);
    const commit = parsed.data;
    if (commit.challengeId !== this.id) return this.fail("replayed", `the commit is for challenge ${commit.challengeId}, not ${this.id}`);
    if (receivedAtMs > this.message.cutoffAtMs) {
      return this.fail("late_commit", `the commit came ${receivedAtMs - this.message.issuedAtMs} ms after the challenge, past the cutoff of ${this.params.cutoffMs} ms`);
    }
    if (commit.rowsPerUnit !== this.message.rowsPerUnit || commit.roots.length !== this.message.units) {
      return this.fail(
        "malformed",
        `the commit covers ${commit.roots.length} units of ${commit.rowsPerUnit} rows, the challenge has ${this.message.units} units of ${this.message.rowsPerUnit}`,
      );
    }
    // Only a commit the provider signed is opened: its wrong rows are then evidence against it.
    const signer = recoverDigestSigner(commitDigest(this.attestor.settings.domain, commit), commit.signature);
    if (!signer || signer.toLowerCase() !== this.message.provider.toLowerCase()) {
      return this.fail("bad_commit_signature", `the commit is signed by ${signer ?? "no valid key"}, not by the provider ${this.message.provider}`);
    }
    // One device per unit: a GPU that serves two units' sub-challenges is one unit, not two.
    const duplicate = duplicateDevice(commit.devices);
    if (duplicate !== undefined) return this.fail("duplicate_gpus", `two units' sub-challenges name the same GPU ${duplicate}: each unit must be its own device`);
    if (this.attestor.settings.profile.requireDevices && commit.devices.length !== this.message.units) {
      return this.fail("missing_gpus", `the commit names no GPU per unit; this attestor requires the UUID of each of the ${this.message.units} units' devices`);
    }
    // One GPU, one machine: a UUID another machine passed with within the window, or whose commit in the same round came first, is not this one's.
    const windowMs = this.attestor.settings.gpuReuseWindowMs ?? 0;
    const keys = commit.devices.map(uuidKey);
    const machine = machineKey(this.message.provider, this.message.machineId);
    const held = windowMs > 0 ? this.attestor.devices.claimInFlight(keys, machine, this.id, receivedAtMs, windowMs, receivedAtMs + this.params.openTimeoutMs + 60_000) : undefined;
    if (held) {
      const when = held.agoMs === undefined ? "committed first in the same round" : `passed ${Math.round(held.agoMs / 1000)} s ago`;
      return this.fail("duplicate_gpus", `GPU ${commit.devices[keys.indexOf(held.device)]} backs machine ${held.machine} (${when}): one GPU cannot back two machines`);
    }
    if (new Set(commit.roots.map((root) => root.toLowerCase())).size !== commit.roots.length) {
      return this.fail("replayed", "two units committed the same root: each unit's leaves are bound to the unit, so one of them is not its answer");
    }
    for (const root of commit.roots) {
      if (!this.attestor.noteRoot(root)) return this.fail("replayed", "a unit's root was committed before, for another challenge");
    }
    const cc = checkCommitEvidence(this.attestor.settings.cc, this.attestor.devices, this.message, commit.roots, commit.cc, receivedAtMs);
    if (!cc.ok) return this.fail("cc_evidence", cc.detail);
    this.ccUnits = cc.units;
    const late = receivedAtMs > this.message.deadlineAtMs;
    // The evidence has been checked; what is kept (transcripts, fraud proofs, disputes) is the signed commit alone.
    const { cc: _evidence, ...signed } = commit;
    this.commit = { message: signed, receivedAtMs, late };
    // Rows are drawn per unit, after the commit fixed every unit's tree: each unit is sampled.
    const picks = Array.from({ length: this.message.units }, (_, unit) =>
      pickIndices(this.params.openRowsPerUnit, this.message.rowsPerUnit, (n) => this.attestor.random(n)).map((index) => ({ unit, index })),
    ).flat();
    this.openRequest = { v: ATTEST_PROTOCOL_VERSION, type: "open", challengeId: this.id, picks };
    this.openDeadlineAtMs = receivedAtMs + this.params.openTimeoutMs;
    this.phase = "awaiting_open";
    return { outcome: "open", request: this.openRequest };
  }

  /** Checks the opened rows. Returns the pass (with the signed attestation; a light check's signs none) or the failure. */
  async onOpen(input: unknown, receivedAtMs: number): Promise<ChallengeOutcome> {
    this.ensureOpen();
    if (this.phase !== "awaiting_open") return this.fail("malformed", "rows arrived before a commit");
    const parsed = openResponseMessageSchema.safeParse(input);
    if (!parsed.success) return this.fail("malformed", `rows: ${describe(openResponseMessageSchema, parsed.error)}`);
    const response = parsed.data;
    if (response.challengeId !== this.id) return this.fail("replayed", `the rows are for challenge ${response.challengeId}, not ${this.id}`);
    if (receivedAtMs > this.openDeadlineAtMs!) return this.fail("late_open", `the rows came more than ${this.params.openTimeoutMs} ms after the open request`);
    const commit = this.commit!;
    // Nothing may drive the challenge while the rows are checked.
    this.phase = "done";
    let check: Awaited<ReturnType<typeof verifyOpening>>;
    try {
      check = await verifyOpening({
        challengeId: this.id,
        seed: this.message.seed,
        rowsPerUnit: this.message.rowsPerUnit,
        cols: this.message.cols,
        rounds: this.message.rounds,
        roots: commit.message.roots,
        picks: this.openRequest!.picks,
        response,
        recompute: this.attestor.settings.recompute,
      });
    } catch (error) {
      // Our own verifier failed (e.g. a worker crashed): not the provider's fault, the rows may be retried.
      this.phase = "awaiting_open";
      throw error;
    }
    const measuredThroughput = this.measured(commit.receivedAtMs);
    if (!check.ok) {
      const evidence: CommitFraudProof | undefined = check.reason === "wrong_rows" ? { challenge: this.message, commit: commit.message, rows: response.rows } : undefined;
      return this.fail(check.reason, check.detail, { measuredThroughput, ...(evidence ? { evidence } : {}) });
    }
    if (commit.late) {
      const fits = fastestClassFor(this.attestor.settings.profile, Number(measuredThroughput), this.message.units);
      return this.fail(
        "slow_for_class",
        `correct rows, but committed ${commit.receivedAtMs - this.message.issuedAtMs} ms after the challenge; a ${this.message.model} × ${this.message.units} had ${this.params.deadlineMs} ms`,
        { measuredThroughput, fastestFittingModel: fits },
      );
    }
    // The class's ceiling binds: a rate no card of the claimed class reaches is another class's
    // (a faster card must claim its own class, or hold its commit, which the registry of its UUID
    // and the memory phase then bound; docs/attestation.md "One GPU, one machine").
    const ceiling = this.ceilingOpsPerSecond();
    if (measuredThroughput > ceiling) {
      return this.fail(
        "too_fast_for_class",
        `correct rows committed ${commit.receivedAtMs - this.message.issuedAtMs} ms after the challenge: ${measuredThroughput} ops/s, above the ${ceiling} ops/s no ${this.message.model} × ${this.message.units} reaches; claim the class the machine is`,
        { measuredThroughput },
      );
    }
    const elapsedMs = commit.receivedAtMs - this.message.issuedAtMs;
    if (this.light) {
      this.finalOutcome = { outcome: "light_pass", challengeId: this.id, measuredThroughput, elapsedMs };
      return this.finalOutcome;
    }
    const issuedAt = Math.floor(this.attestor.now / 1000);
    const heldUntil = this.attestor.settings.passHeldUntil?.(this.message.provider, this.message.machineId);
    if (heldUntil !== undefined && issuedAt <= heldUntil) {
      this.phase = "done";
      throw new PassWithheldError(`No pass of machine ${this.message.machineId} before ${heldUntil + 1}: this attestor signed a capacity fault of it within its fault window`);
    }
    const ttl = this.attestor.settings.attestationTtlSeconds ?? 86_400;
    const maxUint64 = 2n ** 64n - 1n;
    const attestation = await signAttestation(this.attestor.settings.account, this.attestor.settings.domain, {
      provider: this.message.provider,
      machineId: this.message.machineId,
      model: modelHash(this.message.model),
      units: this.message.units,
      vramMiB: this.message.vramMiB,
      throughput: measuredThroughput > maxUint64 ? maxUint64 : measuredThroughput,
      issuedAt,
      expiry: issuedAt + ttl,
      // The transcript's keys: a provider or anyone can hold the attestor to this challenge (docs/attestation-threats.md, "Slashing a forged attestation").
      challengeId: this.id,
      root: rootsHash(commit.message.roots),
      gpus: gpusHash(commit.message.devices),
      // What this attestor verified of the GPUs themselves (attest.cc): one device per unit, chained to the pinned root.
      cc: ccIdentitiesHash(this.ccUnits ?? []),
      // A pass after failures says so: the history only time clears (failure-history.ts).
      failures: Math.min(65_535, this.history?.failures ?? 0),
      lastFailureAt: this.history?.lastFailureAt ?? 0,
    });
    const pass: ChallengePass = {
      outcome: "pass",
      challengeId: this.id,
      measuredThroughput,
      elapsedMs,
      attestation,
      commit: { rowsPerUnit: commit.message.rowsPerUnit, roots: [...commit.message.roots], devices: [...commit.message.devices], signature: commit.message.signature },
      ...(this.ccUnits ? { cc: this.ccUnits } : {}),
    };
    this.finalOutcome = pass;
    if ((this.attestor.settings.gpuReuseWindowMs ?? 0) > 0) {
      this.attestor.devices.record(pass.commit.devices.map(uuidKey), machineKey(this.message.provider, this.message.machineId), this.attestor.now, "uuid:");
    }
    this.attestor.devices.unhold(this.id);
    this.attestor.settings.logger?.info("Challenge passed", {
      challengeId: this.id,
      provider: this.message.provider,
      machineId: this.message.machineId,
      measuredThroughput,
      elapsedMs: pass.elapsedMs,
    });
    return pass;
  }

  /** The fastest the claim can physically go: the class's datasheet rate (this profile's) × units × the headroom of throughputBand. */
  private ceilingOpsPerSecond(): bigint {
    const overrides = this.attestor.settings.profile.classes[this.message.model.split("/")[0]!];
    return BigInt(Math.ceil(unitInt8OpsPerSecond(this.message.model, overrides) * this.message.units * THROUGHPUT_CEILING_HEADROOM));
  }

  /** The provider declined the challenge (or its runner failed). */
  onRefused(input: unknown): ChallengeFailure {
    this.ensureOpen();
    const parsed = refusalMessageSchema.safeParse(input);
    if (!parsed.success) return this.fail("malformed", `refusal: ${describe(refusalMessageSchema, parsed.error)}`);
    if (parsed.data.challengeId !== this.id) return this.fail("replayed", `the refusal is for challenge ${parsed.data.challengeId}`);
    return this.fail("refused", `${parsed.data.reason}: ${parsed.data.message}`);
  }

  /** Call when nothing arrived by `timeoutAtMs`; returns the failure, or undefined if it is not time yet. */
  onTimeout(nowMs: number): ChallengeFailure | undefined {
    this.ensureOpen();
    if (this.phase === "awaiting_commit" && nowMs > this.message.cutoffAtMs) return this.fail("late_commit", `no commit within ${this.params.cutoffMs} ms`);
    if (this.phase === "awaiting_open" && nowMs > this.openDeadlineAtMs!) {
      return this.fail("late_open", `no rows within ${this.params.openTimeoutMs} ms of the open request`, { measuredThroughput: this.measured(this.commit!.receivedAtMs) });
    }
    return undefined;
  }
}

/** The registry's name of a machine: `<provider lowercase>/<machine id>`. */
export function machineKey(provider: Address, machineId: number): string {
  return `${provider.toLowerCase()}/${machineId}`;
}

function describe(schema: Parameters<typeof describeIssues>[0], error: Parameters<typeof describeIssues>[1]): string {
  return describeIssues(schema, error)
    .map((issue) => `${issue.path || "(root)"}: ${issue.message}`)
    .join("; ");
}
