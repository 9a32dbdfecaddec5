/**
 * JSON with bigint support. Amounts on the chain are bigints; JSON has no bigint, so they
 * travel as decimal strings tagged `{"$bigint":"123"}` in stored values, and as plain decimal
 * strings in wire formats whose zod schemas coerce them back.
 */
const BIGINT_TAG = "$bigint";

/** Stringifies, turning every bigint into `{"$bigint":"<decimal>"}` so `parseTagged` restores it. */
export function stringifyTagged(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    typeof v === "bigint" ? { [BIGINT_TAG]: v.toString() } : v,
  );
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
