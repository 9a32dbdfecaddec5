import type { Candidate } from "../../common/matching/engine.js";
import type { NoMatchExplanation } from "../../common/matching/explain.js";
import { formatUsd } from "../../common/matching/money.js";
import { parseMatchRequest, type MatchRequestInput } from "../../common/matching/request.js";
import type { SuanliContext } from "../internal/context.js";

/**
 * What `client.match` returns: `ok: true` with the ranked candidates (best first; prices in USD
 * per GPU-hour as decimal strings; `preempts` when taking it would preempt interruptible leases),
 * or `ok: false` with the explanation of why nothing fits.
 *
 * @example
 * import { createClient, type MatchOffersReturnType } from "suanli/sdk";
 * const result: MatchOffersReturnType = await client.match({ gpuType: "A100", gpuCount: 8, duration: 3600, maxPricePerGpuHour: "2.50" });
 * if (result.ok) {
 *   for (const c of result.candidates) console.log(c.provider, c.pricePerGpuHour, c.machines.map((m) => `${m.units}× ${m.model}`));
 * } else {
 *   console.log(result.explanation.summary);
 *   for (const step of result.explanation.steps) console.log(step.label, step.removed, step.remaining);
 * }
 */
export type MatchOffersReturnType =
  | {
      ok: true;
      candidates: {
        provider: `0x${string}`;
        machines: { machineId: number; model: string; units: number; pricePerGpuHour: string; terms: string }[];
        pricePerGpuHour: string;
        preempts: boolean;
      }[];
    }
  | { ok: false; explanation: NoMatchExplanation };

function summarize(candidate: Candidate) {
  return {
    provider: candidate.parts[0]!.entry.provider,
    machines: candidate.parts.map((part) => ({
      machineId: part.entry.machineId,
      model: part.entry.machine.model,
      units: part.units,
      pricePerGpuHour: formatUsd(part.pricePerUnitSecond * 3600n),
      /** "on-demand", or the reserved-term tier the duration qualifies for. */
      terms: part.terms ?? "on-demand",
    })),
    pricePerGpuHour: formatUsd(candidate.pricePerGpuHour),
    preempts: candidate.preempt,
  };
}

/**
 * A dry run of matching: the ranked candidates for a request, or the explanation of why nothing
 * fits (each constraint in the order applied with how many offers it removed, and the nearest
 * offers). Nothing is reserved.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const result = await client.match({ gpuType: "H100", gpuCount: 8, duration: 3600, maxPricePerGpuHour: "3" });
 * if (!result.ok) console.log(result.explanation.message);
 */
export async function matchOffers(ctx: SuanliContext, request: MatchRequestInput): Promise<MatchOffersReturnType> {
  const parsed = parseMatchRequest(request);
  await ctx.feed.ready();
  const result = ctx.feed.engine.match(parsed);
  return result.ok ? { ok: true, candidates: result.candidates.map(summarize) } : { ok: false, explanation: result.explanation };
}
