/**
 * What the sponsor signs for (docs/aa.md "Gas without ETH"): a user operation of a SimpleAccount
 * (eth-infinitism's, from the deployment's factory) or of a PasskeyAccount (from the deployment's
 * PasskeyAccountFactory, its calls an ERC-7821 batch) whose every call goes to the deployment's own
 * contracts with no ETH: any function of the LeaseMarket or SessionKeys, and the token's `approve`
 * of the market. Nothing else: no transfer of tokens or ETH anywhere, no other contract, no other
 * account code. Gas within the configured caps. Each refusal says which call or field broke which rule.
 */
import { decodeFunctionData, getAddress, type Abi, type Address, type Hex } from "viem";
import type { UserOperation } from "viem/account-abstraction";
import { leaseMarketAbi, leaseMarketExtensionAbi, passkeyAccountFactoryAbi, sessionKeysAbi, testTokenAbi } from "../../common/abi.js";
import { decodeErc7821Execute, simpleAccountAbi, simpleAccountFactoryAbi } from "../../common/account-abstraction.js";
import type { SponsorOptions } from "./options.js";

/** The deployment's contracts a sponsored operation may call. */
export type SponsorScope = {
  token: Address;
  market: Address;
  sessions: Address | undefined;
  accountFactory: Address;
  /** The deployment's PasskeyAccountFactory, when its manifest names one. */
  passkeyAccountFactory?: Address | undefined;
};

type Call = { target: Address; value: bigint; data: Hex };

function decodes(abi: Abi, data: Hex): { functionName: string; args: readonly unknown[] } | undefined {
  try {
    const decoded = decodeFunctionData({ abi, data });
    return { functionName: decoded.functionName, args: (decoded.args ?? []) as readonly unknown[] };
  } catch {
    return undefined;
  }
}

/** The account's calls: a SimpleAccount's `execute` or `executeBatch`, a PasskeyAccount's ERC-7821 batch; undefined for anything else. */
export function accountCalls(callData: Hex): Call[] | undefined {
  const batch = decodeErc7821Execute(callData);
  if (batch) return batch;
  const decoded = decodes(simpleAccountAbi as Abi, callData);
  if (decoded?.functionName === "execute") {
    const [target, value, data] = decoded.args as [Address, bigint, Hex];
    return [{ target, value, data }];
  }
  if (decoded?.functionName === "executeBatch") return [...(decoded.args[0] as readonly Call[])];
  return undefined;
}

function callRefusal(call: Call, index: number, scope: SponsorScope): string | undefined {
  const at = `call ${index} (to ${call.target})`;
  if (call.value !== 0n) return `${at} sends ${call.value} wei: sponsored calls send no ETH`;
  const target = getAddress(call.target);
  if (target === getAddress(scope.market)) {
    return decodes(leaseMarketAbi, call.data) || decodes(leaseMarketExtensionAbi, call.data) ? undefined : `${at} is not a LeaseMarket function`;
  }
  if (scope.sessions && target === getAddress(scope.sessions)) return decodes(sessionKeysAbi, call.data) ? undefined : `${at} is not a SessionKeys function`;
  if (target === getAddress(scope.token)) {
    const decoded = decodes(testTokenAbi, call.data);
    if (decoded?.functionName === "approve" && getAddress(decoded.args[0] as Address) === getAddress(scope.market)) return undefined;
    return `${at} calls the token's ${decoded?.functionName ?? "unknown function"}: only approve(market, amount) is sponsored`;
  }
  return `${at} is not one of the deployment's contracts (the market ${scope.market}, SessionKeys, the token's approve of the market)`;
}

/** All gas the operation may use, times its maximum fee: what the paymaster's deposit may pay for it at most. */
export function maxCostWei(op: UserOperation<"0.8">): bigint {
  const gas = op.callGasLimit + op.verificationGasLimit + op.preVerificationGas + (op.paymasterVerificationGasLimit ?? 0n) + (op.paymasterPostOpGasLimit ?? 0n);
  return gas * op.maxFeePerGas;
}

/** Why the sponsor will not sign `op` (empty: it may, budget permitting). */
export function sponsorRefusals(op: UserOperation<"0.8">, scope: SponsorScope, options: SponsorOptions): string[] {
  const reasons: string[] = [];
  if (op.factory !== undefined && op.factory !== null) {
    const factory = getAddress(op.factory);
    if (scope.passkeyAccountFactory && factory === getAddress(scope.passkeyAccountFactory)) {
      if (decodes(passkeyAccountFactoryAbi, op.factoryData ?? "0x")?.functionName !== "createAccount") reasons.push("factoryData is not createAccount(qx, qy, salt)");
    } else if (factory !== getAddress(scope.accountFactory)) {
      const passkey = scope.passkeyAccountFactory ? ` or PasskeyAccountFactory ${scope.passkeyAccountFactory}` : "";
      reasons.push(`factory ${op.factory} is not the deployment's SimpleAccountFactory ${scope.accountFactory}${passkey}`);
    } else if (decodes(simpleAccountFactoryAbi as Abi, op.factoryData ?? "0x")?.functionName !== "createAccount") reasons.push("factoryData is not createAccount(owner, salt)");
  }
  const calls = accountCalls(op.callData);
  if (!calls) reasons.push("callData is not the account's execute or executeBatch (a PasskeyAccount's: ERC-7821 execute in the batch mode)");
  else if (calls.length === 0) reasons.push("callData makes no call");
  else
    calls.forEach((call, index) => {
      const refusal = callRefusal(call, index, scope);
      if (refusal) reasons.push(refusal);
    });
  const caps: [string, bigint, number][] = [
    ["callGasLimit", op.callGasLimit, options.maxCallGasLimit],
    ["verificationGasLimit", op.verificationGasLimit, options.maxVerificationGasLimit],
    ["preVerificationGas", op.preVerificationGas, options.maxPreVerificationGas],
  ];
  for (const [name, value, cap] of caps) if (value > BigInt(cap)) reasons.push(`${name} ${value} is above the sponsor's cap ${cap}`);
  const cost = maxCostWei(op);
  if (cost > options.maxWeiPerOperation) reasons.push(`the operation may cost up to ${cost} wei, above the sponsor's ${options.maxWeiPerOperation} per operation`);
  return reasons;
}
