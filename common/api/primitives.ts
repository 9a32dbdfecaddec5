/**
 * Wire primitives of the HTTP API, shared by the node (which encodes responses) and the SDK's
 * browser client (which decodes them). JSON has no bigint, so amounts travel as decimal strings
 * and are bigints in code: every amount schema here is a zod codec, `schema.encode(bigint)` gives
 * the JSON value and `schema.decode(json)` gives the bigint back. The JSON Schema of the OpenAPI
 * document is generated from the wire (input) side of the codecs.
 */
import { getAddress, isAddress, type Address, type Hex } from "viem";
import { z } from "zod";
import { canonicalGpuName, knownGpuNames } from "../gpu.js";

/** The largest uint256: every on-chain amount and id fits below 2^256. */
export const MAX_UINT256 = 2n ** 256n - 1n;

/** A non-negative integer amount (token base units, ids): a decimal string on the wire, a bigint in code. */
export const amountSchema = z.codec(
  z.string().regex(/^\d{1,78}$/, "expected a non-negative decimal integer string"),
  // Every amount and id on-chain is a uint256: larger decimals are a 400, not a failed chain read.
  z.bigint().nonnegative().max(MAX_UINT256, "expected an integer below 2^256"),
  { decode: (text) => BigInt(text), encode: (value) => value.toString() },
);

/** An EVM address: any case on the wire, checksummed in code. */
export const addressWireSchema = z.codec(
  z.string().regex(/^0x[0-9a-fA-F]{40}$/, "expected a 0x-prefixed 20-byte hex address"),
  z.custom<Address>((value) => typeof value === "string" && isAddress(value, { strict: false })),
  { decode: (text) => getAddress(text), encode: (value) => value },
);

/** 32 bytes of hex (hashes, model ids, clusters, nonces): lowercase in code. */
export const bytes32WireSchema = z.codec(
  z.string().regex(/^0x[0-9a-fA-F]{64}$/, "expected 0x followed by 64 hex digits"),
  z.custom<Hex>((value) => typeof value === "string" && /^0x[0-9a-f]{64}$/.test(value)),
  { decode: (text) => text.toLowerCase() as Hex, encode: (value) => value },
);

/** A 65-byte ECDSA signature. */
export const signatureWireSchema = z.codec(
  z.string().regex(/^0x[0-9a-fA-F]{130}$/, "expected a 65-byte signature as 0x followed by 130 hex digits"),
  z.custom<Hex>((value) => typeof value === "string" && /^0x[0-9a-fA-F]{130}$/.test(value)),
  { decode: (text) => text as Hex, encode: (value) => value },
);

/** Unix time in seconds (uint32 on-chain). */
export const unixSecondsSchema = z
  .number()
  .int()
  .nonnegative()
  .max(2 ** 32 - 1);
export const uint16Schema = z
  .number()
  .int()
  .min(0)
  .max(2 ** 16 - 1);
export const uint32Schema = z
  .number()
  .int()
  .min(0)
  .max(2 ** 32 - 1);

export const interconnectWireSchema = z.enum(["none", "nvlink", "fabric"]);

/** A page of results: offset pagination over a list that may change between calls. */
export function pageSchema<T extends z.ZodType>(item: T) {
  return z.strictObject({
    items: z.array(item),
    total: z.number().int().nonnegative().describe("Matching items in total, all pages together."),
    limit: z.number().int().positive(),
    offset: z.number().int().nonnegative(),
    nextOffset: z.number().int().nonnegative().nullable().describe("The offset of the next page, or null on the last page."),
  });
}

// ---- query-string parameters: always strings on the wire, parsed to their types ----

/** An integer query parameter in [min, max]; the message names what is accepted. */
export function queryInt(min: number, max: number) {
  const accepted =
    min === 1 && max >= Number.MAX_SAFE_INTEGER
      ? "a positive integer"
      : min === 0 && max >= Number.MAX_SAFE_INTEGER
        ? "a non-negative integer"
        : `an integer from ${min} to ${max}`;
  return z
    .string()
    .regex(/^\d{1,16}$/, `expected ${accepted}`)
    .transform((text) => Number(text))
    .pipe(z.number().int().min(min, `expected ${accepted}`).max(max, `expected ${accepted}`));
}

/** A positive integer query parameter. */
export const queryPositiveInt = queryInt(1, Number.MAX_SAFE_INTEGER);

/** `true`/`false` (also `1`/`0`). */
export const queryBool = z.enum(["true", "false", "1", "0"], { error: "expected true or false" }).transform((text) => text === "true" || text === "1");

/** A decimal amount (base units) as a query parameter. */
export const queryAmount = z
  .string()
  .regex(/^\d{1,78}$/, "expected a non-negative decimal integer (token base units)")
  .transform((text) => BigInt(text))
  .refine((value) => value <= MAX_UINT256, "expected an integer below 2^256");

/** An address query parameter, checksummed after parsing. */
export const queryAddress = addressWireSchema;

/** A GPU model name or alias, resolved to its canonical name; unknown names list the known ones. */
export const gpuModelQuery = z
  .string()
  .min(1, "expected a GPU model name")
  .max(96)
  .transform((name, ctx) => {
    const canonical = canonicalGpuName(name);
    if (!canonical) {
      ctx.addIssue({ code: "custom", message: `unknown GPU model "${name}" (known: ${knownGpuNames().join(", ")})` });
      return z.NEVER;
    }
    return canonical;
  });

/** A region label as providers declare it (compared case-insensitively). */
export const regionQuery = z
  .string()
  .min(1)
  .max(32)
  .regex(/^[A-Za-z0-9._-]+$/, "expected a region label (letters, digits, . _ -)");

/** Page parameters shared by every list route. */
export const pageQueryShape = {
  limit: queryInt(1, 200).default(50).describe("Items per page, 1..200 (default 50)."),
  offset: queryInt(0, 1_000_000).default(0).describe("Items to skip (default 0)."),
};
