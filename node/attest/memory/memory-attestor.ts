/**
 * The attestor's side of the memory phase (common/attest/memory.ts) as a transport-agnostic
 * state machine, like AttestorChallenge:
 *
 *   const phase = MemoryPhase.start({ profile, claim, challengeId, provider, domain });  // send phase.message
 *   phase.onFilled(filled, receivedAtMs)   // → the walk message to send (nonce), or a failure
 *   await phase.onCommit(commit, receivedAtMs)  // → the open request, or a failure
 *   phase.onWalks(walks, receivedAtMs)     // → pass or failure
 *
 * All units run at once and each is timed at the claimed class's per-unit rate: the deadline is
 * the one a single honest unit needs for its own buffer and walks, so units cannot borrow time
 * from one another. Each unit's root is bound to its GPU UUID by the provider's signature.
 */
import { bytesToHex, hexToBytes, type Address, type Hex, type TypedDataDomain } from "viem";
import {
  memChallengeId,
  memCommitSchema,
  memCommitSigner,
  memFilledSchema,
  memWalksSchema,
  MEMORY_PROTOCOL_VERSION,
  type MemChallenge,
  type MemCommit,
  type MemOpen,
  type MemoryFailureReason,
  type MemWalk,
} from "../../../common/attest/memory-messages.js";
import { deriveMemoryParams, type MemoryClaim, type MemoryParams, type MemoryProfile } from "../../../common/attest/memory-params.js";
import { recomputeWalk, walkLeaf } from "../../../common/attest/memory.js";
import { treeDepth, verifyMerkleProof } from "../../../common/attest/merkle.js";
import { ChallengeStateError } from "../errors.js";

export type MemoryPass = {
  outcome: "pass";
  id: Hex;
  roots: Hex[];
  gpus: string[];
  fillMs: number;
  walkMs: number;
};
export type MemoryFailure = { outcome: "fail"; id: Hex; reason: MemoryFailureReason; detail: string; fillMs?: number; walkMs?: number };
export type MemoryOutcome = MemoryPass | MemoryFailure;

export type MemoryPhaseOptions = {
  profile: MemoryProfile;
  claim: MemoryClaim;
  /** The GEMM challenge whose session this runs in. */
  challengeId: Hex;
  /** Whose wallet must sign the commit. */
  provider: Address;
  domain: TypedDataDomain;
  now?: () => number;
  randomBytes?: (length: number) => Uint8Array;
};

/** A zod error as one line: "path: message; …". */
function describeIssues(error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] }): string {
  return error.issues
    .map((issue) => `${issue.path.map(String).join(".") || "(root)"}: ${issue.message}`)
    .join("; ")
    .slice(0, 500);
}

type Phase = "awaiting_fill" | "awaiting_commit" | "awaiting_walks" | "done";

const cryptoRandom = (length: number) => globalThis.crypto.getRandomValues(new Uint8Array(length));

/** A uniform integer in [0, bound) from the random source (rejection sampling). */
function uniform(bound: number, random: (length: number) => Uint8Array): number {
  const limit = Math.floor(2 ** 32 / bound) * bound;
  for (let i = 0; i < 10_000; i++) {
    const b = random(4);
    const value = ((b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!) >>> 0;
    if (value < limit) return value % bound;
  }
  throw new ChallengeStateError("The random source did not produce a usable index.");
}

export class MemoryPhase {
  readonly message: MemChallenge;
  readonly params: MemoryParams;
  private phase: Phase = "awaiting_fill";
  private fillMs: number | undefined;
  private walkMessage: MemWalk | undefined;
  private commit: MemCommit | undefined;
  private walkMs: number | undefined;
  private openRequest: MemOpen | undefined;
  private openDeadlineAtMs = 0;
  private result: MemoryOutcome | undefined;

  private constructor(
    private readonly options: MemoryPhaseOptions,
    message: MemChallenge,
    params: MemoryParams,
  ) {
    this.message = message;
    this.params = params;
  }

  /** Sizes the phase for the claim and draws a fresh seed per unit. */
  static start(options: MemoryPhaseOptions): MemoryPhase {
    const params = deriveMemoryParams(options.profile, options.claim);
    const random = options.randomBytes ?? cryptoRandom;
    const issuedAtMs = Math.floor((options.now ?? Date.now)());
    const fields = {
      challengeId: options.challengeId,
      seeds: Array.from({ length: params.units }, () => bytesToHex(random(32))),
      words: params.words,
      hashIterations: params.hashIterations,
      walks: params.walks,
      steps: params.steps,
      issuedAtMs,
      fillDeadlineAtMs: issuedAtMs + params.fillDeadlineMs,
      fillCutoffAtMs: issuedAtMs + params.fillCutoffMs,
    };
    const message: MemChallenge = { v: MEMORY_PROTOCOL_VERSION, type: "mem-challenge", ...fields, id: memChallengeId(fields) };
    return new MemoryPhase(options, message, params);
  }

  get id(): Hex {
    return this.message.id;
  }

  get state(): Phase {
    return this.phase;
  }

  get outcome(): MemoryOutcome | undefined {
    return this.result;
  }

  /** When the awaited message is overdue (unix ms): call onTimeout then. */
  get timeoutAtMs(): number | undefined {
    if (this.phase === "awaiting_fill") return this.message.fillCutoffAtMs;
    if (this.phase === "awaiting_commit") return this.walkMessage!.cutoffAtMs;
    if (this.phase === "awaiting_walks") return this.openDeadlineAtMs;
    return undefined;
  }

  private get now(): number {
    return (this.options.now ?? Date.now)();
  }

  private fail(reason: MemoryFailureReason, detail: string): MemoryFailure {
    const failure: MemoryFailure = {
      outcome: "fail",
      id: this.id,
      reason,
      detail,
      ...(this.fillMs !== undefined ? { fillMs: this.fillMs } : {}),
      ...(this.walkMs !== undefined ? { walkMs: this.walkMs } : {}),
    };
    this.phase = "done";
    this.result = failure;
    return failure;
  }

  private expect(phase: Phase): void {
    if (this.phase === "done") throw new ChallengeStateError(`Memory phase ${this.id} has already ended (${this.result?.outcome}).`);
    if (this.phase !== phase) throw new ChallengeStateError(`Memory phase ${this.id} is ${this.phase}, not ${phase}.`);
  }

  /** The provider says every unit's buffer is full: checks the fill deadline and returns the walk nonce. */
  onFilled(input: unknown, receivedAtMs: number): { outcome: "walk"; message: MemWalk } | MemoryFailure {
    this.expect("awaiting_fill");
    const parsed = memFilledSchema.safeParse(input);
    if (!parsed.success) return this.fail("malformed", `mem-filled: ${describeIssues(parsed.error)}`);
    if (parsed.data.id !== this.id) return this.fail("replayed", `mem-filled is for ${parsed.data.id}, not ${this.id}`);
    this.fillMs = Math.round(receivedAtMs - this.message.issuedAtMs);
    if (receivedAtMs > this.message.fillCutoffAtMs)
      return this.fail("late_fill", `the buffers were filled ${this.fillMs} ms after the challenge, past the cutoff of ${this.params.fillCutoffMs} ms`);
    if (receivedAtMs > this.message.fillDeadlineAtMs) {
      return this.fail(
        "slow_fill",
        `the buffers were filled ${this.fillMs} ms after the challenge; a unit of the claimed class fills ${this.params.words} words in ${this.params.fillDeadlineMs} ms`,
      );
    }
    const random = this.options.randomBytes ?? cryptoRandom;
    const issuedAtMs = Math.floor(this.now);
    this.walkMessage = {
      v: MEMORY_PROTOCOL_VERSION,
      type: "mem-walk",
      id: this.id,
      nonce: bytesToHex(random(32)),
      issuedAtMs,
      deadlineAtMs: issuedAtMs + this.params.walkDeadlineMs,
      cutoffAtMs: issuedAtMs + this.params.walkCutoffMs,
    };
    this.phase = "awaiting_commit";
    return { outcome: "walk", message: this.walkMessage };
  }

  /** The provider's signed per-unit roots: checks time, signer and units, then picks walks to open. */
  async onCommit(input: unknown, receivedAtMs: number): Promise<{ outcome: "open"; request: MemOpen } | MemoryFailure> {
    this.expect("awaiting_commit");
    const parsed = memCommitSchema.safeParse(input);
    if (!parsed.success) return this.fail("malformed", `mem-commit: ${describeIssues(parsed.error)}`);
    const commit = parsed.data;
    const walk = this.walkMessage!;
    if (commit.id !== this.id) return this.fail("replayed", `mem-commit is for ${commit.id}, not ${this.id}`);
    this.walkMs = Math.round(receivedAtMs - walk.issuedAtMs);
    if (commit.roots.length !== this.params.units) return this.fail("malformed", `the commit has ${commit.roots.length} roots; the machine declares ${this.params.units} units`);
    if (new Set(commit.gpus).size !== commit.gpus.length) return this.fail("duplicate_gpus", "two units name the same GPU: one device cannot stand for two units");
    if (receivedAtMs > walk.cutoffAtMs)
      return this.fail("late_commit", `the walk commit came ${this.walkMs} ms after the nonce, past the cutoff of ${this.params.walkCutoffMs} ms`);
    const signer = await memCommitSigner(this.options.domain, commit);
    if (!signer || signer.toLowerCase() !== this.options.provider.toLowerCase())
      return this.fail("bad_commit_signature", `the memory commit is signed by ${signer ?? "no valid key"}, not ${this.options.provider}`);
    this.commit = commit;
    const random = this.options.randomBytes ?? cryptoRandom;
    const walks: { unit: number; index: number }[] = [];
    for (const [unit, count] of this.params.openPerUnit.entries()) {
      const picked = new Set<number>();
      for (let i = 0; picked.size < count && i < 100_000; i++) picked.add(uniform(this.params.walks, random));
      for (const index of picked) walks.push({ unit, index });
    }
    this.openRequest = { v: MEMORY_PROTOCOL_VERSION, type: "mem-open", id: this.id, walks };
    this.openDeadlineAtMs = receivedAtMs + this.params.openTimeoutMs;
    this.phase = "awaiting_walks";
    return { outcome: "open", request: this.openRequest };
  }

  /**
   * Checks the opened walks: each proves into its unit's signed root and equals the walk the
   * attestor recomputes from the unit's seed and the nonce (L words, K iterations each). A
   * correct answer after the walk deadline fails as slow_walk.
   */
  onWalks(input: unknown, receivedAtMs: number): MemoryOutcome {
    this.expect("awaiting_walks");
    const parsed = memWalksSchema.safeParse(input);
    if (!parsed.success) return this.fail("malformed", `mem-walks: ${describeIssues(parsed.error)}`);
    if (parsed.data.id !== this.id) return this.fail("replayed", `mem-walks is for ${parsed.data.id}, not ${this.id}`);
    if (receivedAtMs > this.openDeadlineAtMs) return this.fail("late_open", `the walks came more than ${this.params.openTimeoutMs} ms after the open request`);
    const commit = this.commit!;
    const wanted = this.openRequest!.walks;
    const got = new Map(parsed.data.walks.map((w) => [`${w.unit}:${w.index}`, w]));
    if (got.size !== parsed.data.walks.length || got.size !== wanted.length) return this.fail("malformed", `expected the ${wanted.length} walks asked for, each once`);
    const id = hexToBytes(this.id);
    const nonce = hexToBytes(this.walkMessage!.nonce);
    const depth = treeDepth(this.params.walks);
    for (const { unit, index } of wanted) {
      const opened = got.get(`${unit}:${index}`);
      if (!opened) return this.fail("malformed", `walk ${index} of unit ${unit} is missing`);
      const result = hexToBytes(opened.result as Hex);
      const proof = opened.proof.map((s) => hexToBytes(s));
      if (proof.length !== depth || !verifyMerkleProof(hexToBytes(commit.roots[unit]!), walkLeaf(id, unit, index, result), index, this.params.walks, proof)) {
        return this.fail("bad_proof", `walk ${index} of unit ${unit} does not hash to the unit's signed root`);
      }
      const expected = recomputeWalk(hexToBytes(this.message.seeds[unit]!), nonce, index, this.params.words, this.params.steps, this.params.hashIterations);
      if (bytesToHex(expected) !== bytesToHex(result)) return this.fail("wrong_walks", `walk ${index} of unit ${unit} is not the walk the seed and nonce define`);
    }
    if (this.walkMs! > this.params.walkDeadlineMs) {
      return this.fail(
        "slow_walk",
        `correct walks, but committed ${this.walkMs} ms after the nonce; a unit of the claimed class walks ${this.params.walks}×${this.params.steps} steps over its buffer in ${this.params.walkDeadlineMs} ms (a unit short of memory recomputes what it lacks)`,
      );
    }
    const pass: MemoryPass = { outcome: "pass", id: this.id, roots: commit.roots, gpus: commit.gpus, fillMs: this.fillMs!, walkMs: this.walkMs! };
    this.phase = "done";
    this.result = pass;
    return pass;
  }

  /** Nothing came by timeoutAtMs. */
  onTimeout(nowMs: number): MemoryFailure | undefined {
    const at = this.timeoutAtMs;
    if (at === undefined || nowMs < at) return undefined;
    if (this.phase === "awaiting_fill") return this.fail("late_fill", "the buffers were not filled by the cutoff");
    if (this.phase === "awaiting_commit") return this.fail("late_commit", "no walk commit by the cutoff");
    return this.fail("late_open", "the walks did not come back in time");
  }
}
