/**
 * Which libp2p peer speaks for which attestor (docs/attestation.md, "Who receives a fault
 * proposal"). An attestor signs, once, EIP-712 `AttestorPeer {attestor, peerId}` in the
 * deployment's domain and hands it to whoever asks over `/suanli/attestor-identity/1.0.0`. A fault
 * proposer sends a proposal only to a peer whose binding names that very peer (the Noise-
 * authenticated remote peer id, so a binding copied from another attestor does not transfer) and
 * recovers to an address the chain counts as an attestor. Nothing here is read on-chain: the
 * binding is what lets an attestor keep a fault proposal away from the provider it faults and
 * from any other peer that is not a staked attestor (pure: the SDK may import it).
 */
import { getAddress, recoverTypedDataAddress, type Address, type Hex, type TypedDataDomain } from "viem";
import { z } from "zod";
import { signTyped, type TypedDataSigner } from "../chain/sign.js";
import { addressSchema, signatureSchema } from "../schemas.js";
import { isContractSignature } from "../signature.js";

/** EIP-712 type of the binding. Kept beside its protocol rather than in common/eip712.ts: nothing on-chain reads it. */
export const attestorPeerTypes = {
  AttestorPeer: [
    { name: "attestor", type: "address" },
    { name: "peerId", type: "string" },
  ],
} as const;

export type AttestorPeer = { attestor: Address; peerId: string };

function bindingTypedData(domain: TypedDataDomain, binding: AttestorPeer) {
  return { domain, types: attestorPeerTypes, primaryType: "AttestorPeer" as const, message: binding };
}

/** The attestor's signature of its binding to `peerId`. */
export function signAttestorPeer(signer: TypedDataSigner, domain: TypedDataDomain, binding: AttestorPeer): Promise<Hex> {
  return signTyped(signer, bindingTypedData(domain, binding));
}

/** Who signed a binding; undefined when the signature is malformed or high-s. */
export async function recoverAttestorPeerSigner(domain: TypedDataDomain, binding: AttestorPeer, signature: Hex): Promise<Address | undefined> {
  if (!isContractSignature(signature)) return undefined;
  try {
    return getAddress(await recoverTypedDataAddress({ ...bindingTypedData(domain, binding), signature }));
  } catch {
    return undefined;
  }
}

const chainIdSchema = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/** Asked of a peer before a fault proposal goes to it. */
export const attestorIdentityRequestSchema = z.strictObject({ v: z.literal(1), chainId: chainIdSchema });

/** The peer's answer: the attestor it speaks for, the peer id it signed, and the signature. */
export const attestorIdentitySchema = z.strictObject({
  v: z.literal(1),
  attestor: addressSchema,
  /** A libp2p peer id as text (base58btc or CID form are at most ~60 characters). */
  peerId: z.string().min(1).max(128),
  signature: signatureSchema,
});
export type AttestorIdentity = z.output<typeof attestorIdentitySchema>;

/**
 * Whether `answer` binds `remotePeer` (the Noise-authenticated id of the peer that sent it) to the
 * address it names: the attestor, or why not. Whether that address counts as an attestor is the
 * chain's to say (the caller asks it).
 */
export async function checkAttestorIdentity(
  domain: TypedDataDomain,
  answer: AttestorIdentity,
  remotePeer: string,
): Promise<{ ok: true; attestor: Address } | { ok: false; detail: string }> {
  if (answer.peerId !== remotePeer) return { ok: false, detail: `the binding names peer ${answer.peerId}, not the peer that sent it (${remotePeer})` };
  const signer = await recoverAttestorPeerSigner(domain, { attestor: answer.attestor, peerId: answer.peerId }, answer.signature);
  if (!signer || signer !== getAddress(answer.attestor)) return { ok: false, detail: `the binding is signed by ${signer ?? "no valid key"}, not by ${answer.attestor}` };
  return { ok: true, attestor: signer };
}
