import { getAddress, isAddress, isHex } from "viem";
import { z } from "zod";

/** A 20-byte address, any case on input, checksummed on output. */
export const addressSchema = z
  .string()
  .refine((value) => isAddress(value, { strict: false }), { message: "expected a 0x-prefixed 20-byte hex address" })
  .transform((value) => getAddress(value));

/** A 32-byte hex value (hashes, ids). */
export const bytes32Schema = z
  .string()
  .regex(/^0x[0-9a-fA-F]{64}$/, "expected 0x followed by 64 hex digits")
  .transform((value) => value.toLowerCase() as `0x${string}`);

/** Arbitrary hex bytes (signatures, calldata). */
export const hexSchema = z
  .string()
  .refine((value) => isHex(value, { strict: true }), { message: "expected 0x-prefixed hex" })
  .transform((value) => value as `0x${string}`);

/** A 65-byte ECDSA signature. */
export const signatureSchema = z
  .string()
  .regex(/^0x[0-9a-fA-F]{130}$/, "expected a 65-byte signature as 0x followed by 130 hex digits")
  .transform((value) => value as `0x${string}`);

/** A non-negative integer amount given as a bigint, a safe integer or a decimal string. */
export const uintSchema = z
  .union([z.bigint(), z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER), z.string().regex(/^\d{1,78}$/, "expected a non-negative decimal integer")])
  .transform((value) => BigInt(value))
  .refine((value) => value >= 0n && value < 2n ** 256n, { message: "expected an integer between 0 and 2^256-1" });

/** Same as uintSchema but must be greater than zero. */
export const positiveUintSchema = uintSchema.refine((value) => value > 0n, { message: "must be greater than zero" });

/** A uint64 as a bigint, a decimal string or a safe integer. */
export const uint64Schema = z
  .union([z.bigint(), z.string().regex(/^\d{1,20}$/, "expected a decimal integer"), z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)])
  .transform((value) => BigInt(value))
  .refine((value) => value < 2n ** 64n, { message: "must fit in uint64" });
/** A lease id (> 0) as a bigint, a decimal string or a safe integer. */
export const leaseIdSchema = z
  .union([z.bigint(), z.string().regex(/^\d{1,78}$/, "expected a decimal lease id"), z.number().int().positive().max(Number.MAX_SAFE_INTEGER)])
  .transform((value) => BigInt(value))
  .refine((value) => value > 0n && value < 2n ** 256n, { message: "expected a lease id > 0" });
