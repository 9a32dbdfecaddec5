/**
 * Per-unit GEMM sub-challenges (protocol v2, docs/attestation.md "Per-unit sub-challenges"). A
 * challenge for U units is U independent sub-challenges computed at once: unit u has its own seed
 * (derived from the challenge's seed, so the attestor signs one seed and recomputes any unit's
 * rows), its own rowsPerUnit answer rows, its own Merkle tree whose leaves are bound to the
 * challenge and the unit, and its own GPU UUID. Each unit is sized and timed at one unit's
 * required rate, so the deadline is what one honest unit needs: a machine with fewer devices than
 * units must run sub-challenges one after another and is late; two units naming one GPU fail.
 *
 * Pure: @noble and viem only (the SDK may import it).
 */
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, concat, hexToBytes, keccak256, stringToBytes, type Hex } from "viem";
import { unitLeafKey as memoryUnitLeafKey } from "./memory.js";

/** Domain tag of a unit's seed. */
export const UNIT_SEED_TAG = "suanli/attest/v2/unit";

/** Unit u's seed: SHA-256(utf8("suanli/attest/v2/unit") ‖ seed ‖ uint32_be(u)). Its matrices follow arithmetic.ts from it. */
export function unitSeedBytes(seed: Uint8Array, unit: number): Uint8Array {
  if (seed.length !== 32) throw new RangeError(`a challenge seed must be 32 bytes, got ${seed.length}`);
  if (!Number.isInteger(unit) || unit < 0 || unit > 0xffff_ffff) throw new RangeError(`a unit index must be a uint32, got ${unit}`);
  const tag = stringToBytes(UNIT_SEED_TAG);
  const input = new Uint8Array(tag.length + 36);
  input.set(tag, 0);
  input.set(seed, tag.length);
  new DataView(input.buffer).setUint32(tag.length + 32, unit, false);
  return sha256(input);
}

export function unitSeed(seed: Hex, unit: number): Hex {
  return bytesToHex(unitSeedBytes(hexToBytes(seed), unit));
}

/**
 * The 32 bytes unit u's leaves are bound to, in place of the challenge id of merkle.ts leafHash:
 * SHA-256(challengeId ‖ uint32_be(u)) (the memory phase binds its walk leaves the same way).
 */
export function unitLeafKeyBytes(challengeId: Uint8Array, unit: number): Uint8Array {
  return memoryUnitLeafKey(challengeId, unit);
}

export function unitLeafKey(challengeId: Hex, unit: number): Hex {
  return bytesToHex(unitLeafKeyBytes(hexToBytes(challengeId), unit));
}

/** What a runner needs for each unit: its seed and the key its leaves are bound to, in unit order. */
export function unitSubChallenges(challengeId: Hex, seed: Hex, units: number): { seed: Hex; leafKey: Hex }[] {
  return Array.from({ length: units }, (_, unit) => ({ seed: unitSeed(seed, unit), leafKey: unitLeafKey(challengeId, unit) }));
}

/** keccak256 of the units' roots concatenated in unit order: the `root` an attestation names. */
export function rootsHash(roots: readonly Hex[]): Hex {
  return keccak256(concat([...roots]));
}

/** The first GPU UUID named by two units, or undefined when they are distinct. */
export function duplicateDevice(devices: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (const device of devices) {
    const key = device.trim().toLowerCase();
    if (seen.has(key)) return device;
    seen.add(key);
  }
  return undefined;
}

/**
 * Where the two phases of one challenge name different GPUs for a unit (the memory phase's unit u
 * must be the GEMM commit's unit u, UUIDs compared as duplicateDevice compares them), as a line
 * naming the first such unit; undefined when every unit names the same GPU in both, or both name none.
 */
export function unitDeviceMismatch(gemm: readonly string[], memory: readonly string[]): string | undefined {
  if (gemm.length !== memory.length) return `the GEMM commit named ${gemm.length} GPUs, the memory phase ${memory.length}`;
  const key = (device: string) => device.trim().toLowerCase();
  const unit = gemm.findIndex((device, u) => key(device) !== key(memory[u]!));
  return unit < 0 ? undefined : `unit ${unit}: ${gemm[unit]} in the GEMM commit, ${memory[unit]} in the memory phase`;
}
