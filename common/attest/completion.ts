/**
 * Result attestation: the provider signs its lease's result as an EIP-712 `Completion`
 * {leaseId, exitCode, outputDigest, unitSeconds} (common/eip712.ts) and sends it to the renter;
 * `LeaseMarket.complete` mirrors the same fields on-chain in `CompletionReported`. The renter's
 * SDK checks the report with `verifyCompletion` before trusting the exit code or the output.
 *
 * Pure viem: runs in Node and in browsers.
 */
import { getAddress, recoverTypedDataAddress, type Address, type Client, type Hex, type TypedDataDomain } from "viem";
import { getContractEvents } from "viem/actions";
import { z } from "zod";
import { signTyped, type TypedDataSigner } from "../chain/sign.js";
import { leaseMarketAbi } from "../abi.js";
import { suanliTypes, type Completion } from "../eip712.js";
import { bytes32Schema, signatureSchema, uintSchema } from "../schemas.js";
import { parseInput } from "../validation.js";

/** A completion report as it travels (JSON: bigints as decimal strings). */
export const signedCompletionSchema = z.strictObject({
  report: z.strictObject({
    leaseId: uintSchema,
    exitCode: z
      .number()
      .int()
      .min(-(2 ** 31))
      .max(2 ** 31 - 1),
    outputDigest: bytes32Schema,
    unitSeconds: uintSchema.refine((value) => value < 2n ** 64n, { message: "must fit in uint64" }),
  }),
  /** The provider's EIP-712 signature of `report`. */
  signature: signatureSchema,
});
export type SignedCompletion = { report: Completion; signature: Hex };
export type SignedCompletionInput = z.input<typeof signedCompletionSchema>;

function typedData(domain: TypedDataDomain, report: Completion) {
  return { domain, types: { Completion: suanliTypes.Completion }, primaryType: "Completion" as const, message: report };
}

/**
 * The provider signs its completion report.
 *
 * @example
 * import { signCompletion } from "suanli/common/attest/completion";
 * const signed = await signCompletion(providerAccount, suanliDomain(31337, market), { leaseId: 7n, exitCode: 0, outputDigest, unitSeconds: 3_600n });
 */
export async function signCompletion(account: TypedDataSigner, domain: TypedDataDomain, report: Completion): Promise<SignedCompletion> {
  return { report, signature: await signTyped(account, typedData(domain, report)) };
}

/** Why a completion report was not accepted (stable codes). */
export type CompletionRejection = "malformed" | "bad_signature" | "wrong_signer" | "onchain_mismatch" | "not_reported";

export type CompletionVerdict =
  { valid: true; report: Completion; signer: Address; onChain: boolean } | { valid: false; reason: CompletionRejection; detail: string; signer?: Address };

/** The fields `CompletionReported(leaseId, exitCode, outputDigest, unitSeconds)` carried on-chain. */
export type OnChainCompletion = { exitCode: number; outputDigest: Hex; unitSeconds: bigint };

export type VerifyCompletionOptions = {
  /** suanliDomain(chainId, market) of the deployment. */
  domain: TypedDataDomain;
  /** The lease's provider (LeaseView.provider): the only valid signer. */
  provider: Address;
  /**
   * What the chain recorded for the lease. `null` means the provider has not reported on-chain:
   * the report is then rejected as `not_reported`. Leave out to check the signature only.
   */
  onChain?: OnChainCompletion | null;
};

/**
 * Checks a provider's signed completion report: well formed, signed (EIP-712, this deployment)
 * by the lease's provider, and, when `onChain` is given, equal to what `complete` recorded.
 *
 * @example
 * import { readLease } from "suanli/common/chain/market";
 * import { readCompletionReport, verifyCompletion } from "suanli/common/attest/completion";
 * const lease = await readLease(client, market, report.report.leaseId);
 * const verdict = await verifyCompletion(report, {
 *   domain, provider: lease.provider,
 *   onChain: await readCompletionReport(client, market, lease.leaseId),
 * });
 * if (!verdict.valid) throw new Error(`provider report rejected: ${verdict.reason}`);
 */
export async function verifyCompletion(signed: SignedCompletionInput | SignedCompletion, options: VerifyCompletionOptions): Promise<CompletionVerdict> {
  const parsed = signedCompletionSchema.safeParse(signed);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { valid: false, reason: "malformed", detail: `${issue.path.join(".") || "(root)"}: ${issue.message}` };
  }
  const report: Completion = parsed.data.report;
  let signer: Address;
  try {
    signer = getAddress(await recoverTypedDataAddress({ ...typedData(options.domain, report), signature: parsed.data.signature }));
  } catch {
    return { valid: false, reason: "bad_signature", detail: "the signature recovers to no key" };
  }
  if (signer !== getAddress(options.provider)) {
    return { valid: false, reason: "wrong_signer", detail: `signed by ${signer}, not the lease's provider ${getAddress(options.provider)}`, signer };
  }
  if (options.onChain === null) return { valid: false, reason: "not_reported", detail: `lease ${report.leaseId} has no CompletionReported event`, signer };
  if (options.onChain !== undefined) {
    const chain = options.onChain;
    const field =
      chain.exitCode !== report.exitCode
        ? "exitCode"
        : chain.outputDigest.toLowerCase() !== report.outputDigest.toLowerCase()
          ? "outputDigest"
          : chain.unitSeconds !== report.unitSeconds
            ? "unitSeconds"
            : undefined;
    if (field) return { valid: false, reason: "onchain_mismatch", detail: `${field} differs from the CompletionReported event`, signer };
  }
  return { valid: true, report, signer, onChain: options.onChain !== undefined };
}

/**
 * The lease's `CompletionReported` event, or null when the provider has not reported. Reads logs
 * from `fromBlock` (the deployment block keeps the scan short).
 */
export async function readCompletionReport(client: Client, market: Address, leaseId: bigint, fromBlock: bigint = 0n): Promise<OnChainCompletion | null> {
  const id = parseInput(uintSchema, leaseId, "lease id");
  const events = await getContractEvents(client, {
    address: market,
    abi: leaseMarketAbi,
    eventName: "CompletionReported",
    args: { leaseId: id },
    fromBlock,
    strict: true,
  });
  const last = events.at(-1);
  if (!last) return null;
  return { exitCode: last.args.exitCode, outputDigest: last.args.outputDigest, unitSeconds: last.args.unitSeconds };
}
