/**
 * Checkpoint records (issue 36, docs/data.md): the provider snapshots a task's
 * `$SUANLI_CHECKPOINT_DIR` into UnixFS and signs an EIP-712 `Checkpoint` {leaseId, seq, cid,
 * bytes, time} with its provider key (the key that signs completion reports), on the same domain.
 * The renter's SDK accepts a record only when the lease's provider signed it.
 *
 * Pure viem: runs in Node and in browsers.
 */
import { getAddress, recoverTypedDataAddress, type Address, type Hex, type TypedDataDomain } from "viem";
import { z } from "zod";
import { signTyped, type TypedDataSigner } from "../chain/sign.js";
import { suanliTypes, type Checkpoint } from "../eip712.js";
import { SuanliError } from "../errors.js";
import { signatureSchema, uintSchema } from "../schemas.js";
import { isCid } from "../protocols/task-inputs.js";

/** Most checkpoint records a status answer carries (the newest ones). */
export const MAX_CHECKPOINTS_LISTED = 32;

const uint64Schema = uintSchema.refine((value) => value < 2n ** 64n, { message: "must fit in uint64" });

/** A signed checkpoint record as it travels (JSON: bigints as decimal strings). */
export const signedCheckpointSchema = z.strictObject({
  record: z.strictObject({
    leaseId: uintSchema,
    seq: uint64Schema,
    cid: z.string().min(8).max(200).refine(isCid, "expected a CID"),
    bytes: uint64Schema,
    time: uint64Schema,
  }),
  /** The provider's EIP-712 signature of `record`. */
  signature: signatureSchema,
});
/**
 * A checkpoint record {leaseId, seq, cid, bytes (file content), time (unix ms)} and the provider's
 * EIP-712 signature of it.
 *
 * @example
 * import { type SignedCheckpoint } from "suanli/sdk";
 * const { newest }: { newest: SignedCheckpoint | null } = await client.checkpoints(taskId);
 */
export type SignedCheckpoint = { record: Checkpoint; signature: Hex };

/**
 * A checkpoint record that is malformed or not signed by the lease's provider.
 *
 * @example
 * import { CheckpointSignatureError } from "suanli/sdk";
 * try {
 *   await client.checkpoints(taskId);
 * } catch (error) {
 *   if (error instanceof CheckpointSignatureError) console.error(error.shortMessage);
 * }
 */
export class CheckpointSignatureError extends SuanliError {
  override name = "CheckpointSignatureError";
}

function typedData(domain: TypedDataDomain, record: Checkpoint) {
  return { domain, types: { Checkpoint: suanliTypes.Checkpoint }, primaryType: "Checkpoint" as const, message: record };
}

/**
 * The provider signs a checkpoint record.
 *
 * @example
 * import { signCheckpoint } from "suanli/common/attest/checkpoint";
 * const signed = await signCheckpoint(providerAccount, suanliDomain(31337, market), { leaseId: 7n, seq: 1n, cid, bytes: 4096n, time: BigInt(Date.now()) });
 */
export async function signCheckpoint(account: TypedDataSigner, domain: TypedDataDomain, record: Checkpoint): Promise<SignedCheckpoint> {
  return { record, signature: await signTyped(account, typedData(domain, record)) };
}

/**
 * Checks one record: well formed, for `leaseId`, signed on `domain` by `provider`. Returns it
 * parsed; throws CheckpointSignatureError otherwise.
 *
 * @example
 * import { verifyCheckpoint } from "suanli/common/attest/checkpoint";
 * const record = await verifyCheckpoint(wire, { domain, provider: lease.provider, leaseId: lease.id });
 */
export async function verifyCheckpoint(value: unknown, options: { domain: TypedDataDomain; provider: Address; leaseId: bigint }): Promise<SignedCheckpoint> {
  const parsed = signedCheckpointSchema.safeParse(value);
  if (!parsed.success) {
    throw new CheckpointSignatureError("A checkpoint record is malformed", { details: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") });
  }
  const { record, signature } = parsed.data;
  if (record.leaseId !== options.leaseId) throw new CheckpointSignatureError(`A checkpoint record names lease ${record.leaseId}, not ${options.leaseId}`);
  let signer: Address;
  try {
    signer = await recoverTypedDataAddress({ ...typedData(options.domain, record), signature });
  } catch (error) {
    throw new CheckpointSignatureError("A checkpoint record's signature cannot be recovered", { cause: error });
  }
  if (getAddress(signer) !== getAddress(options.provider)) {
    throw new CheckpointSignatureError(`Checkpoint ${record.seq} of lease ${record.leaseId} is signed by ${signer}, not by the lease's provider ${options.provider}`, {
      metaMessages: ["The record was altered or made up by whoever relayed it: it is not used. Ask the provider again, or resume from an earlier verified checkpoint."],
    });
  }
  return { record, signature };
}

/** Every record verified (the first bad one throws), newest (highest seq) first. */
export async function verifyCheckpoints(values: readonly unknown[], options: { domain: TypedDataDomain; provider: Address; leaseId: bigint }): Promise<SignedCheckpoint[]> {
  const out: SignedCheckpoint[] = [];
  for (const value of values) out.push(await verifyCheckpoint(value, options));
  return out.sort((a, b) => (a.record.seq === b.record.seq ? 0 : a.record.seq > b.record.seq ? -1 : 1));
}

/** A record as JSON (bigints as decimal strings), as status answers carry it. */
export function checkpointToWire(signed: SignedCheckpoint): z.input<typeof signedCheckpointSchema> {
  const { record } = signed;
  return {
    record: { leaseId: record.leaseId.toString(), seq: record.seq.toString(), cid: record.cid, bytes: record.bytes.toString(), time: record.time.toString() },
    signature: signed.signature,
  };
}
