/**
 * The deployment's PasskeyAccount (contracts/aa/, docs/aa.md "A passkey owner") as a viem smart account, built with
 * viem's own `toSmartAccount`: an ERC-4337 account for EntryPoint v0.8 whose owner is a passkey, a viem WebAuthnAccount
 * (`toWebAuthnAccount`: in a browser, navigator.credentials). The account is PasskeyAccountFactory's clone for the
 * passkey's public key and a salt, deployed by its first user operation.
 */
import { encodeAbiParameters, encodeFunctionData, size, slice, zeroHash, type Address, type Hex } from "viem";
import { readContract } from "viem/actions";
import { entryPoint08Abi, getUserOperationHash, toSmartAccount, type SmartAccount, type SmartAccountImplementation, type WebAuthnAccount } from "viem/account-abstraction";
import { hashMessage as erc7739Message, hashTypedData as erc7739TypedData, wrapTypedDataSignature } from "viem/experimental/erc7739";
import { passkeyAccountFactoryAbi } from "../../common/abi.js";
import { ENTRY_POINT_08, decodeErc7821Execute, encodeErc7821Execute } from "../../common/account-abstraction.js";
import { PasskeySignatureError, SmartAccountError } from "../account-errors.js";

export { PasskeySignatureError };

export type PasskeyAccountOptions = {
  /** A client of the chain (reads the counterfactual address and the nonce). */
  client: SmartAccountImplementation["client"];
  /** The passkey that owns the account: it signs each user operation's hash (one WebAuthn assertion per operation). */
  owner: WebAuthnAccount;
  /** The deployment's PasskeyAccountFactory (manifest `contracts.passkeyAccountFactory`). */
  factory: Address;
  /** The EntryPoint v0.8 (manifest `contracts.entryPoint`); the canonical one by default. */
  entryPoint?: Address;
  /** Which of the passkey's accounts (default 0). */
  salt?: bigint;
};

/** What a WebAuthn assertion carries, as viem's WebAuthnAccount `sign` returns it. */
export type WebAuthnSignature = Awaited<ReturnType<WebAuthnAccount["sign"]>>;

/**
 * An assertion encoded as OpenZeppelin's WebAuthn.sol decodes it (`tryDecodeAuth`, `SignerWebAuthn`): the six fields of
 * its `WebAuthnAuth` one after another, as `abi.encode(r, s, challengeIndex, typeIndex, authenticatorData, clientDataJSON)`.
 */
export function encodeWebAuthnSignature({ signature, webauthn }: Pick<WebAuthnSignature, "signature" | "webauthn">): Hex {
  if (size(signature) < 64) throw new SmartAccountError(`A WebAuthn signature is r and s (64 bytes), got ${size(signature)} bytes`);
  return encodeAbiParameters(
    [{ type: "bytes32" }, { type: "bytes32" }, { type: "uint256" }, { type: "uint256" }, { type: "bytes" }, { type: "string" }],
    [
      slice(signature, 0, 32),
      slice(signature, 32, 64),
      BigInt(webauthn.challengeIndex ?? webauthn.clientDataJSON.indexOf('"challenge"')),
      BigInt(webauthn.typeIndex ?? webauthn.clientDataJSON.indexOf('"type"')),
      webauthn.authenticatorData,
      webauthn.clientDataJSON,
    ],
  );
}

/**
 * A stub of the passkey's signature for gas estimation: the size of a real one (authenticatorData of 37 bytes, a
 * clientDataJSON with a 43-character challenge and an origin), well formed, r and s in range, so it decodes and is
 * refused (never reverts). A refused stub stops before the P-256 check, so `VERIFICATION_GAS` covers that.
 */
const STUB_SIGNATURE = encodeWebAuthnSignature({
  signature: `0x${"7a".repeat(32)}${"3b".repeat(32)}`,
  webauthn: {
    authenticatorData: `0x${"49".repeat(32)}0500000001`,
    clientDataJSON: `{"type":"webauthn.get","challenge":"${"A".repeat(43)}","origin":"https://suanli.example.com","crossOrigin":false}`,
    challengeIndex: 23,
    typeIndex: 1,
    userVerificationRequired: true,
  },
});

/**
 * The verification gas a passkey operation is given (not estimated: the stub signature fails before its P-256 check),
 * with room for the account's deployment in its first operation (about 142,000 gas) and for a chain without the P-256
 * precompile, where OpenZeppelin's P256 verifies in Solidity (about 303,000 gas; 51,000 with it). Measured in
 * test/contracts/PasskeyAccount.test.ts.
 */
export const PASSKEY_VERIFICATION_GAS = 600_000n;

/**
 * A PasskeyAccount's own EIP-712 domain (ERC-5267 `eip712Domain()`: the clone's address, not the implementation's), in
 * which ERC-7739 rehashes what its passkey signs, so that a signature for one account or chain is worthless on another.
 */
export function passkeyAccountDomain(chainId: number, address: Address) {
  return { name: "PasskeyAccount", version: "1", chainId, verifyingContract: address, salt: zeroHash } as const;
}

/**
 * The passkey's PasskeyAccount as a viem SmartAccount, for a bundler client's `sendUserOperation({ account, calls })`:
 * its calls go through ERC-7821's `execute` in the batch mode (all or none), one call as a batch of one. Each user
 * operation is one assertion of the passkey over its hash (one approval by the person). Messages and typed data are
 * signed for the account's ERC-1271 `isValidSignature` as ERC-7739 wants them (one assertion each over the data
 * rehashed in `passkeyAccountDomain`; typed data wrapped with its type): valid once the account is deployed. The SDK's
 * sessions do not use that yet: they are approved on-chain (docs/aa.md "ERC-1271 on the PasskeyAccount").
 *
 * @example
 * const owner = toWebAuthnAccount({ credential }); // in a browser; viem's createWebAuthnCredential made `credential`
 * const account = await toPasskeyAccount({ client: publicClient, owner, factory: deployment.contracts.passkeyAccountFactory! });
 * const hash = await bundlerClient.sendUserOperation({ account, calls: [{ to: token, data }] });
 */
export async function toPasskeyAccount(options: PasskeyAccountOptions): Promise<SmartAccount> {
  const { client, owner, factory } = options;
  const salt = options.salt ?? 0n;
  if (size(owner.publicKey) !== 64) throw new SmartAccountError(`A passkey's public key is x and y (64 bytes), got ${size(owner.publicKey)} bytes`);
  const qx = slice(owner.publicKey, 0, 32);
  const qy = slice(owner.publicKey, 32, 64);
  const entryPoint = { abi: entryPoint08Abi, address: options.entryPoint ?? ENTRY_POINT_08, version: "0.8" } as const;
  let address: Address | undefined;
  const chainOf = () => {
    if (client.chain?.id === undefined) throw new SmartAccountError("Signing for the account's ERC-1271 needs the chain id: give the client a chain");
    return client.chain.id;
  };
  return toSmartAccount({
    client,
    entryPoint,
    async getAddress() {
      address ??= await readContract(client, { address: factory, abi: passkeyAccountFactoryAbi, functionName: "getAddress", args: [qx, qy, salt] });
      return address;
    },
    async getFactoryArgs() {
      return { factory, factoryData: encodeFunctionData({ abi: passkeyAccountFactoryAbi, functionName: "createAccount", args: [qx, qy, salt] }) };
    },
    async encodeCalls(calls) {
      return encodeErc7821Execute(calls);
    },
    async decodeCalls(data) {
      const calls = decodeErc7821Execute(data);
      if (!calls) throw new SmartAccountError("Not a PasskeyAccount call: ERC-7821 execute in the batch mode");
      return calls.map((call) => ({ to: call.target, value: call.value, data: call.data }));
    },
    async getStubSignature() {
      return STUB_SIGNATURE;
    },
    async signMessage({ message }) {
      const verifierDomain = passkeyAccountDomain(chainOf(), await this.getAddress());
      return encodeWebAuthnSignature(await owner.sign({ hash: erc7739Message({ message, verifierDomain }) }));
    },
    async signTypedData(typedData) {
      const verifierDomain = passkeyAccountDomain(chainOf(), await this.getAddress());
      // viem's generic TypedDataDefinition, taken as the plain object ERC-7739's helpers read.
      const definition = typedData as unknown as Omit<Parameters<typeof wrapTypedDataSignature>[0], "signature">;
      const hash = erc7739TypedData({ ...definition, verifierDomain } as Parameters<typeof erc7739TypedData>[0]);
      return wrapTypedDataSignature({ ...definition, signature: encodeWebAuthnSignature(await owner.sign({ hash })) });
    },
    async signUserOperation(parameters) {
      const { chainId = client.chain?.id, ...userOperation } = parameters;
      if (chainId === undefined) throw new SmartAccountError("Signing a user operation needs the chain id: give the client a chain");
      // EntryPoint v0.8's user operation hash (its EIP-712 digest) is the WebAuthn challenge the account checks.
      const hash = getUserOperationHash({
        chainId,
        entryPointAddress: entryPoint.address,
        entryPointVersion: "0.8",
        userOperation: { ...userOperation, sender: await this.getAddress() },
      });
      let assertion;
      try {
        assertion = await owner.sign({ hash });
      } catch (error) {
        throw new PasskeySignatureError("The passkey did not sign the user operation", { cause: error });
      }
      return encodeWebAuthnSignature(assertion);
    },
    userOperation: {
      async estimateGas(userOperation) {
        return {
          verificationGasLimit:
            userOperation.verificationGasLimit && userOperation.verificationGasLimit > PASSKEY_VERIFICATION_GAS ? userOperation.verificationGasLimit : PASSKEY_VERIFICATION_GAS,
        };
      },
    },
  });
}
