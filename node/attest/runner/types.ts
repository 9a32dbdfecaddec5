/**
 * The compute step of a proof-of-capacity challenge, pluggable: the CPU reference runner
 * (worker threads, runs anywhere) and the external runner (a program speaking the stdin/stdout
 * contract of docs/attestation.md, e.g. a CUDA one). The provider's ChallengeResponder drives it.
 */
import type { Hex } from "viem";
import { SuanliError } from "../../../common/errors.js";
import type { OpenedRowMessage } from "../../../common/attest/messages.js";

/** What a runner needs to know about a challenge. */
export type RunnerChallenge = {
  /** The challenge id: leaves are bound to it. */
  id: Hex;
  seed: Hex;
  rows: number;
  cols: number;
  rounds: number;
  /** Units (GPUs or slices) of the machine; a runner may split rows across them. */
  units: number;
};

/** A computed answer, held by the runner until released: its root and a way to open rows. */
export interface RunnerCommitment {
  /** Merkle root over all answer rows (0x hex, 32 bytes). */
  readonly root: Hex;
  /** Rows the root covers. */
  readonly rows: number;
  /** The runner's own measure of the compute, milliseconds (for logs and benches; never trusted by attestors). */
  readonly computeMs: number;
  /** UUIDs of the GPUs that computed the answer (signed into the commit and the attestation); absent for the CPU runner. */
  readonly devices?: readonly string[];
  /** The rows at `indices` with their Merkle proofs, in the order asked. */
  openRows(indices: readonly number[], options?: { signal?: AbortSignal }): Promise<OpenedRowMessage[]>;
  /** Frees what the runner keeps for this answer. Idempotent. */
  release(): Promise<void>;
}

export interface Runner {
  /** `cpu`, `external:<program>`: for logs. */
  readonly name: string;
  /** Computes every answer row, commits to them and keeps what it needs to open rows later. */
  computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }): Promise<RunnerCommitment>;
  /**
   * Starts what the first challenge would otherwise start (a GPU runner's process and its device
   * context), so that start-up is never inside a challenge's deadline. Providers call it when
   * they mount attestation; a runner with nothing to start leaves it out.
   */
  warm?(): Promise<void>;
  /** Stops workers or the runner process. */
  close(): Promise<void>;
}

/** The runner failed: a worker or the runner process crashed, answered garbage or timed out. */
export class RunnerError extends SuanliError {
  override name = "RunnerError";
}
