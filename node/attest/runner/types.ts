/**
 * The compute step of a proof-of-capacity challenge, pluggable: the CPU reference runner
 * (worker threads, runs anywhere) and the external runner (a program speaking the stdin/stdout
 * contract of docs/attestation.md, e.g. a CUDA one). The provider's ChallengeResponder drives it.
 */
import type { GpuEvidence } from "../../../common/attest/cc.js";
import type { MemoryRunner } from "./memory-runner.js";
import type { Hex } from "viem";
import { SuanliError } from "../../../common/errors.js";
import type { OpenedRowMessage } from "../../../common/attest/messages.js";

/** One unit's sub-challenge: its seed (units.ts unitSeed) and the key its leaves are bound to (unitLeafKey). */
export type RunnerUnit = { seed: Hex; leafKey: Hex };

/** What a runner needs to know about a challenge: one sub-challenge per unit, all computed at once. */
export type RunnerChallenge = {
  /** The challenge id. */
  id: Hex;
  /** The machine the challenge is for (a node serving several machines computes each on its own GPUs); informational. */
  machineId?: number;
  /** Rows of every unit's sub-challenge. */
  rowsPerUnit: number;
  cols: number;
  rounds: number;
  /** The units' sub-challenges in unit order: a GPU runner gives each its own device. */
  units: readonly RunnerUnit[];
};

/** A row to open: unit and row index within the unit's tree. */
export type RowPick = { unit: number; index: number };

/** A computed answer, held by the runner until released: one root per unit and a way to open rows. */
export interface RunnerCommitment {
  /** One Merkle root per unit (0x hex, 32 bytes), in unit order. */
  readonly roots: readonly Hex[];
  /** Rows each root covers. */
  readonly rowsPerUnit: number;
  /** The runner's own measure of the compute, milliseconds (for logs and benches; never trusted by attestors). */
  readonly computeMs: number;
  /**
   * The UUID of the GPU that computed each unit, in unit order (signed into the commit; the
   * attestor fails two units naming one GPU); absent for the CPU runner.
   */
  readonly devices?: readonly string[];
  /**
   * Confidential-computing evidence per unit, in unit order, from GPUs in CC mode: each GPU's
   * signed SPDM measurements for a request whose nonce is ccEvidenceNonce(challenge id, unit, the
   * unit's root), and the host's CC mode report (`mode`; common/attest/cc.ts).
   * Absent when the GPUs offer none (the CPU runner, GPUs not in CC mode).
   */
  readonly cc?: readonly GpuEvidence[];
  /** The rows at `picks` with their Merkle proofs, in the order asked. */
  openRows(picks: readonly RowPick[], options?: { signal?: AbortSignal }): Promise<OpenedRowMessage[]>;
  /** Frees what the runner keeps for this answer. Idempotent. */
  release(): Promise<void>;
}

export interface Runner {
  /** `cpu`, `external:<program>`: for logs. */
  readonly name: string;
  /** Computes every unit's answer rows at once, commits to each unit's and keeps what it needs to open rows later. */
  computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }): Promise<RunnerCommitment>;
  /**
   * Starts what the first challenge would otherwise start (a GPU runner's process and its device
   * context), so that start-up is never inside a challenge's deadline. Providers call it when
   * they mount attestation; a runner with nothing to start leaves it out.
   */
  warm?(): Promise<void>;
  /**
   * False when the runner computes one challenge at a time (an external program holds one answer:
   * the runner contract); the provider then answers a round's other machines `busy`. Default: it
   * computes several at once (a round of the node's machines, docs/attestation.md "Challenge rounds").
   */
  readonly concurrent?: boolean;
  /** True while a start asked for ahead of a challenge (warm, or a restart after a stop) is under way: the provider answers `busy` meanwhile. */
  readonly starting?: boolean;
  /**
   * True when the runner keeps one computed answer at a time, a new challenge replacing it (the
   * external runner's contract): the provider then answers `busy` while an answer waits for its
   * open request (ChallengeResponder), or the first attestor's open would fail.
   */
  readonly holdsOneAnswer?: boolean;
  /**
   * The memory phase on the same hardware (an external program's `mem-*` requests); absent, the
   * provider answers it with the CPU memory runner.
   */
  readonly memory?: MemoryRunner;
  /** Stops workers or the runner process. */
  close(): Promise<void>;
}

/** The runner failed: a worker or the runner process crashed, answered garbage or timed out. */
export class RunnerError extends SuanliError {
  override name = "RunnerError";
}
