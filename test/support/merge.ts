/**
 * Deep-merges plain objects for test configs: `b`'s values win, nested objects merge, arrays and
 * other values replace. The one copy the test helpers share.
 */
export function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out = { ...a };
  for (const [key, value] of Object.entries(b)) {
    const prev = out[key];
    out[key] =
      value && typeof value === "object" && !Array.isArray(value) && prev && typeof prev === "object" && !Array.isArray(prev)
        ? merge(prev as Record<string, unknown>, value as Record<string, unknown>)
        : value;
  }
  return out;
}
