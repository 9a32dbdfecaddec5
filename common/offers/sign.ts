/**
 * Building signed offer messages: the provider's wallet signs the EIP-712 Offer (common/chain/sign.ts
 * `signOffer`), the provider node's libp2p key signs the whole message (see message.ts).
 */
import type { PrivateKey } from "@libp2p/interface";
import { bytesToHex } from "viem";
import { parseInput } from "../validation.js";
import { offerMessageSchema, offerSigningBytes, unsignedOfferMessageSchema, type OfferMessage, type UnsignedOfferMessageInput } from "./message.js";

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
