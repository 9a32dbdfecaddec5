/**
 * The renter's match request: what the SDK, the CLI and a node's HTTP API accept, validated
 * field by field. Prices are typed in USD per GPU-hour (decimal string or number); the parsed
 * request carries them in token base units, per hour and per unit-second (see money.ts).
 */
import { z } from "zod";
import { parseInput } from "../validation.js";
import { type GpuSelection, acceptedGpuTypes, resolveGpuName } from "./gpu-type.js";
import { BASE_UNITS_PER_USD, SECONDS_PER_HOUR, formatUsd, perSecondFloor, usdSchema } from "./money.js";

/** The default of `maxAttestFailures`: machines with more failed challenges in the last week are not matched. */
export const DEFAULT_MAX_ATTEST_FAILURES = 3;

/** Most GPUs one request may ask for (a cluster of 128 eight-GPU machines). */
export const MAX_GPU_COUNT = 1024;
/** Longest lease one request may ask for: 366 days. Longer leases are extended, not requested. */
export const MAX_DURATION_SECONDS = 366 * 24 * 3600;
/** Highest cap or bid accepted, per GPU-hour: anything above is a typo, not a price. */
export const MAX_PRICE_PER_GPU_HOUR = 10_000n * BASE_UNITS_PER_USD;
/** Lowest cap or bid accepted: 1 base unit per second, the on-chain price granularity. */
export const MIN_PRICE_PER_GPU_HOUR = SECONDS_PER_HOUR;
/** Largest VRAM requirement accepted, MiB (1 TiB). */
export const MAX_VRAM_MIB = 1 << 20;
/** Most CPU cores one request may ask for, in total. */
export const MAX_CPU_CORES = 65_536;
/** Most host memory one request may ask for, GiB in total (64 TiB). */
export const MAX_MEMORY_GIB = 65_536;
/** Most disk one request may ask for, GiB in total (1 PiB). */
export const MAX_DISK_GIB = 1_048_576;

const gibField = (what: string, max: number) =>
  z
    .number({ error: required(`${what} in GiB, a number above 0`) })
    .positive("must be above 0 GiB")
    .max(max, `must be at most ${max} GiB`)
    .optional();

const required =
  (what: string) =>
  (issue: { input?: unknown }): string =>
    issue.input === undefined ? `is required (${what})` : `expected ${what}`;

const priceField = (what: string) =>
  usdSchema({ max: MAX_PRICE_PER_GPU_HOUR, what }).refine((units) => units >= MIN_PRICE_PER_GPU_HOUR, {
    message: `must be at least ${formatUsd(MIN_PRICE_PER_GPU_HOUR)} USD (1 base unit per second)`,
  });

const regionName = z.string().trim().min(1, "expected a region name").max(32, "region names are at most 32 characters");

export const matchRequestSchema = z
  .strictObject({
    /** A model, alias, MIG slice or class; see gpu-type.ts. */
    gpuType: z
      .union([z.string(), z.array(z.string()).min(1, "expected at least one GPU type").max(20, "at most 20 GPU types")], {
        error: required(`a GPU type: ${acceptedGpuTypes()}`),
      })
      .transform((value, ctx): GpuSelection => {
        const names = typeof value === "string" ? [value] : value;
        const models = new Set<string>();
        const labels: string[] = [];
        for (const name of names) {
          const resolved = resolveGpuName(name);
          if ("error" in resolved) {
            ctx.addIssue({ code: "custom", message: resolved.error });
            return z.NEVER;
          }
          for (const model of resolved.models) models.add(model);
          labels.push(resolved.label);
        }
        return { label: labels.join(" or "), models: [...models] };
      }),
    /** GPUs (units) wanted in total. */
    gpuCount: z
      .number({ error: required(`a whole number of GPUs from 1 to ${MAX_GPU_COUNT}`) })
      .int("expected a whole number of GPUs")
      .min(1, "must be at least 1")
      .max(MAX_GPU_COUNT, `must be at most ${MAX_GPU_COUNT}`),
    /** Minimum memory per GPU in MiB, compared with the machine's declared vramMiB (H100 80GB declares 81559). */
    minVramMiB: z
      .number({ error: required("a whole number of MiB") })
      .int("expected a whole number of MiB")
      .min(1, "must be at least 1 MiB")
      .max(MAX_VRAM_MIB, `must be at most ${MAX_VRAM_MIB} MiB`)
      .optional(),
    /**
     * CPU cores for the whole request (all its GPUs together). Offers declare cores per GPU
     * (offer message `resources`); a machine fits when its GPUs' cores add up to at least this.
     */
    cpuCores: z
      .number({ error: required(`a whole number of CPU cores from 1 to ${MAX_CPU_CORES}`) })
      .int("expected a whole number of CPU cores")
      .min(1, "must be at least 1")
      .max(MAX_CPU_CORES, `must be at most ${MAX_CPU_CORES}`)
      .optional(),
    /** Host memory (RAM, not VRAM) for the whole request, GiB. */
    memoryGiB: gibField("host memory", MAX_MEMORY_GIB),
    /** Disk for the task's workspace for the whole request, GiB. */
    diskGiB: gibField("disk", MAX_DISK_GIB),
    /**
     * Bytes the task's inputs declare together (issue 36; the SDK sums `inputs[].bytes`): the
     * lease's disk must hold them, so the disk asked is at least this much.
     */
    inputBytes: z
      .number({ error: "expected the inputs' declared bytes, a whole number" })
      .int("expected whole bytes")
      .nonnegative("must be 0 or more")
      .max(MAX_DISK_GIB * 1024 ** 3, `must be at most ${MAX_DISK_GIB} GiB`)
      .optional(),
    /** Lease length in seconds. */
    duration: z
      .number({ error: required(`a lease length in whole seconds, 1 to ${MAX_DURATION_SECONDS}`) })
      .int("expected whole seconds")
      .min(1, "must be at least 1 second")
      .max(MAX_DURATION_SECONDS, `must be at most ${MAX_DURATION_SECONDS} seconds (366 days)`),
    /** `on-demand` (cannot be preempted) or `interruptible` (pays its bid, can be preempted). */
    mode: z.enum(["on-demand", "interruptible"], { error: 'expected "on-demand" or "interruptible"' }).default("on-demand"),
    /** Highest price per GPU-hour in USD. Required on demand; with a bid it defaults to the bid. */
    maxPricePerGpuHour: priceField("a price per GPU-hour").optional(),
    /** Interruptible only: the price per GPU-hour in USD offered (and paid). */
    bidPerGpuHour: priceField("a bid per GPU-hour").optional(),
    /** Region name or names (any of them); case-insensitive. Absent: any region. */
    region: z
      .union([regionName, z.array(regionName).min(1, "expected at least one region").max(16, "at most 16 regions")], {
        error: "expected a region name or a list of region names",
      })
      .optional(),
    /** Lowest provider reputation score accepted, 0..1 (see docs/matching.md for the score). */
    minReputation: z.number({ error: "expected a number from 0 to 1" }).min(0, "must be at least 0").max(1, "must be at most 1").default(0),
    /**
     * Most failed challenges a machine may have in its signed failure history (the last week:
     * failures its attestations carry and attestors' failure notices, common/attest/failure-notice.ts).
     */
    maxAttestFailures: z
      .number({ error: "expected a whole number of failed challenges, 0 or more" })
      .int("expected a whole number of failed challenges")
      .min(0, "must be 0 or more")
      .max(65_535, "must be at most 65535")
      .default(DEFAULT_MAX_ATTEST_FAILURES),
    /** Only machines with a current attestation from the attestor quorum. */
    attestedOnly: z.boolean({ error: "expected true or false" }).default(true),
    /**
     * Only machines whose GPUs' identity the attestor quorum verified by NVIDIA-signed
     * confidential-computing evidence (Hopper and later, host reporting CC mode on: one distinct
     * physical GPU of the claimed chip per unit, chained to NVIDIA's root, for the attestor's own
     * challenge). It says which GPUs answered, not that the task runs in a confidential VM. Default false.
     */
    gpuIdentityVerified: z.boolean({ error: "expected true or false" }).default(false),
    /** `machine`: all GPUs on one machine; `cluster`: several machines sharing a declared fast interconnect are accepted. */
    colocation: z.enum(["machine", "cluster"], { error: 'expected "machine" or "cluster"' }).default("machine"),
  })
  .superRefine((value, ctx) => {
    if (value.mode === "on-demand") {
      if (value.maxPricePerGpuHour === undefined) {
        ctx.addIssue({ code: "custom", path: ["maxPricePerGpuHour"], message: 'is required for mode "on-demand" (USD per GPU-hour, e.g. "2.50")' });
      }
      if (value.bidPerGpuHour !== undefined) {
        ctx.addIssue({ code: "custom", path: ["bidPerGpuHour"], message: 'is only accepted with mode "interruptible"' });
      }
    } else {
      if (value.bidPerGpuHour === undefined) {
        ctx.addIssue({ code: "custom", path: ["bidPerGpuHour"], message: 'is required for mode "interruptible" (USD per GPU-hour, e.g. "0.80")' });
      } else if (value.maxPricePerGpuHour !== undefined && value.maxPricePerGpuHour < value.bidPerGpuHour) {
        ctx.addIssue({ code: "custom", path: ["maxPricePerGpuHour"], message: "must not be lower than bidPerGpuHour (the bid is the price paid)" });
      }
    }
  })
  .transform((value) => {
    const interruptible = value.mode === "interruptible";
    const bidPerGpuHour = interruptible ? value.bidPerGpuHour! : null;
    const maxPricePerGpuHour = value.maxPricePerGpuHour ?? bidPerGpuHour!;
    const regions = value.region === undefined ? null : [...new Set((typeof value.region === "string" ? [value.region] : value.region).map((r) => r.toLowerCase()))];
    return {
      gpuType: value.gpuType,
      gpuCount: value.gpuCount,
      minVramMiB: value.minVramMiB ?? 0,
      /** Host resources asked for in total (0: not asked): CPU cores, memory and disk in MiB (GiB rounded up to whole MiB). */
      cpuCores: value.cpuCores ?? 0,
      memoryMiB: value.memoryGiB === undefined ? 0 : Math.ceil(value.memoryGiB * 1024),
      diskMiB: Math.max(value.diskGiB === undefined ? 0 : Math.ceil(value.diskGiB * 1024), Math.ceil((value.inputBytes ?? 0) / 1024 ** 2)),
      /** MiB the task's inputs declare (rounded up; 0: none declared), included in diskMiB. */
      inputMiB: Math.ceil((value.inputBytes ?? 0) / 1024 ** 2),
      duration: value.duration,
      mode: value.mode,
      interruptible,
      /** Cap per GPU-hour in base units. */
      maxPricePerGpuHour,
      /** The cap as the contract takes it: whole base units per unit-second (exactly equivalent for offer prices). */
      maxPricePerUnitSecond: perSecondFloor(maxPricePerGpuHour),
      /** Interruptible: bid per GPU-hour in base units as typed. */
      bidPerGpuHour,
      /** Interruptible: the bid as the contract takes it (rounded down to whole base units per second). */
      bidPerUnitSecond: bidPerGpuHour === null ? null : perSecondFloor(bidPerGpuHour),
      /** Lower-cased region names, or null for any region. */
      regions,
      minReputation: value.minReputation,
      maxAttestFailures: value.maxAttestFailures,
      attestedOnly: value.attestedOnly,
      gpuIdentityVerified: value.gpuIdentityVerified,
      colocation: value.colocation,
    };
  });

/** What callers send (JSON-friendly). */
export type MatchRequestInput = z.input<typeof matchRequestSchema>;
/** A validated, normalized request. */
export type MatchRequest = z.output<typeof matchRequestSchema>;

/**
 * Validates a renter's request. Throws InvalidInputError naming every bad field (`gpuCount`,
 * `maxPricePerGpuHour`, ...) and what is accepted; nothing else happens on bad input.
 *
 * @example
 * import { parseMatchRequest } from "suanli/common/matching";
 * const request = parseMatchRequest({ gpuType: "A100", gpuCount: 4, duration: 3600, maxPricePerGpuHour: "2.50" });
 */
export function parseMatchRequest(input: unknown): MatchRequest {
  return parseInput(matchRequestSchema, input, "match request");
}
