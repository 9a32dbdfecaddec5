/**
 * An attestation of a multi-unit machine (at most 10 units) and the provider's v2 commit behind it (one root and one
 * GPU UUID per unit), made up from a tag: what the AttestorStaking tests and the gas benchmark
 * dispute and answer. Devices are named in reverse byte order, so the attestation's `gpus` (sorted)
 * and the signed unit order differ, as they do on real machines.
 */
import { keccak256, toBytes, type Address, type Hex } from "viem";
import { gpusHash, type CommitFields } from "../../common/attest/commit.js";
import { rootsHash } from "../../common/attest/units.js";
import type { Attestation } from "../../common/eip712.js";

export function machineCommitFixture(o: { tag: string; provider: Address; machineId: bigint | number; model: Hex; issuedAt: number; units?: number; rowsPerUnit?: number }): {
  attestation: Attestation;
  commit: CommitFields;
} {
  const units = o.units ?? 8;
  const roots = Array.from({ length: units }, (_, u) => keccak256(toBytes(`root-${o.tag}-${u}`)));
  // UUIDs shaped like nvidia-smi's (GPU-8-4-4-4-12 hex), whose first digit is the unit's index reversed.
  const devices = Array.from({ length: units }, (_, u) => {
    const h = keccak256(toBytes(`gpu-${o.tag}-${u}`)).slice(2);
    return `GPU-${units - 1 - u}${h.slice(0, 7)}-${h.slice(7, 11)}-${h.slice(11, 15)}-${h.slice(15, 19)}-${h.slice(19, 31)}`;
  });
  const challengeId = keccak256(toBytes(`challenge-${o.tag}`));
  const attestation: Attestation = {
    provider: o.provider,
    machineId: Number(o.machineId),
    model: o.model,
    units,
    vramMiB: 81_920,
    throughput: 10n ** 15n,
    issuedAt: o.issuedAt,
    expiry: o.issuedAt + 86_400,
    challengeId,
    root: rootsHash(roots),
    gpus: gpusHash(devices),
    cc: `0x${"00".repeat(32)}`,
    failures: 0,
    lastFailureAt: 0,
  };
  return { attestation, commit: { challengeId, rowsPerUnit: o.rowsPerUnit ?? 512, roots, devices } };
}
