/**
 * The one way node, SDK, benchmarks and tests sign Suanli's EIP-712 messages. `signTyped` signs
 * any typed data with either kind of signer viem has: a local account (a node's key) or a wallet
 * client holding an account (a JSON-RPC or injected wallet, Hardhat's test wallets). The named
 * helpers below sign one message of common/eip712.ts each, on the domain `suanliDomain(chainId,
 * market)` of one deployment; the domain and types live only there.
 */
import {
  getAddress,
  type Account,
  type Chain,
  type Hex,
  type LocalAccount,
  type Transport,
  type TypedData,
  type TypedDataDefinition,
  type TypedDataDomain,
  type WalletClient,
} from "viem";
import { suanliTypes, type Attestation, type Fault, type Offer, type Settlement } from "../eip712.js";
import type { SignedAttestation } from "../offers/message.js";

/** A wallet client that holds its account: it signs without being told which. */
export type AccountWalletClient = WalletClient<Transport, Chain | undefined, Account>;

/** A node's own key: a signer whose address is known without asking a wallet. */
export type LocalSigner = Pick<LocalAccount, "address" | "signTypedData">;

/** What signs typed data: a viem local account, or a wallet client holding an account. */
export type TypedDataSigner = Pick<LocalAccount, "signTypedData"> | AccountWalletClient;

function isWalletClient(signer: TypedDataSigner): signer is AccountWalletClient {
  return "request" in signer;
}

/**
 * Signs EIP-712 typed data with a local account or with a wallet client's own account.
 *
 * @example
 * import { privateKeyToAccount } from "viem/accounts";
 * import { signTyped } from "suanli/common/chain/sign";
 * const signature = await signTyped(privateKeyToAccount(key), { domain, types, primaryType: "Mail", message });
 */
export function signTyped<const typedData extends TypedData | Record<string, unknown>, primaryType extends keyof typedData | "EIP712Domain">(
  signer: TypedDataSigner,
  definition: TypedDataDefinition<typedData, primaryType>,
): Promise<Hex> {
  // The definition was checked against its own types above; viem's two signTypedData overloads
  // take it as the same plain typed data.
  const plain = definition as TypedDataDefinition;
  return isWalletClient(signer) ? signer.signTypedData({ ...plain, account: signer.account }) : signer.signTypedData(plain);
}

/**
 * The provider's signature of an offer, as LeaseMarket.openLease and extend verify it.
 *
 * @example
 * import { suanliDomain } from "suanli/common/eip712";
 * import { signOffer } from "suanli/common/chain/sign";
 * const signature = await signOffer(providerAccount, suanliDomain(31337, market), offer);
 */
export function signOffer(signer: TypedDataSigner, domain: TypedDataDomain, offer: Offer): Promise<Hex> {
  return signTyped(signer, { domain, types: { Offer: suanliTypes.Offer }, primaryType: "Offer", message: offer });
}

/** An attestor's signature of a fault, as LeaseMarket.submitFault counts it toward the quorum. */
export function signFault(signer: TypedDataSigner, domain: TypedDataDomain, fault: Fault): Promise<Hex> {
  return signTyped(signer, { domain, types: { Fault: suanliTypes.Fault }, primaryType: "Fault", message: fault });
}

/** A renter's or provider's signature of a co-signed settlement. */
export function signSettlement(signer: TypedDataSigner, domain: TypedDataDomain, settlement: Settlement): Promise<Hex> {
  return signTyped(signer, { domain, types: { Settlement: suanliTypes.Settlement }, primaryType: "Settlement", message: settlement });
}

/**
 * An attestor's signature of a machine's attestation, with the provider address checksummed as
 * offers carry it.
 *
 * @example
 * import { privateKeyToAccount } from "viem/accounts";
 * import { suanliDomain } from "suanli/common/eip712";
 * import { signAttestation } from "suanli/common/chain/sign";
 * const signed = await signAttestation(privateKeyToAccount(key), suanliDomain(31337, market), attestation);
 */
export async function signAttestation(signer: TypedDataSigner, domain: TypedDataDomain, attestation: Attestation): Promise<SignedAttestation> {
  const signature = await signTyped(signer, { domain, types: { Attestation: suanliTypes.Attestation }, primaryType: "Attestation", message: attestation });
  return { attestation: { ...attestation, provider: getAddress(attestation.provider) }, signature };
}
