/** Formatting helpers of the explorer (token amounts, addresses, times). */

/** A token amount in base units as a decimal string with at most `maxFraction` fraction digits. */
export function formatTokens(amount: bigint, decimals: number, maxFraction = 4): string {
  const negative = amount < 0n;
  const abs = negative ? -amount : amount;
  const base = 10n ** BigInt(decimals);
  const whole = abs / base;
  let fraction = (abs % base).toString().padStart(decimals, "0").slice(0, maxFraction).replace(/0+$/, "");
  if (decimals === 0) fraction = "";
  return `${negative ? "-" : ""}${whole.toLocaleString("en-US")}${fraction ? `.${fraction}` : ""}`;
}

/** Parses "2.5" into base units; undefined when it is not a non-negative decimal with at most `decimals` fraction digits. */
export function parseTokens(text: string, decimals: number): bigint | undefined {
  const match = /^(\d{1,30})(?:\.(\d+))?$/.exec(text.trim());
  if (!match) return undefined;
  const fraction = match[2] ?? "";
  if (fraction.length > decimals) return undefined;
  return BigInt(match[1]!) * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, "0") || "0");
}

export function shortAddress(address: string): string {
  return `${address.slice(0, 6)}…${address.slice(-4)}`;
}

/** "in 5 min", "in 2 h", "expired". */
export function relativeTime(unixSeconds: number, nowMs: number): string {
  const seconds = unixSeconds - Math.floor(nowMs / 1000);
  if (seconds <= 0) return "expired";
  if (seconds < 120) return `in ${seconds} s`;
  if (seconds < 7200) return `in ${Math.round(seconds / 60)} min`;
  if (seconds < 172_800) return `in ${Math.round(seconds / 3600)} h`;
  return `in ${Math.round(seconds / 86_400)} d`;
}

export function clockTime(unixSeconds: number, withDate: boolean): string {
  const date = new Date(unixSeconds * 1000);
  const time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return withDate ? `${date.toLocaleDateString([], { month: "short", day: "numeric" })} ${time}` : time;
}
