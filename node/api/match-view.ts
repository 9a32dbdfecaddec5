/**
 * The matching engine's answer (common/matching/engine.ts) in the shape of POST /v1/match: the
 * same candidates and explanation, flattened for JSON, with what a front end needs to reserve
 * (offer keys, peer ids, the offer version matched) and the deposit each candidate would take.
 */
import { uptimePercentOf } from "../../common/api/chain.js";
import type { MatchCandidate, MatchResult } from "../../common/api/market.js";
import type { Candidate, MatchResult as EngineResult } from "../../common/matching/engine.js";
import { attestFailuresAt } from "../../common/matching/entry.js";
import { formatUsd } from "../../common/matching/money.js";

function toCandidate(candidate: Candidate, rank: number, duration: number, now: number): MatchCandidate {
  const first = candidate.parts[0]!.entry;
  return {
    rank,
    cost: candidate.cost,
    breakdown: { ...candidate.breakdown },
    provider: first.provider,
    units: candidate.units,
    preempt: candidate.preempt,
    pricePerGpuHour: candidate.pricePerGpuHour,
    pricePerGpuHourUsd: formatUsd(candidate.pricePerGpuHour),
    totalCost: candidate.parts.reduce((sum, part) => sum + BigInt(part.units) * part.pricePerUnitSecond * BigInt(duration), 0n),
    reputation: { ...first.reputation, uptimePercent: uptimePercentOf(first.reputation) },
    allocations: candidate.parts.map((part) => ({
      offerKey: part.entry.key,
      provider: part.entry.provider,
      machineId: part.entry.machineId,
      units: part.units,
      preempt: part.preempt,
      pricePerUnitSecond: part.pricePerUnitSecond,
      model: part.entry.machine.model,
      region: part.entry.machine.region,
      attestationExpiry: part.entry.attestationExpiry,
      attestFailures: attestFailuresAt(part.entry, now),
      peerId: part.entry.peerId,
      seq: part.entry.seq,
      resources: part.entry.resources
        ? {
            cpuCores: part.units * part.entry.resources.cpuCoresPerUnit,
            memoryMiB: part.units * part.entry.resources.memoryMiBPerUnit,
            diskMiB: part.units * part.entry.resources.diskMiBPerUnit,
          }
        : null,
    })),
  };
}

/** Converts an engine result (candidates already ranked and bounded by the engine); `now` (unix s) counts the machines' failures. */
export function toMatchResult(result: EngineResult, now = Math.floor(Date.now() / 1000)): MatchResult {
  if (result.ok) {
    return {
      matched: result.candidates.length > 0,
      candidates: result.candidates.map((candidate, index) => toCandidate(candidate, index + 1, result.request.duration, now)),
      explanation: null,
    };
  }
  const { explanation } = result;
  return {
    matched: false,
    candidates: [],
    explanation: {
      summary: explanation.summary,
      totalOffers: explanation.totalOffers,
      steps: explanation.steps.map((step) => ({ constraint: step.constraint, label: step.label, removed: step.removed, remaining: step.remaining })),
      nearMisses: explanation.nearMisses.map((miss) => ({
        constraint: miss.constraint,
        count: miss.count,
        message: miss.message,
        nearest: miss.nearest ? { ...miss.nearest } : null,
      })),
      nearMissSearchTruncated: explanation.nearMissSearchTruncated,
      message: explanation.message,
    },
  };
}
