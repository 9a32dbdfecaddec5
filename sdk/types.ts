import type { Address, Hex } from "viem";
import { z } from "zod";
import type { SignedCheckpoint } from "../common/attest/checkpoint.js";
import type { SessionAction, SignedDelegation } from "../common/sessions.js";
import type { TaskState } from "../common/protocols/lease.js";
import { TASK_SILENCE_SECONDS } from "../common/protocols/task-spec.js";

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
 * seconds. Give `bundleUrl` + `sha256` (a .tar.gz run by the process runtime), or a container
 * image for providers running the container runtime: `image` (a registry reference) or
 * `imageUrl` + `sha256` (an image archive, what `podman save` / `docker save` writes).
 */
export const submitTaskParametersSchema = z
  .strictObject({
    /** A model ("A100", "H100-80GB-SXM"), a MIG slice or a class ("any 80GB"); or a list of them (any of them, at most 20). */
    gpuType: z.union([z.string(), z.array(z.string())], { error: 'is required: a GPU model or class, e.g. "A100"' }),
    /** GPUs wanted in total: a whole number from 1 to 1024. */
    gpuCount: z.number({ error: "is required: a whole number of GPUs" }),
    /** Seconds of service to pay for: a whole number from 1 to 31,622,400 (366 days); extend later for more. */
    duration: z.number({ error: "is required: the lease length in seconds" }),
    /** Where the provider fetches the task's .tar.gz (http(s):// or file://, at most 2048 characters); needs `sha256`. */
    bundleUrl: urlField(["http:", "https:", "file:"], "an http(s):// or file:// URL of a .tar.gz bundle").optional(),
    /** Hex sha256 (64 digits) of the bundle, or of the image archive when there is no bundle; required with either. */
    sha256: z
      .string()
      .regex(/^(0x)?[0-9a-fA-F]{64}$/, "expected 64 hex digits")
      .optional(),
    /** Container image from a registry, pulled by the provider's engine: `nvcr.io/nvidia/pytorch:24.03-py3`, `name@sha256:...`. */
    image: z.string().min(1).max(512).optional(),
    /**
     * Container image as an archive (docker-archive or oci-archive .tar, optionally gzipped) at an
     * http(s):// or file:// URL, loaded by the provider's engine; needs `sha256` (or `imageSha256`
     * when a bundle comes too). Not with `image`.
     */
    imageUrl: urlField(["http:", "https:", "file:"], "an http(s):// or file:// URL of an image archive (.tar or .tar.gz; a registry reference goes in `image`)").optional(),
    /** Hex sha256 of the image archive when `bundleUrl` + `sha256` are given as well. */
    imageSha256: z
      .string()
      .regex(/^(0x)?[0-9a-fA-F]{64}$/, "expected 64 hex digits")
      .optional(),
    /** A string runs through `/bin/sh -c`; an array is an argv. */
    command: z.union([z.string().min(1), z.array(z.string()).min(1)], { error: "is required: the command to run" }),
    /** Environment; `{ value, secret: true }` values reach the task only, never logs or stores. */
    env: z.record(z.string(), envValue).default({}),
    /**
     * Data the task reads (docs/data.md): `[{ cid, mount: "/data/imagenet", bytes? }]`, at most 16.
     * The provider fetches each CID (block by block, verified, cached across leases) and mounts it
     * read-only at `mount`. Declared `bytes` count against the disk the lease gets: an offer with
     * less is not matched.
     */
    inputs: z.array(z.object({ cid: z.string(), mount: z.string(), bytes: z.number().optional() })).optional(),
    /** Snapshot $SUANLI_CHECKPOINT_DIR every this many seconds (at least 10; docs/data.md); the provider also snapshots it at the task's end. */
    checkpointPeriodSeconds: z.number().optional(),
    /** A checkpoint CID (`client.checkpoints(taskId)`) to start from: copied, writable, into $SUANLI_CHECKPOINT_DIR; the task sees $SUANLI_RESUMED_FROM. */
    resumeFrom: z.string().optional(),
    /** TCP ports the task serves (at most 16): reachable with `client.forward` while it runs, and no other. */
    ports: z.array(z.number()).optional(),
    /** Highest price in USD per GPU-hour ("2.50" or 2.5; at most 6 decimals, 0.0036 to 10000). Required unless interruptible, where it defaults to the bid. */
    maxPricePerGpuHour: z.union([z.string(), z.number()]).optional(),
    /** Interruptible: run at `bidPerGpuHour`, cheaper, but the lease may be preempted (default false: on demand). */
    interruptible: z.boolean().default(false),
    /** Interruptible only, and required there: the price offered and paid, USD per GPU-hour (same format as maxPricePerGpuHour). */
    bidPerGpuHour: z.union([z.string(), z.number()]).optional(),
    /** A region name or a list (any of them, at most 16), case-insensitive. Default: any region. */
    region: z.union([z.string(), z.array(z.string())]).optional(),
    /** Least memory per GPU in MiB, a whole number from 1 to 1048576 (H100 80GB declares 81559). Default: no minimum. */
    minVramMiB: z.number().optional(),
    /**
     * Host resources for the whole task (all its GPUs together): CPU cores (whole number), memory
     * and disk in GiB. Offers declare them per GPU and the provider's runtime enforces them; only
     * machines whose GPUs add up to these match (docs/matching.md). Default: not asked.
     */
    cpuCores: z.number().optional(),
    /** Host memory for the whole task in GiB (offers declare it per GPU; the runtime's memory bound). Default: not asked. */
    memoryGiB: z.number().optional(),
    /** Workspace disk for the whole task in GiB (offers declare it per GPU). Default: not asked. */
    diskGiB: z.number().optional(),
    /** Lowest provider reputation score accepted, 0 to 1 (default 0). */
    minReputation: z.number().optional(),
    /**
     * Most failed challenges a machine may hold in the last week (default 3): its attestations'
     * signed `failures` and attestors' failure notices (docs/matching.md). 0: only machines that never failed.
     */
    maxAttestFailures: z.number().optional(),
    /** Only attested machines (default true). */
    attestedOnly: z.boolean().optional(),
    /**
     * Only machines whose GPUs' identity the attestor quorum verified by NVIDIA-signed
     * confidential-computing evidence (Hopper and later, CC mode on; default false): one distinct
     * physical GPU of the claimed chip per unit, not only a measured rate. It does not make the
     * task confidential (docs/matching.md).
     */
    gpuIdentityVerified: z.boolean().optional(),
    /** "cluster": accept a group of machines on a declared fast interconnect for large counts; "machine" (default): all GPUs on one machine. */
    colocation: z.enum(["machine", "cluster"]).optional(),
    /**
     * Task liveness (default off): the SDK draws a random nonce and sends it with the task spec; the
     * task rewrites $SUANLI_LIVENESS_NONCE into $SUANLI_LIVENESS_FILE at least every
     * `silenceSeconds` (default 120, 5 to 86,400). A task silent for longer is stopped by the
     * provider and its lease completed at your cost so far (`TaskSilentError`: the rest of the
     * deposit refunded): a hung task stops costing you. It never faults the provider.
     */
    taskLiveness: z
      .union([
        z.boolean(),
        z.strictObject({
          silenceSeconds: z
            .number()
            .int("expected whole seconds")
            .min(TASK_SILENCE_SECONDS.min, `expected at least ${TASK_SILENCE_SECONDS.min} seconds`)
            .max(TASK_SILENCE_SECONDS.max, `expected at most ${TASK_SILENCE_SECONDS.max} seconds (a day)`),
        }),
      ])
      .optional(),
    /** Re-match and restart on another provider when the lease faults or is preempted (default false); `wait` does the migrating. */
    autoMigrate: z.boolean().default(false),
  })
  .superRefine((value, ctx) => {
    if (!value.bundleUrl && !value.image && !value.imageUrl) {
      ctx.addIssue({ code: "custom", path: ["bundleUrl"], message: "a task needs bundleUrl (+ sha256), image (a registry reference) or imageUrl (+ sha256)" });
    }
    if (value.image && value.imageUrl) {
      ctx.addIssue({ code: "custom", path: ["imageUrl"], message: "give either image (a registry reference) or imageUrl (an image archive), not both" });
    }
    if (value.bundleUrl && !value.sha256) {
      ctx.addIssue({ code: "custom", path: ["sha256"], message: "is required with bundleUrl: the bundle's sha256 as 64 hex digits" });
    }
    if (value.imageUrl && !value.bundleUrl && !value.sha256 && !value.imageSha256) {
      ctx.addIssue({ code: "custom", path: ["sha256"], message: "is required with imageUrl: the image archive's sha256 as 64 hex digits" });
    }
    if (value.imageUrl && value.bundleUrl && !value.imageSha256) {
      ctx.addIssue({ code: "custom", path: ["imageSha256"], message: "is required with imageUrl and bundleUrl together: sha256 is the bundle's, imageSha256 the image archive's" });
    }
    if (value.sha256 && !value.bundleUrl && !value.imageUrl) {
      ctx.addIssue({ code: "custom", path: ["bundleUrl"], message: "sha256 was given without bundleUrl or imageUrl" });
    }
    if (value.imageSha256 && !value.imageUrl) {
      ctx.addIssue({ code: "custom", path: ["imageUrl"], message: "imageSha256 was given without imageUrl" });
    }
  });
/**
 * What `submitTask` takes: the GPUs wanted (matched against live offers) and the work to run.
 * Prices are USD per GPU-hour, durations whole seconds. Give `bundleUrl` + `sha256` (process
 * runtime), or `image` (a registry reference) or `imageUrl` + `sha256` (an image archive) for the
 * container runtime. Bad fields throw InvalidInputError naming them.
 *
 * @example
 * import { createClient, type SubmitTaskParameters } from "suanli/sdk";
 * const parameters: SubmitTaskParameters = {
 *   gpuType: "A100",
 *   gpuCount: 2,
 *   duration: 3600,
 *   maxPricePerGpuHour: "2.50",
 *   bundleUrl: "https://example.com/job.tar.gz",
 *   sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
 *   command: ["python", "train.py", "--epochs", "3"],
 *   env: { EPOCHS: "3", HF_TOKEN: { value: process.env.HF_TOKEN!, secret: true } },
 *   region: ["eu-west", "eu-central"],
 * };
 * const { taskId } = await client.submitTask(parameters);
 */
export type SubmitTaskParameters = z.input<typeof submitTaskParametersSchema>;

/**
 * One lease a task ran on (several after a migration), as the client recorded it when the lease
 * opened. Amounts are in the settlement token's base units.
 *
 * @example
 * import { createClient, type TaskAttempt } from "suanli/sdk";
 * const { attempts } = await client.status(taskId);
 * for (const attempt of attempts) {
 *   console.log(attempt.leaseId, attempt.provider, `${attempt.units}× ${attempt.model}`, attempt.migratedBecause ?? "current");
 * }
 */
export type TaskAttempt = {
  /** The lease's id in the market contract. */
  leaseId: bigint;
  /** The provider's wallet address. */
  provider: Address;
  /** The provider node's libp2p peer id. */
  peerId: string;
  /** The provider node's multiaddrs when the lease opened. */
  addrs: string[];
  /** The provider's machine id in the registry. */
  machineId: number;
  /** The machine's GPU model, e.g. "A100-80GB". */
  model: string;
  /** GPUs leased on this machine. */
  units: number;
  /** Price per GPU per second in token base units (the bid, for an interruptible lease). */
  pricePerUnitSecond: bigint;
  /** Deposit paid into the lease so far (extensions included), token base units. */
  deposit: bigint;
  /** Whether the lease is interruptible (may be preempted). */
  interruptible: boolean;
  /** Block of the openLease transaction (receipt reads start here). */
  openedBlock: bigint;
  /** When the lease opened, unix seconds (the client's clock). */
  openedAt: number;
  /** Gas used by the renter's transactions, per step. */
  gas: { step: string; gasUsed: bigint; transaction: Hex }[];
  /** Why this attempt was left for another (lease faulted, preempted, resumed by hand). */
  migratedBecause?: string;
  /** The checkpoint CID this lease started from (spec.resumeFrom: a migration or `resume` picked it; docs/data.md "Resume"). */
  resumedFrom?: string;
  /** The newest checkpoint record the lease's provider signed for it, as the client last verified it (kept for resuming after the provider is gone). */
  checkpoint?: SignedCheckpoint;
  /**
   * The newest of this lease's checkpoints copied to the renter's own node (client option
   * `pinCheckpointsOn`; docs/data.md "Where data lives"): its record, the node's API URL and the
   * node's libp2p addresses, which a resumed lease is given as hints to fetch the CID from.
   */
  checkpointCopy?: { checkpoint: SignedCheckpoint; nodeUrl: string; addrs: string[] };
  /**
   * A group task (one lease per machine of a cluster): every lease of the group by rank, this
   * one first (rank 0, the master). Absent for a single-machine task. wait, cancel, extend,
   * receipts and migrations act on all of them.
   */
  group?: TaskAttempt[];
};

/**
 * What `submitTask` returns once the provider accepted the task: the task id every other action
 * takes, and the lease it runs on.
 *
 * @example
 * import { createClient, type SubmitTaskReturnType } from "suanli/sdk";
 * const submitted: SubmitTaskReturnType = await client.submitTask(parameters);
 * console.log(submitted.taskId, submitted.leaseId, submitted.provider, submitted.attempt.deposit);
 */
export type SubmitTaskReturnType = {
  /** The client's id for the task (`task-<leaseId>-<random>`); pass it to status, logs, wait, cancel... */
  taskId: string;
  /** The lease opened for it. */
  leaseId: bigint;
  /** The provider's wallet address. */
  provider: Address;
  status: "submitted";
  /** The lease in detail (price, deposit, gas per step). */
  attempt: TaskAttempt;
};

/**
 * What `status` returns: the task on its provider (state, heartbeat, GPU metrics, exit code)
 * and its current lease on-chain. Amounts are in token base units, chain times in unix seconds,
 * provider times in unix milliseconds.
 *
 * @example
 * import { createClient, type TaskStatus } from "suanli/sdk";
 * const status: TaskStatus = await client.status(taskId);
 * console.log(status.state, status.lease.status, `earned ${status.lease.accrued} of ${status.lease.deposit}`);
 * for (const gpu of status.gpus) console.log(gpu.device, gpu.utilizationPct, gpu.memoryUsedMiB);
 * if (status.error) console.error(status.error.name, status.error.message);
 */
export type TaskStatus = {
  taskId: string;
  /** The task's state on the provider, or "unknown" when the provider cannot be reached. */
  state: TaskState | "unknown";
  /** The current lease (the latest attempt's). */
  leaseId: bigint;
  provider: Address;
  /** The lease on-chain. */
  lease: {
    status: "None" | "Open" | "Active" | "Ended" | "Settled" | "Cancelled";
    /** Why it ended (e.g. "Completed", "Faulted", "Preempted"); "None" while it runs. */
    endReason: string;
    /**
     * A completion whose provider's collateral is still held (issue #34 finding 1): until this time (unix seconds,
     * the completion's stop + the 600 s fault window) a fault observed before the completion can still land and
     * credit the renter; after it anyone's `claim` releases the collateral. null for every other lease.
     */
    collateralHeldUntil: number | null;
    /** Once the renter closed it for more than it used: which minimum it paid ("Commitment", "PreemptionNotice"), as in TaskReceipt. */
    minimumCharge: { reason: "Commitment" | "PreemptionNotice"; amount: bigint } | null;
    deposit: bigint;
    /** What the provider has earned so far (paid included). */
    accrued: bigint;
    /** When the provider activated it, unix seconds (0 while Open). */
    activatedAt: number;
    /** While Open: the provider must activate by then, or the renter may cancel with a penalty paid to it. */
    startDeadline: number;
    /** When the paid time runs out, unix seconds. */
    end: number;
    /**
     * Seconds metered so far by the wall clock (the chain's clock moves only with blocks, so a
     * quiet devnet would show none): from activation to now, the lease's end or its stop.
     */
    elapsedSeconds: number;
    /** What the lease has cost by now: `accrued` as of the latest block, plus what accrued since by the wall clock. */
    accruedNow: bigint;
  };
  /** When the task started on the provider, unix ms. */
  startedAt: number | null;
  /** When the provider last sampled the task, unix ms. */
  heartbeatAt: number | null;
  exitCode: number | null;
  /** Why the task failed, as the provider reports it. */
  error: { name: string; message: string } | null;
  /** Per-GPU metrics from the provider's last sample (null where the GPU does not report one). */
  gpus: { device: string; utilizationPct: number | null; memoryUsedMiB: number | null; temperatureC: number | null; powerW: number | null }[];
  /**
   * The task's container image on the provider: what was asked for (`ref`), the engine's image id
   * (`digest`), and `cached: true` when the provider already had it (nothing pulled or loaded for
   * this task). null for a bundle task, before the image is prepared, or from an older provider.
   */
  image: { ref: string; digest: string; cached: boolean } | null;
  attempts: TaskAttempt[];
};

/**
 * What a finished task cost, per lease it ran on (returned by wait, cancel and settle). Amounts
 * are in the settlement token's base units (`client.deployment.token.decimals`).
 *
 * @example
 * import { createClient, type TaskReceipt } from "suanli/sdk";
 * import { formatUnits } from "viem";
 * const receipt: TaskReceipt = await client.wait(taskId);
 * const { symbol, decimals } = client.deployment.token;
 * console.log(`exit ${receipt.exitCode}: paid ${formatUnits(receipt.totalCost, decimals)} ${symbol}, refunded ${formatUnits(receipt.totalRefunded, decimals)}`);
 * for (const lease of receipt.leases) console.log(lease.leaseId, lease.endReason, `${lease.seconds} s`, lease.cost);
 * if (receipt.completion && !receipt.completion.verified) console.warn("completion report does not match the chain");
 */
export type TaskReceipt = {
  taskId: string;
  state: TaskState | "unknown";
  exitCode: number | null;
  /**
   * Why the task did not succeed, by name, as its provider reported it: e.g. `TaskSilentError` (its
   * liveness heartbeat stopped: ended as the renter's side), `TaskExceededError`, `TaskOutOfMemoryError`,
   * `TaskLostError`. null when it succeeded or the provider said nothing.
   */
  error: { name: string; message: string } | null;
  /**
   * The provider's signed completion report checked against its on-chain copy. `outputCid`: the
   * output's CID when the provider pinned it by CID (its data plane on; docs/data.md "Outputs"),
   * kept only when it is the CID the signed `outputDigest` names (common/output-cid.ts): get it
   * from any node with `getData(outputCid, ...)`, which verifies the bytes against it.
   */
  completion: { exitCode: number; outputDigest: Hex; unitSeconds: bigint; verified: boolean; outputCid: string | null } | null;
  leases: {
    leaseId: bigint;
    provider: Address;
    machineId: number;
    model: string;
    units: number;
    status: string;
    endReason: string;
    /**
     * A completion whose provider's collateral is still held (issue #34 finding 1): until this time (unix seconds,
     * the completion's stop + the 600 s fault window) a fault observed before the completion can still land and
     * credit the renter; after it anyone's `claim` releases the collateral. null for every other lease.
     */
    collateralHeldUntil: number | null;
    /**
     * Ended by the provider's completion report alone before the paid time ran out (endReason
     * "Completed" with part of the deposit refunded): the task ended early (it exited, failed or
     * went silent). Not co-signed by the renter, so it counts no completion in the provider's
     * reputation (issue #34, finding 1); a renter who agrees co-signs with `settle` ("CoSigned").
     */
    earlyCompletion: boolean;
    /** Seconds metered (activation to stop). */
    seconds: number;
    deposit: bigint;
    /** The provider's total for the lease. */
    cost: bigint;
    refunded: bigint;
    /** SLA credit or penalty paid to the renter from the provider's collateral. */
    credit: bigint;
    /**
     * When the renter's close paid more than the seconds used, which minimum set it and the amount above units x
     * price x seconds: "Commitment" (a reserved-term tier closed before its minimum duration pays that minimum) or
     * "PreemptionNotice" (a lease that preempted others pays at least the notice). null otherwise.
     */
    minimumCharge: { reason: "Commitment" | "PreemptionNotice"; amount: bigint } | null;
    gas: { step: string; gasUsed: bigint; transaction: Hex }[];
    /** The checkpoint CID the lease started from (a resumed lease), null otherwise. */
    resumedFrom: string | null;
  }[];
  /** Sum of the leases' `cost`. */
  totalCost: bigint;
  /** Sum of the leases' `refunded`. */
  totalRefunded: bigint;
  /** Sum of the leases' `credit`. */
  totalCredit: bigint;
  /** Gas used by the renter's transactions over all leases (in gas units, not tokens). */
  totalGasUsed: bigint;
};

/**
 * A session: the key and the wallet's delegation to it. `privateKey` is what a program keeps to
 * use the session again (useSession); whoever holds it may act within the delegation until it
 * expires or is revoked, so keep it like a password, or in memory only.
 *
 * @example
 * import type { Session } from "suanli/sdk";
 * const session: Session = await client.startSession();
 * console.log(session.sessionKey, new Date(session.expiresAt * 1000), session.hash);
 */
export type Session = {
  /** The session key's address: it signs the requests. */
  sessionKey: Address;
  /** The wallet that delegated. */
  renter: Address;
  /** What the key may do. */
  actions: SessionAction[];
  /** The leases it may act on; empty: every lease of the wallet. */
  leaseIds: bigint[];
  /** Unix seconds. */
  expiresAt: number;
  /** The delegation's EIP-712 hash: what revokeSession revokes on-chain. */
  hash: Hex;
  /** The session key's private key. */
  privateKey: Hex;
  /** The signed delegation sent with each request. */
  delegation: SignedDelegation;
};
