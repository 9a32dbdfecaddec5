/**
 * Building signed offer messages: the provider's wallet signs the EIP-712 Offer, the provider
 * node's libp2p key signs the whole message (see message.ts).
 */
import type { PrivateKey } from "@libp2p/interface";
import { bytesToHex, type Address, type Hex, type LocalAccount } from "viem";
import { suanliDomain, suanliTypes, type Attestation, type Offer } from "../eip712.js";
import { parseInput } from "../validation.js";
import {
  offerMessageSchema,
  offerSigningBytes,
  unsignedOfferMessageSchema,
  type OfferMessage,
  type UnsignedOfferMessageInput,
} from "./message.js";

/** Anything that signs EIP-712 typed data the way a viem account does. */
export type TypedDataSigner = Pick<LocalAccount, "address" | "signTypedData">;

/** The provider's EIP-712 signature of an Offer on one deployment. */
export function signOffer(signer: TypedDataSigner, chainId: number, market: Address, offer: Offer): Promise<Hex> {
  return signer.signTypedData({ domain: suanliDomain(chainId, market), types: suanliTypes, primaryType: "Offer", message: offer });
}

/** An attestor's EIP-712 signature of an Attestation on one deployment. */
export function signAttestation(signer: TypedDataSigner, chainId: number, market: Address, attestation: Attestation): Promise<Hex> {
  return signer.signTypedData({
    domain: suanliDomain(chainId, market),
    types: suanliTypes,
    primaryType: "Attestation",
    message: attestation,
  });
}

/**
 * Validates an unsigned message, signs its canonical form with the node's libp2p key and
 * returns the complete message. `peerKey` must be the key of `unsigned.peerId`.
 *
 * @example
 * const message = await signOfferMessage({ v: 1, offer, signature, machine, capacity, attestations: [],
 *   peerId: host.peerId.toString(), addrs, seq: 1, publishedAt: now }, peerKey);
 * await pubsub.publish(offersTopic(chainId), encodeOfferMessage(message));
 */
export async function signOfferMessage(unsigned: UnsignedOfferMessageInput, peerKey: PrivateKey): Promise<OfferMessage> {
  const parsed = parseInput(unsignedOfferMessageSchema, unsigned, "offer message");
  const signature = await peerKey.sign(offerSigningBytes(parsed));
  return offerMessageSchema.parse({ ...parsed, peerSignature: bytesToHex(signature) });
}
