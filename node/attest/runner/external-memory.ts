/**
 * The memory phase on an external runner program (contract.ts, `mem-*` requests): the same
 * program that computes the GEMM challenge fills one buffer per unit on its own device, runs the
 * walks and opens them. Opened walks are checked against the roots the program committed to
 * before they leave the node, as rows are, so a broken program shows up in the provider's log.
 */
import { hexToBytes, type Hex } from "viem";
import { walkLeaf } from "../../../common/attest/memory.js";
import type { MemChallenge, OpenedWalk } from "../../../common/attest/memory-messages.js";
import { verifyMerkleProof } from "../../../common/attest/merkle.js";
import type { MemoryBuffers, MemoryRunner, MemoryWalked } from "./memory-runner.js";
import { MEMORY_CAPABILITY, type RunnerLine, type RunnerRequest } from "./contract.js";
import { nodeSha256 } from "./hash.js";
import { RunnerError } from "./types.js";

/** What the memory phase needs of the external runner (external.ts ExternalRunner), named here so the two files do not import each other. */
export interface RunnerExchange {
  readonly name: string;
  readonly openTimeoutMs: number;
  exchange(
    capability: string,
    request: RunnerRequest,
    what: string,
    options?: { signal?: AbortSignal; timeoutMs?: number; sameStart?: number; expect?: RunnerLine["type"]; releaseOnError?: RunnerRequest },
  ): Promise<{ line: RunnerLine; start: number }>;
  notify(request: RunnerRequest, start: number): Promise<void>;
}

export class ExternalMemoryRunner implements MemoryRunner {
  constructor(private readonly runner: RunnerExchange) {}

  get name(): string {
    return `${this.runner.name} (memory)`;
  }

  async fill(challenge: MemChallenge, options: { signal?: AbortSignal } = {}): Promise<MemoryBuffers> {
    const id = challenge.id.toLowerCase() as Hex;
    const units = challenge.seeds.length;
    const { line, start } = await this.runner.exchange(
      MEMORY_CAPABILITY,
      {
        type: "mem-fill",
        id,
        words: challenge.words,
        hashIterations: challenge.hashIterations,
        walks: challenge.walks,
        steps: challenge.steps,
        units: challenge.seeds.map((seed) => ({ seed })),
      },
      "mem-filled line",
      { signal: options.signal, expect: "mem-filled", releaseOnError: { type: "mem-release", id } },
    );
    if (line.type !== "mem-filled") throw new RunnerError(`The runner program answered mem-fill with a ${line.type} line.`);
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      await this.runner.notify({ type: "mem-release", id }, start);
    };
    return {
      release,
      walk: async (nonce, walkOptions = {}): Promise<MemoryWalked> => {
        if (released) throw new RunnerError("The memory buffers were released.");
        const answer = await this.runner.exchange(MEMORY_CAPABILITY, { type: "mem-walk", id, nonce }, "mem-commit line", {
          signal: walkOptions.signal,
          sameStart: start,
          expect: "mem-commit",
        });
        const commit = answer.line;
        if (commit.type !== "mem-commit") throw new RunnerError(`The runner program answered mem-walk with a ${commit.type} line.`);
        if (commit.units.length !== units) throw new RunnerError(`The runner program committed walks of ${commit.units.length} units; the phase has ${units}.`);
        const named = commit.units.filter((unit) => unit.device !== undefined).length;
        if (named !== 0 && named !== units) throw new RunnerError("The runner program named a device for some units and not for others: name one per unit, or none.");
        const roots = commit.units.map((unit) => unit.root);
        return {
          roots,
          devices: named ? commit.units.map((unit) => unit.device!) : [],
          open: async (refs) => {
            if (released) throw new RunnerError("The memory buffers were released.");
            const opened = await this.runner.exchange(MEMORY_CAPABILITY, { type: "mem-open", id, walks: refs.map(({ unit, index }) => ({ unit, index })) }, "mem-walks line", {
              timeoutMs: this.runner.openTimeoutMs,
              sameStart: start,
              expect: "mem-walks",
            });
            if (opened.line.type !== "mem-walks") throw new RunnerError(`The runner program answered mem-open with a ${opened.line.type} line.`);
            return checkWalks(challenge, roots, refs, opened.line.walks);
          },
        };
      },
    };
  }
}

/** Puts opened walks in the order asked and checks each against its unit's committed root. */
function checkWalks(challenge: MemChallenge, roots: readonly Hex[], refs: readonly { unit: number; index: number }[], walks: readonly OpenedWalk[]): OpenedWalk[] {
  const byKey = new Map(walks.map((w) => [`${w.unit}:${w.index}`, w]));
  const id = hexToBytes(challenge.id);
  return refs.map(({ unit, index }) => {
    const opened = byKey.get(`${unit}:${index}`);
    const root = roots[unit];
    if (!opened || root === undefined) throw new RunnerError(`The runner program did not return unit ${unit} walk ${index}.`);
    const leaf = walkLeaf(id, unit, index, hexToBytes(opened.result as Hex), nodeSha256);
    const proof = opened.proof.map((sibling) => hexToBytes(sibling));
    if (!verifyMerkleProof(hexToBytes(root), leaf, index, challenge.walks, proof, nodeSha256)) {
      throw new RunnerError(`The runner program's unit ${unit} walk ${index} does not match the root it committed to.`, {
        metaMessages: ["Check the runner against docs/attestation.md, Memory phase (leaf keys, leaf and node hashing, padding)."],
      });
    }
    return opened;
  });
}
