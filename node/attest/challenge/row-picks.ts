/** The rows an attestor opens of a committed answer (attestor.ts). */
import { ChallengeStateError } from "../errors.js";

/** Distinct uniform indices in [0, rows) (rejection sampling: no modulo bias). Drawn per unit, after the commit. */
export function pickIndices(count: number, rows: number, random: (length: number) => Uint8Array): number[] {
  const picked = new Set<number>();
  const limit = Math.floor(2 ** 32 / rows) * rows;
  for (let attempts = 0; picked.size < count && attempts < 100_000; attempts++) {
    const bytes = random(4);
    const value = ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
    if (value >= limit) continue;
    picked.add(value % rows);
  }
  if (picked.size < count) throw new ChallengeStateError("The random source did not produce distinct row indices.");
  return [...picked];
}
