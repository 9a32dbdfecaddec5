/**
 * eth-infinitism's SimpleAccount v0.8 (from `@account-abstraction/contracts`, docs/aa.md) as a viem smart account, built
 * with viem's own `toSmartAccount`: viem ships implementations for Coinbase's, Solady's and the 7702 accounts, not for
 * this factory's. The account is the factory's CREATE2 proxy for (owner, salt), deployed by its first user operation.
 */
import { decodeFunctionData, encodeFunctionData, type Address, type LocalAccount } from "viem";
import { readContract } from "viem/actions";
import { entryPoint08Abi, getUserOperationTypedData, toSmartAccount, type SmartAccount, type SmartAccountImplementation } from "viem/account-abstraction";
import { ENTRY_POINT_08, simpleAccountAbi, simpleAccountFactoryAbi } from "../../common/account-abstraction.js";
import { SmartAccountError } from "../account-errors.js";

export { SmartAccountError };

export type SimpleAccountOptions = {
  /** A client of the chain (reads the counterfactual address and the nonce). */
  client: SmartAccountImplementation["client"];
  /** The key that owns the account: it signs each user operation (EIP-712, EntryPoint v0.8's user operation hash). */
  owner: LocalAccount;
  /** The deployment's SimpleAccountFactory (manifest `contracts.accountFactory`). */
  factory: Address;
  /** The EntryPoint v0.8 (manifest `contracts.entryPoint`); the canonical one by default. */
  entryPoint?: Address;
  /** Which of the owner's accounts (default 0). */
  salt?: bigint;
};

/** A stub of the owner's 65-byte ECDSA signature, for gas estimation (recovers to some address, never reverts). */
const STUB_SIGNATURE = "0xfffffffffffffffffffffffffffffff0000000000000000000000000000000007aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1c" as const;

/**
 * The owner's SimpleAccount as a viem SmartAccount, for a bundler client's `sendUserOperation({ account, calls })`:
 * one call goes through `execute`, several through `executeBatch` (all or none). SimpleAccount v0.8 has no ERC-1271
 * `isValidSignature`, so it signs no messages or typed data: those throw SmartAccountError.
 *
 * @example
 * const account = await toSimpleAccount({ client: publicClient, owner: privateKeyToAccount(key), factory: deployment.contracts.accountFactory! });
 * const hash = await bundlerClient.sendUserOperation({ account, calls: [{ to: token, data }] });
 */
export async function toSimpleAccount(options: SimpleAccountOptions): Promise<SmartAccount> {
  const { client, owner, factory } = options;
  const salt = options.salt ?? 0n;
  const entryPoint = { abi: entryPoint08Abi, address: options.entryPoint ?? ENTRY_POINT_08, version: "0.8" } as const;
  let address: Address | undefined;
  const unsupported = async (): Promise<never> => {
    throw new SmartAccountError("SimpleAccount v0.8 verifies no ERC-1271 signatures: it cannot sign messages or typed data");
  };
  return toSmartAccount({
    client,
    entryPoint,
    async getAddress() {
      address ??= await readContract(client, { address: factory, abi: simpleAccountFactoryAbi, functionName: "getAddress", args: [owner.address, salt] });
      return address;
    },
    async getFactoryArgs() {
      return { factory, factoryData: encodeFunctionData({ abi: simpleAccountFactoryAbi, functionName: "createAccount", args: [owner.address, salt] }) };
    },
    async encodeCalls(calls) {
      if (calls.length === 1) return encodeFunctionData({ abi: simpleAccountAbi, functionName: "execute", args: [calls[0]!.to, calls[0]!.value ?? 0n, calls[0]!.data ?? "0x"] });
      return encodeFunctionData({
        abi: simpleAccountAbi,
        functionName: "executeBatch",
        args: [calls.map((call) => ({ target: call.to, value: call.value ?? 0n, data: call.data ?? "0x" }))],
      });
    },
    async decodeCalls(data) {
      const decoded = decodeFunctionData({ abi: simpleAccountAbi, data });
      if (decoded.functionName === "execute") return [{ to: decoded.args[0], value: decoded.args[1], data: decoded.args[2] }];
      if (decoded.functionName === "executeBatch") return decoded.args[0].map((call) => ({ to: call.target, value: call.value, data: call.data }));
      throw new SmartAccountError(`Not a SimpleAccount call: ${decoded.functionName}`);
    },
    async getStubSignature() {
      return STUB_SIGNATURE;
    },
    signMessage: unsupported,
    signTypedData: unsupported,
    async signUserOperation(parameters) {
      const { chainId = client.chain?.id, ...userOperation } = parameters;
      if (chainId === undefined) throw new SmartAccountError("Signing a user operation needs the chain id: give the client a chain");
      // EntryPoint v0.8's user operation hash is this EIP-712 digest; SimpleAccount recovers its owner from it.
      const typedData = getUserOperationTypedData({ chainId, entryPointAddress: entryPoint.address, userOperation: { ...userOperation, sender: await this.getAddress() } });
      return owner.signTypedData(typedData);
    },
  });
}
