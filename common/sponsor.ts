/**
 * Gas without ETH (issue 38, docs/aa.md "Gas without ETH"): what the deployment's sponsor signs for
 * contracts/SponsorPaymaster.sol and how it rides in a user operation. The sponsor (a node's
 * service, node/sponsor/) signs an EIP-712 `Sponsorship` over every field of a user operation but
 * the account's own signature, with a window; the paymaster checks it on-chain.
 */
import { concat, keccak256, numberToHex, size, sliceHex, type Address, type Hex, type TypedDataDomain } from "viem";
import { toPackedUserOperation, type UserOperation } from "viem/account-abstraction";
import { SuanliError } from "./errors.js";

/** The SponsorPaymaster's EIP-712 domain: its own address and the chain. */
export function sponsorDomain(chainId: number, paymaster: Address): TypedDataDomain {
  return { name: "SuanliSponsor", version: "1", chainId, verifyingContract: paymaster };
}

export const sponsorshipTypes = {
  Sponsorship: [
    { name: "sender", type: "address" },
    { name: "nonce", type: "uint256" },
    { name: "initCodeHash", type: "bytes32" },
    { name: "callDataHash", type: "bytes32" },
    { name: "accountGasLimits", type: "bytes32" },
    { name: "paymasterGasLimits", type: "uint256" },
    { name: "preVerificationGas", type: "uint256" },
    { name: "gasFees", type: "bytes32" },
    { name: "validUntil", type: "uint48" },
    { name: "validAfter", type: "uint48" },
  ],
} as const;

/** The bytes after the paymaster's gas limits: `validUntil` (6), `validAfter` (6), the sponsor's 65-byte signature. */
export const SPONSOR_DATA_BYTES = 77;

/**
 * What `paymasterData` holds while bundlers estimate gas: the right length and a well-formed signature
 * that recovers to some other address, so the paymaster's check costs what the real one will.
 */
export function sponsorStubData(validUntil: number, validAfter: number): Hex {
  return encodeSponsorData(
    validUntil,
    validAfter,
    "0xfffffffffffffffffffffffffffffff0000000000000000000000000000000007aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1c",
  );
}

export function encodeSponsorData(validUntil: number, validAfter: number, signature: Hex): Hex {
  if (size(signature) !== 65) throw new SuanliError(`A sponsor signature is 65 bytes, not ${size(signature)}`);
  return concat([numberToHex(validUntil, { size: 6 }), numberToHex(validAfter, { size: 6 }), signature]);
}

export function decodeSponsorData(data: Hex): { validUntil: number; validAfter: number; signature: Hex } {
  if (size(data) !== SPONSOR_DATA_BYTES) throw new SuanliError(`Sponsor data is ${SPONSOR_DATA_BYTES} bytes, not ${size(data)}`);
  return { validUntil: Number(sliceHex(data, 0, 6)), validAfter: Number(sliceHex(data, 6, 12)), signature: sliceHex(data, 12) };
}

/**
 * The `Sponsorship` message of a v0.8 user operation (viem's unpacked form, with its paymaster and
 * paymaster gas limits set): the fields SponsorPaymaster.sponsorshipDigest hashes.
 */
export function sponsorshipMessage(userOperation: UserOperation<"0.8">, validUntil: number, validAfter: number) {
  const packed = toPackedUserOperation({ ...userOperation, paymasterData: sponsorStubData(validUntil, validAfter) });
  return {
    sender: packed.sender,
    nonce: packed.nonce,
    initCodeHash: keccak256(packed.initCode),
    callDataHash: keccak256(packed.callData),
    accountGasLimits: packed.accountGasLimits,
    paymasterGasLimits: BigInt(sliceHex(packed.paymasterAndData, 20, 52)),
    preVerificationGas: packed.preVerificationGas,
    gasFees: packed.gasFees,
    validUntil,
    validAfter,
  };
}
