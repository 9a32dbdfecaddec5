import type { Address, Hex } from "viem";
import { z } from "zod";
import type { TaskState } from "../common/protocols/lease.js";

const urlField = (protocols: string[], what: string) =>
  z
    .string({ error: `expected ${what}` })
    .max(2048)
    .refine(
      (value) => {
        try {
          return protocols.includes(new URL(value).protocol);
        } catch {
          return false;
        }
      },
      { message: `expected ${what} (${protocols.map((p) => p.replace(":", "://")).join(" or ")})` },
    );

const envValue = z.union([z.string(), z.strictObject({ value: z.string().min(1), secret: z.literal(true) })]);

/**
 * What `submitTask` takes. Prices are USD per GPU-hour (decimal strings or numbers), durations
 * seconds. Give `bundleUrl` + `sha256` (a .tar.gz run by the process runtime) or `imageUrl`
 * (a container image, for providers running the container runtime).
 */
export const submitTaskParametersSchema = z
  .strictObject({
    /** A model ("A100", "H100-80GB-SXM"), a MIG slice or a class ("any 80GB"). */
    gpuType: z.union([z.string(), z.array(z.string())], { error: "is required: a GPU model or class, e.g. \"A100\"" }),
    gpuCount: z.number({ error: "is required: a whole number of GPUs" }),
    /** Seconds of service to pay for. */
    duration: z.number({ error: "is required: the lease length in seconds" }),
    bundleUrl: urlField(["http:", "https:", "file:"], "an http(s):// or file:// URL of a .tar.gz bundle").optional(),
    /** Hex sha256 of the bundle (64 digits); required with bundleUrl. */
    sha256: z.string().regex(/^(0x)?[0-9a-fA-F]{64}$/, "expected 64 hex digits").optional(),
    /** Container image reference, e.g. `nvcr.io/nvidia/pytorch:24.03-py3`. */
    imageUrl: z.string().min(1).max(512).optional(),
    /** A string runs through `/bin/sh -c`; an array is an argv. */
    command: z.union([z.string().min(1), z.array(z.string()).min(1)], { error: "is required: the command to run" }),
    /** Environment; `{ value, secret: true }` values reach the task only, never logs or stores. */
    env: z.record(z.string(), envValue).default({}),
    maxPricePerGpuHour: z.union([z.string(), z.number()]).optional(),
    /** Interruptible: run at this bid (USD per GPU-hour); the lease may be preempted. */
    interruptible: z.boolean().default(false),
    bidPerGpuHour: z.union([z.string(), z.number()]).optional(),
    region: z.union([z.string(), z.array(z.string())]).optional(),
    minVramMiB: z.number().optional(),
    minReputation: z.number().optional(),
    /** Only attested machines (default true). */
    attestedOnly: z.boolean().optional(),
    /** Accept a group of machines on a declared fast interconnect for large counts. */
    colocation: z.enum(["machine", "cluster"]).optional(),
    /** Re-match and restart on another provider when the lease faults or is preempted. */
    autoMigrate: z.boolean().default(false),
  })
  .superRefine((value, ctx) => {
    if (!value.bundleUrl && !value.imageUrl) {
      ctx.addIssue({ code: "custom", path: ["bundleUrl"], message: "a task needs bundleUrl (+ sha256) or imageUrl" });
    }
    if (value.bundleUrl && !value.sha256) {
      ctx.addIssue({ code: "custom", path: ["sha256"], message: "is required with bundleUrl: the bundle's sha256 as 64 hex digits" });
    }
    if (value.sha256 && !value.bundleUrl) {
      ctx.addIssue({ code: "custom", path: ["bundleUrl"], message: "sha256 was given without bundleUrl" });
    }
  });
export type SubmitTaskParameters = z.input<typeof submitTaskParametersSchema>;

/** One lease a task ran on (several after a migration). */
export type TaskAttempt = {
  leaseId: bigint;
  provider: Address;
  peerId: string;
  addrs: string[];
  machineId: number;
  model: string;
  units: number;
  pricePerUnitSecond: bigint;
  deposit: bigint;
  interruptible: boolean;
  /** Block of the openLease transaction (receipt reads start here). */
  openedBlock: bigint;
  openedAt: number;
  /** Gas used by the renter's transactions, per step. */
  gas: { step: string; gasUsed: bigint; transaction: Hex }[];
  /** Why this attempt was left for another (lease faulted, preempted). */
  migratedBecause?: string;
};

export type SubmitTaskReturnType = {
  taskId: string;
  leaseId: bigint;
  provider: Address;
  status: "submitted";
  attempt: TaskAttempt;
};

export type TaskStatus = {
  taskId: string;
  /** The task's state on the provider, or "unknown" when the provider cannot be reached. */
  state: TaskState | "unknown";
  leaseId: bigint;
  provider: Address;
  /** The lease on-chain. */
  lease: {
    status: "None" | "Open" | "Active" | "Ended" | "Settled" | "Cancelled";
    endReason: string;
    deposit: bigint;
    /** What the provider has earned so far (paid included). */
    accrued: bigint;
    activatedAt: number;
    /** While Open: the provider must activate by then, or the renter may cancel with a penalty paid to it. */
    startDeadline: number;
    end: number;
  };
  startedAt: number | null;
  heartbeatAt: number | null;
  exitCode: number | null;
  error: { name: string; message: string } | null;
  gpus: { device: string; utilizationPct: number | null; memoryUsedMiB: number | null; temperatureC: number | null; powerW: number | null }[];
  attempts: TaskAttempt[];
};

/** What a finished task cost, per lease it ran on. */
export type TaskReceipt = {
  taskId: string;
  state: TaskState | "unknown";
  exitCode: number | null;
  /** The provider's signed completion report checked against its on-chain copy. */
  completion: { exitCode: number; outputDigest: Hex; unitSeconds: bigint; verified: boolean } | null;
  leases: {
    leaseId: bigint;
    provider: Address;
    machineId: number;
    model: string;
    units: number;
    status: string;
    endReason: string;
    /** Seconds metered (activation to stop). */
    seconds: number;
    deposit: bigint;
    /** The provider's total for the lease. */
    cost: bigint;
    refunded: bigint;
    /** SLA credit or penalty paid to the renter from the provider's collateral. */
    credit: bigint;
    gas: { step: string; gasUsed: bigint; transaction: Hex }[];
  }[];
  totalCost: bigint;
  totalRefunded: bigint;
  totalCredit: bigint;
  totalGasUsed: bigint;
};
