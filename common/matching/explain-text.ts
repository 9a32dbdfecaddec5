/**
 * The words of a no-match explanation (explain.ts): the request in one line, each constraint's
 * label, the remedies suggested and the capacity hint.
 */
import type { ConstraintId, MatchContext } from "./constraints.js";
import { formatUsd, perHour } from "./money.js";
import type { MatchingOptions } from "./options.js";
import type { MatchRequest } from "./request.js";

export const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** MiB as GiB for people: `64`, `0.5`, `1.25`. */
export function gib(mib: number): string {
  return String(Math.round((mib / 1024) * 100) / 100);
}

/** `8 CPU cores, 32 GiB memory, 100 GiB disk`, naming only the non-zero ones (empty when none). */
export function hostWords(resources: { cpuCores: number; memoryMiB: number; diskMiB: number }): string {
  const words: string[] = [];
  if (resources.cpuCores > 0) words.push(plural(resources.cpuCores, "CPU core"));
  if (resources.memoryMiB > 0) words.push(`${gib(resources.memoryMiB)} GiB memory`);
  if (resources.diskMiB > 0) words.push(`${gib(resources.diskMiB)} GiB disk`);
  return words.join(", ");
}

/** ` (your task's inputs declare 3 GiB, which the lease's disk must hold)`, or nothing without declared inputs. */
function inputsWords(request: MatchRequest): string {
  return request.inputMiB > 0 ? ` (your task's inputs declare ${gib(request.inputMiB)} GiB, which the lease's disk must hold)` : "";
}

/**
 * Why offers that fit everything else miss the host resources asked for: the most any of them
 * declares per GPU of each resource asked, or that they declare none.
 */
export function hostMissText(subject: string, count: number, ctx: MatchContext, best: { cpuCores: number; memoryMiB: number; diskMiB: number; undeclared: number }): string {
  const asked = `you asked for ${hostWords({ cpuCores: ctx.request.cpuCores, memoryMiB: ctx.request.memoryMiB, diskMiB: ctx.request.diskMiB })}${inputsWords(ctx.request)} for ${plural(ctx.count, "GPU")}, so ${hostWords({ cpuCores: ctx.cpuCoresPerUnit, memoryMiB: ctx.memoryMiBPerUnit, diskMiB: ctx.diskMiBPerUnit })} per GPU`;
  if (best.undeclared === count) {
    return `${subject} ${count === 1 ? "declares" : "declare"} no CPU cores, memory or disk per GPU (their nodes run without resource bounds or predate them; ${asked}).`;
  }
  const offered = hostWords({
    cpuCores: ctx.cpuCoresPerUnit > 0 ? best.cpuCores : 0,
    memoryMiB: ctx.memoryMiBPerUnit > 0 ? best.memoryMiB : 0,
    diskMiB: ctx.diskMiBPerUnit > 0 ? best.diskMiB : 0,
  });
  const none = best.undeclared > 0 ? ` (${best.undeclared} of them declare none)` : "";
  return `${subject} ${count === 1 ? "comes" : "come"} with at most ${offered} per GPU${none}; ${asked}.`;
}

/** `4 × A100-80GB, on demand at most 2.00 USD/GPU-h, 3600 s, region eu-west` */
export function describeRequest(request: MatchRequest): string {
  const parts = [`${request.gpuCount} × ${request.gpuType.label}`];
  if (request.interruptible) parts.push(`interruptible at a bid of ${formatUsd(perHour(request.bidPerUnitSecond!))} USD/GPU-h`);
  else parts.push(`on demand at most ${formatUsd(request.maxPricePerGpuHour)} USD/GPU-h`);
  parts.push(`${request.duration} s`);
  const host = hostWords({ cpuCores: request.cpuCores, memoryMiB: request.memoryMiB, diskMiB: request.diskMiB });
  if (host) parts.push(`${host}${inputsWords(request)}`);
  if (request.regions) parts.push(`region ${request.regions.join(" or ")}`);
  if (request.colocation === "cluster") parts.push("one machine or a cluster");
  return parts.join(", ");
}

export function constraintLabel(id: ConstraintId, ctx: MatchContext, options: MatchingOptions): string {
  const r = ctx.request;
  switch (id) {
    case "gpuType":
      return `GPU model ${r.gpuType.label}`;
    case "region":
      return `region ${r.regions!.join(" or ")}`;
    case "price":
      return `price at most ${formatUsd(r.maxPricePerGpuHour)} USD/GPU-h`;
    case "interruptible":
      return "sells interruptible capacity";
    case "bid":
      return `minimum bid at most your bid of ${formatUsd(perHour(r.bidPerUnitSecond!))} USD/GPU-h`;
    case "offerExpiry":
      return `offer valid for at least ${options.minOfferValiditySeconds} s more`;
    case "duration":
      return `accepts a lease of ${r.duration} s`;
    case "vram":
      return `at least ${r.minVramMiB} MiB per GPU`;
    case "hostResources":
      return `host resources of at least ${hostWords({ cpuCores: ctx.cpuCoresPerUnit, memoryMiB: ctx.memoryMiBPerUnit, diskMiB: ctx.diskMiBPerUnit })} per GPU`;
    case "attestation":
      return "current hardware attestation";
    case "attestFailures":
      return `at most ${plural(r.maxAttestFailures, "failed challenge")} in the last week (maxAttestFailures)`;
    case "gpuIdentityVerified":
      return "GPU identities verified by NVIDIA-signed evidence";
    case "reputation":
      return `provider reputation at least ${r.minReputation}`;
    case "capacity":
      return `${plural(r.gpuCount, "GPU")} available on ${r.colocation === "cluster" ? "one machine or one cluster" : "one machine"}${r.interruptible ? "" : " (free, or preemptible interruptible units)"}`;
    case "excluded":
      return "not already tried by this allocation";
  }
}

/**
 * The remedies a no-match explanation suggests, in the SDK's words. Other front ends (the CLI)
 * replace them with their own (`--allow-unattested`), so they are named here once.
 */
export const EXPLAIN_REMEDIES = {
  acceptUnattested: "set attestedOnly: false to accept unattested machines",
  acceptWithoutCc: "set gpuIdentityVerified: false to accept GPUs attested without it",
  acceptCluster: 'set colocation: "cluster" to accept several machines on a declared fast interconnect',
  raiseAttestFailures: "raise maxAttestFailures to accept them",
} as const;

/** The near miss of offers that fail only `maxAttestFailures`: the fewest failures among them. */
export function attestFailuresMissText(subject: string, count: number, fewest: number, ctx: MatchContext): string {
  const held = `${count === 1 ? "its machine has" : "their machines have at least"} ${plural(fewest, "failed challenge")} in the last week`;
  return `${subject} ${held}, more than maxAttestFailures ${ctx.maxAttestFailures} (${EXPLAIN_REMEDIES.raiseAttestFailures}).`;
}

export /** When the count exceeds every machine that passes the other checks, say so and point at clusters. */
function capacityHint(ctx: MatchContext, largestMachine: number, clusterUnits: Map<number, number>): string | undefined {
  if (largestMachine === 0) return undefined;
  if (ctx.request.colocation === "machine" && ctx.count > largestMachine) {
    return `No machine that fits everything else has ${plural(ctx.count, "GPU")} (the largest has ${largestMachine}); ${EXPLAIN_REMEDIES.acceptCluster}.`;
  }
  if (ctx.request.colocation === "cluster") {
    let most = 0;
    for (const units of clusterUnits.values()) if (units > most) most = units;
    if (most > 0 && most < ctx.count) return `The most GPUs available in one cluster is ${most}.`;
  }
  return undefined;
}
