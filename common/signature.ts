/**
 * The ECDSA signatures the contracts accept, as a pure check (no native code, so browsers and the
 * SDK can use it): OpenZeppelin ECDSA 5.x `tryRecover` takes exactly 65 bytes r ‖ s ‖ v with
 * 0 < s <= n/2, and the ecrecover precompile behind it takes only v = 27 or 28 and 0 < r < n.
 * Other libraries' conventions (v = 0/1, 64-byte EIP-2098 compact signatures, high s) recover
 * to the same key in viem or noble but are refused on-chain; every off-chain verdict about a
 * message the chain will verify (offers, faults, settlements) must refuse them too.
 */
import type { Hex } from "viem";

/** The order of the secp256k1 group. */
export const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

const SHAPE = /^0x[0-9a-fA-F]{128}(?:1[bB]|1[cC])$/;

/** Why the contracts would refuse `signature` before recovering a key, or undefined if they would try it. */
export function contractSignatureProblem(signature: string): string | undefined {
  if (!/^0x(?:[0-9a-fA-F]{2})*$/.test(signature)) return "not hex bytes";
  const length = (signature.length - 2) / 2;
  if (length !== 65) return `${length} bytes; the contracts take 65-byte r, s, v signatures only (no EIP-2098 compact form)`;
  if (!SHAPE.test(signature)) return `v = ${parseInt(signature.slice(130), 16)}; the contracts take v = 27 or 28 only`;
  const r = BigInt(`0x${signature.slice(2, 66)}`);
  const s = BigInt(`0x${signature.slice(66, 130)}`);
  if (r === 0n || r >= SECP256K1_N) return "r is not in [1, n-1]";
  if (s === 0n || s > SECP256K1_N / 2n) return "s is not in [1, n/2] (high-s signatures are malleable; the contracts refuse them)";
  return undefined;
}

/** Whether the contracts would try to recover `signature` (see contractSignatureProblem). */
export function isContractSignature(signature: string): signature is Hex {
  return contractSignatureProblem(signature) === undefined;
}
