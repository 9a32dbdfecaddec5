/**
 * The calibration figure every CPU benchmark prints beside its own (issue #19): a fixed workload
 * run with the project's own libraries on this thread, timed in thread CPU time, so that runs on
 * different or busy machines compare. Two figures:
 *
 * - `keccakPerCpuSec`: keccak-256 of a 64-byte input through common/keccak.ts (WebAssembly), the
 *   hashing EIP-712 digests, offer keys and Merkle proofs are built from;
 * - `recoverPerCpuSec`: signer recoveries of a signed digest through common/eip712-recover.ts
 *   (libsecp256k1, native), the work of checking one offer, attestation or request.
 *
 * A suite's main figure divided by the matching calibration figure (`normalized`) is the number
 * to compare across machines: it stays put when the machine is twice as fast or half as busy.
 */
import { bytesToHex } from "viem";
import { recoverDigestSigner, signDigest } from "../common/eip712-recover.js";
import { keccak256Bytes, keccakReady } from "../common/keccak.js";

export type Calibration = { keccakPerCpuSec: number; recoverPerCpuSec: number };

function cpuSeconds(since: NodeJS.CpuUsage): number {
  const used = process.threadCpuUsage(since);
  return (used.user + used.system) / 1e6;
}

/** Runs `work` in batches until it has used at least `minCpuSeconds` of this thread; returns per CPU-second. */
function rate(work: (i: number) => void, batch: number, minCpuSeconds: number): number {
  let done = 0;
  const started = process.threadCpuUsage();
  let spent = 0;
  // Bounded: at most 1,000 batches, whatever the machine.
  for (let b = 0; b < 1_000 && spent < minCpuSeconds; b++) {
    for (let i = 0; i < batch; i++) work(done + i);
    done += batch;
    spent = cpuSeconds(started);
  }
  return Math.round(done / spent);
}

export async function calibrate(minCpuSeconds = 0.4): Promise<Calibration> {
  await keccakReady;
  const input = new Uint8Array(64);
  const keccak = rate(
    (i) => {
      input[0] = i & 0xff;
      input[1] = (i >>> 8) & 0xff;
      keccak256Bytes(input);
    },
    2_000,
    minCpuSeconds,
  );
  // A fixed key (the first Hardhat account's): the figure must not depend on the key drawn.
  const key = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
  const digests = Array.from({ length: 16 }, (_, i) => bytesToHex(keccak256Bytes(new Uint8Array([i]))));
  const signatures = digests.map((digest) => signDigest(digest, key));
  const recover = rate(
    (i) => {
      const k = i % digests.length;
      if (recoverDigestSigner(digests[k]!, signatures[k]!) === undefined) throw new Error("calibration: a signature did not recover");
    },
    200,
    minCpuSeconds,
  );
  return { keccakPerCpuSec: keccak, recoverPerCpuSec: recover };
}

/**
 * What a suite declares as its main CPU figure: the summary field, and the calibration figure it
 * is divided by (hash-bound work by keccak, signature-bound work by recoveries).
 */
export type MainFigure = { field: string; per: keyof Calibration };

/** Reads a dotted summary field (`ingest.perCpuSec`). */
export function figureOf(summary: Record<string, unknown>, field: string): number | undefined {
  let value: unknown = summary;
  for (const part of field.split(".")) value = value && typeof value === "object" ? (value as Record<string, unknown>)[part] : undefined;
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}
