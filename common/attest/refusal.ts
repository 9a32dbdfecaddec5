/**
 * Signed refusals (issue 35 items 5 and 8): a provider that declines a challenge because it is out
 * of bounds (`out_of_bounds`), because its attestor has had its share of the provider's slot
 * (`attestor_share`), or because the leased machine's check budget is spent for that attestor
 * (`lease_budget`) signs the refusal with its wallet, numbers included. The attestor records such a
 * refusal as an error, never the provider's failure, only after checking it: the signature is the
 * provider's, and the numbers agree with the challenge's fields (bounds.ts) and with the attestor's
 * own records. A refusal that does not check out is the provider's failure (`refused`). Kept beside
 * the protocol: nothing on-chain reads it.
 */
import { hashTypedData, recoverAddress, type Address, type Hex, type TypedDataDomain } from "viem";
import { signTyped, type TypedDataSigner } from "../chain/sign.js";
import type { RefusalReason } from "./messages.js";

/** The refusal reasons a provider signs: each says the attestor, not the machine, hit a bound. */
export const SIGNED_REFUSAL_REASONS = ["out_of_bounds", "attestor_share", "lease_budget"] as const satisfies readonly RefusalReason[];
export type SignedRefusalReason = (typeof SIGNED_REFUSAL_REASONS)[number];

export function isSignedRefusalReason(reason: string): reason is SignedRefusalReason {
  return (SIGNED_REFUSAL_REASONS as readonly string[]).includes(reason);
}

export const attestRefusalTypes = {
  AttestRefusal: [
    { name: "challengeId", type: "bytes32" },
    { name: "reason", type: "string" },
    { name: "attestorMs", type: "uint64" },
    { name: "limitMs", type: "uint64" },
  ],
} as const;

/** What a signed refusal states: the attestor's use counted by the provider and the limit it met (both 0 for `out_of_bounds`). */
export type RefusalUsage = { attestorMs: number; limitMs: number };

function typedData(domain: TypedDataDomain, challengeId: Hex, reason: SignedRefusalReason, usage: RefusalUsage) {
  return {
    domain,
    types: attestRefusalTypes,
    primaryType: "AttestRefusal" as const,
    message: { challengeId, reason, attestorMs: BigInt(usage.attestorMs), limitMs: BigInt(usage.limitMs) },
  };
}

export function signRefusal(signer: TypedDataSigner, domain: TypedDataDomain, challengeId: Hex, reason: SignedRefusalReason, usage: RefusalUsage): Promise<Hex> {
  return signTyped(signer, typedData(domain, challengeId, reason, usage));
}

/** The address that signed the refusal, or undefined when the signature does not recover. */
export async function recoverRefusalSigner(
  domain: TypedDataDomain,
  challengeId: Hex,
  reason: SignedRefusalReason,
  usage: RefusalUsage,
  signature: Hex,
): Promise<Address | undefined> {
  try {
    return await recoverAddress({ hash: hashTypedData(typedData(domain, challengeId, reason, usage)), signature });
  } catch {
    return undefined;
  }
}
