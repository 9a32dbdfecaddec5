/**
 * Price arithmetic between what renters type (USD per GPU-hour) and what the contracts hold
 * (token base units per unit-second). The settlement token has 6 decimals: 1_000_000 base units
 * = 1 USD. Everything here is exact integer maths on bigints; floats never touch money.
 */
import { z } from "zod";

/** Base units in one USD (the token has 6 decimals). */
export const BASE_UNITS_PER_USD = 1_000_000n;
export const SECONDS_PER_HOUR = 3600n;

/**
 * A USD amount typed by a person: a decimal string (`"2.5"`, `"0.80"`) or a number (`2.5`), at
 * most 6 decimals, converted to base units. Numbers that JavaScript prints with an exponent
 * (`1e-7`) are refused rather than rounded.
 */
export function usdSchema(options: { max: bigint; what: string }) {
  return z.union([z.string(), z.number()], { error: `expected ${options.what} in USD as a decimal string or a number` }).transform((value, ctx) => {
    const text = typeof value === "number" ? (Number.isFinite(value) ? String(value) : "") : value.trim();
    if (/^-/.test(text) || (typeof value === "number" && value < 0)) {
      ctx.addIssue({ code: "custom", message: `must be greater than zero (got ${String(value)})` });
      return z.NEVER;
    }
    const match = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(text);
    if (!match) {
      ctx.addIssue({
        code: "custom",
        message: `expected ${options.what} in USD with at most 6 decimals, like "2.50" (got ${JSON.stringify(value)})`,
      });
      return z.NEVER;
    }
    const units = BigInt(match[1]!) * BASE_UNITS_PER_USD + BigInt((match[2] ?? "").padEnd(6, "0"));
    if (units <= 0n) {
      ctx.addIssue({ code: "custom", message: `must be greater than zero (got ${String(value)})` });
      return z.NEVER;
    }
    if (units > options.max) {
      ctx.addIssue({ code: "custom", message: `must be at most ${formatUsd(options.max)} USD (got ${String(value)})` });
      return z.NEVER;
    }
    return units;
  });
}

/**
 * Formats base units as USD for people: at least 2 decimals, up to 6, trailing zeros dropped
 * (`1900000n` → `"1.90"`, `1234567n` → `"1.234567"`).
 */
export function formatUsd(baseUnits: bigint): string {
  const negative = baseUnits < 0n;
  const abs = negative ? -baseUnits : baseUnits;
  const whole = abs / BASE_UNITS_PER_USD;
  let fraction = (abs % BASE_UNITS_PER_USD).toString().padStart(6, "0").replace(/0+$/, "");
  if (fraction.length < 2) fraction = fraction.padEnd(2, "0");
  return `${negative ? "-" : ""}${whole}.${fraction}`;
}

/** Price per GPU-hour in base units from a price per unit-second. */
export function perHour(pricePerUnitSecond: bigint): bigint {
  return pricePerUnitSecond * SECONDS_PER_HOUR;
}

/**
 * The highest whole price per unit-second that does not exceed a price per hour. On-chain prices
 * are per second, so a renter's hourly cap or bid becomes this (at most 0.0036 USD/h lower).
 */
export function perSecondFloor(pricePerHour: bigint): bigint {
  return pricePerHour / SECONDS_PER_HOUR;
}

/**
 * Whether a price per unit-second, shown per hour, carries a rounding tail past the cents ("2.0016"
 * for a provider's 2 USD/h): prices on chain are whole base units per second, and an hourly price
 * that is not a multiple of 3600 base units becomes the nearest whole base unit per second (2 USD/h
 * = 555.6/s, offered as 556/s = 2.0016 USD/h). People reading such a price get PER_SECOND_ROUNDING_NOTE once.
 */
export function showsPerSecondRounding(pricePerUnitSecond: bigint, decimals = 6): boolean {
  const cent = decimals > 2 ? 10n ** BigInt(decimals - 2) : 1n;
  return (pricePerUnitSecond * SECONDS_PER_HOUR) % cent !== 0n;
}

/** Said once beside prices that show their per-second rounding (issue #40 item 7). */
export const PER_SECOND_ROUNDING_NOTE =
  "prices are whole base units (0.000001 USD) per GPU-second on chain, so an hourly price is rounded to one: 2 USD/GPU-h is offered as 556 per second, shown as 2.0016 per hour";

/** `"1.90 USD/GPU-h"` from a price per unit-second. */
export function formatPerGpuHour(pricePerUnitSecond: bigint): string {
  return `${formatUsd(perHour(pricePerUnitSecond))} USD/GPU-h`;
}

/**
 * A bigint as a JS number for index keys and ranking, saturating at MAX_SAFE_INTEGER. Safe for
 * comparisons against renter caps, which the request schema bounds far below that.
 */
export function toIndexNumber(value: bigint): number {
  return value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(value);
}
