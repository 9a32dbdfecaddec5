/**
 * The idle workload's earnings: what one unit earns per hour when it runs the provider's own
 * workload (a miner's revenue estimate, say). The workload reports it through a command's output
 * or a file it writes; the pricing engine never sells a unit for less than that plus a margin.
 *
 * Accepted forms (docs/provider.md, "Idle earnings floor"):
 * - a decimal number: US dollars per unit-hour, for every model (`0.42`);
 * - a JSON object of model name (or alias) to US dollars per unit-hour (`{"A100-80GB": 0.42}`).
 */
import { execFileText } from "../../process/child.js";
import { readFile } from "node:fs/promises";
import { canonicalGpuName } from "../../../common/gpu.js";
import { SuanliError } from "../../../common/errors.js";
import type { Logger } from "../../log/logger.js";
import type { IdleEarningsOptions } from "./options.js";
import { runDetached } from "../../../common/detached.js";

export class IdleEarningsError extends SuanliError {
  override name = "IdleEarningsError";
}

/** Largest report read (a number or a small JSON object). */
const MAX_REPORT_BYTES = 64 * 1024;
const USD = /^\d{1,9}(\.\d{1,12})?$/;

/** Earnings in US dollars per unit-hour: `all` for every model, `byModel` per canonical model. */
export type IdleEarningsReport = { all: number | null; byModel: Map<string, number> };

/**
 * Parses a report. Throws IdleEarningsError naming what was wrong and the forms accepted;
 * a negative, non-finite or unknown-model entry fails the whole report (nothing half-read).
 */
export function parseIdleEarnings(text: string): IdleEarningsReport {
  const trimmed = text.trim();
  if (USD.test(trimmed)) return { all: Number(trimmed), byModel: new Map() };
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    throw new IdleEarningsError(`Cannot read the idle earnings report ${JSON.stringify(trimmed.slice(0, 80))}`, {
      metaMessages: ['Expected a decimal number of US dollars per unit-hour ("0.42") or a JSON object of model to that number ({"A100-80GB": 0.42}).'],
    });
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new IdleEarningsError("The idle earnings report is not a number or a JSON object of model to US dollars per unit-hour");
  }
  const byModel = new Map<string, number>();
  for (const [key, value] of Object.entries(parsed)) {
    const model = canonicalGpuName(key);
    if (!model) throw new IdleEarningsError(`The idle earnings report names an unknown GPU model ${JSON.stringify(key)}`);
    if (typeof value !== "number" || !Number.isFinite(value) || value < 0 || value > 1e9) {
      throw new IdleEarningsError(`The idle earnings of ${model} must be a non-negative number of US dollars per unit-hour, not ${JSON.stringify(value)}`);
    }
    byModel.set(model, value);
  }
  return { all: null, byModel };
}

/** A model's earnings in base units per unit-second (rounded up), or null when the report has none for it. */
export function idleEarningsPerUnitSecond(report: IdleEarningsReport, model: string, tokenDecimals: number): bigint | null {
  const usd = report.byModel.get(model) ?? report.byModel.get(model.split("/")[0]!) ?? report.all;
  if (usd === null || usd === undefined) return null;
  // Exact decimal scaling of the number's 12-decimal form, rounded up: a floor must not undercut.
  const [whole, fraction = ""] = usd.toFixed(12).split(".");
  const usdE12PerHour = BigInt(whole + fraction.padEnd(12, "0").slice(0, 12));
  const numerator = usdE12PerHour * 10n ** BigInt(tokenDecimals);
  const denominator = 10n ** 12n * 3_600n;
  return (numerator + denominator - 1n) / denominator;
}

export type IdleEarningsSourceOptions = {
  options: IdleEarningsOptions;
  logger: Logger;
};

/**
 * Reads the report on an interval and keeps the last good one: a failing command keeps the
 * previous floor (with a warning) rather than dropping it, since selling below idle earnings is
 * the loss the floor exists to prevent.
 */
export class IdleEarningsSource {
  private report: IdleEarningsReport | null = null;
  private readAtMs: number | null = null;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly ctx: IdleEarningsSourceOptions) {}

  /** The last good report (null before the first). */
  current(): IdleEarningsReport | null {
    return this.report;
  }

  lastReadAtMs(): number | null {
    return this.readAtMs;
  }

  /** Reads once; resolves with the report or null (logged) when the read failed. */
  async refresh(): Promise<IdleEarningsReport | null> {
    try {
      const text = await this.readText();
      this.report = parseIdleEarnings(text);
      this.readAtMs = Date.now();
      return this.report;
    } catch (error) {
      this.ctx.logger.warn("Cannot read the idle workload's earnings; keeping the last reading", { lastReadAtMs: this.readAtMs }, error);
      return null;
    }
  }

  start(onRead: () => void): void {
    if (this.timer) return;
    this.timer = setInterval(
      () =>
        runDetached(
          this.refresh().then((report) => report && onRead()),
          this.ctx.logger,
          "Refreshing the idle earnings",
        ),
      this.ctx.options.refreshMs,
    );
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async readText(): Promise<string> {
    const { command, file, timeoutMs } = this.ctx.options;
    if (file) {
      const text = await readFile(file, "utf8");
      if (text.length > MAX_REPORT_BYTES) throw new IdleEarningsError(`${file} holds more than ${MAX_REPORT_BYTES} bytes`);
      return text;
    }
    const [bin, args] = typeof command === "string" ? ["/bin/sh", ["-c", command]] : [command![0], command!.slice(1)];
    return new Promise((resolve, reject) => {
      execFileText(bin!, args, { timeout: timeoutMs, maxBuffer: MAX_REPORT_BYTES }, (error, stdout, stderr) => {
        if (error) reject(new IdleEarningsError(`The idle earnings command failed: ${error.message}${stderr ? `; stderr: ${stderr.slice(0, 200)}` : ""}`));
        else resolve(stdout);
      });
    });
  }
}
