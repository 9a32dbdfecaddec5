/**
 * JSON with bigint support. Amounts on the chain are bigints; JSON has no bigint, so they
 * travel as decimal strings tagged `{"$bigint":"123"}` in stored values, and as plain decimal
 * strings in wire formats whose zod schemas coerce them back.
 */
const BIGINT_TAG = "$bigint";

/** Stringifies, turning every bigint into `{"$bigint":"<decimal>"}` so `parseTagged` restores it. */
export function stringifyTagged(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? { [BIGINT_TAG]: v.toString() } : v));
}

/** Parses text written by `stringifyTagged`, reviving tagged bigints. */
export function parseTagged<T = unknown>(text: string): T {
  return JSON.parse(text, (_key, v: unknown) => {
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      const keys = Object.keys(v);
      if (keys.length === 1 && keys[0] === BIGINT_TAG) {
        const digits = (v as Record<string, unknown>)[BIGINT_TAG];
        if (typeof digits === "string" && /^-?\d+$/.test(digits)) return BigInt(digits);
      }
    }
    return v;
  }) as T;
}

/** Stringifies for wire formats and output: bigints become decimal strings. */
export function stringifyPlain(value: unknown, space?: number): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? v.toString() : v), space);
}

/**
 * Canonical JSON: object keys sorted, bigints as decimal strings, no whitespace. Two parties that
 * hold the same value produce the same text, so its hash can be signed (request bodies).
 */
export function stringifyCanonical(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      const child = (value as Record<string, unknown>)[key];
      if (child !== undefined) out[key] = sortKeys(child);
    }
    return out;
  }
  return value;
}
