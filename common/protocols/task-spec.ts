/**
 * The task spec: what a renter asks a provider to run. Shared by the SDK (which builds and sends
 * it) and the provider (which validates it at the boundary). Environment values can be marked
 * secret: `env: { TOKEN: { value: "...", secret: true } }` — they reach the task's process and
 * nothing else (never logs, errors, results or the provider's store).
 */
import { z } from "zod";
import { sealedValueSchema } from "../sealed.js";
import { isCid, taskInputsSchema } from "./task-inputs.js";

/** The shortest checkpoint period a renter may ask for: each snapshot hashes the whole folder. */
export const MIN_CHECKPOINT_PERIOD_SECONDS = 10;

/** Env names a task may not set: the provider owns device selection and its own namespace. */
const RESERVED_ENV = /^(CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|SUANLI_.*)$/;

const envNameSchema = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, "expected an environment variable name (letters, digits, _; not starting with a digit)")
  .refine((name) => !RESERVED_ENV.test(name), {
    error: (issue) => `${String(issue.input)} is set by the provider (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER and SUANLI_* are reserved)`,
  });

const envValueSchema = z.union([
  z.string().max(32 * 1024),
  z.strictObject({
    value: z
      .string()
      .min(1)
      .max(32 * 1024),
    /** Passed to the task, replaced by `[secret:NAME]` everywhere else. */
    secret: z.literal(true),
  }),
  z.strictObject({
    /** The value sealed to the provider's encryption key (common/sealed.ts): relays see only this. */
    sealed: sealedValueSchema,
    secret: z.literal(true),
  }),
]);

const bundleUrlSchema = z
  .string()
  .max(2048)
  .refine(
    (value) => {
      try {
        return ["http:", "https:", "file:"].includes(new URL(value).protocol);
      } catch {
        return false;
      }
    },
    { message: "expected an http(s):// or file:// URL" },
  );

const sha256Schema = z
  .string()
  .regex(/^(0x)?[0-9a-fA-F]{64}$/, "expected a sha256 as 64 hex digits")
  .transform((value) => value.replace(/^0x/, "").toLowerCase());

/** Transports Podman and Docker read before registry syntax: each names a file or store of the provider's host. */
export const IMAGE_TRANSPORT_PREFIX = /^(docker|docker-archive|docker-daemon|oci|oci-archive|dir|containers-storage|ostree|sif|tarball):/i;

const imageComponent = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const imageDomain = "(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\\[[0-9A-Fa-f:.]+\\])(?::[0-9]{1,5})?";
/** The registry reference grammar (distribution/reference): `[host[:port]/]path[:tag][@sha256:digest]`. */
export const IMAGE_REFERENCE = new RegExp(`^(?:${imageDomain}/)?${imageComponent}(?:/${imageComponent})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$`);

/**
 * A registry reference the engine pulls: `registry.example.com/team/model:tag`,
 * `name@sha256:<64 hex>`, `pytorch/pytorch:2.3.0` (Docker Hub). Transports that read the
 * provider's own files or stores (`docker-archive:/path`, `oci:`, `dir:`, `containers-storage:`)
 * are refused: an archive comes by URL with a sha256 (`imageArchive`).
 */
export const imageReferenceSchema = z
  .string()
  .min(1)
  .max(512)
  .refine((value) => !IMAGE_TRANSPORT_PREFIX.test(value), {
    error: (issue) =>
      `${String(issue.input).split(":")[0]}: is a transport, not a registry reference; give a registry reference (host/name:tag or name@sha256:...) or an archive by URL (imageArchive / imageUrl with its sha256)`,
    abort: true,
  })
  .regex(IMAGE_REFERENCE, "expected a registry reference: [host[:port]/]name[:tag][@sha256:<64 hex>], lowercase name");

/** Task liveness's silence bound (spec.taskLiveness.silenceSeconds): the least, the most and the default. */
export const TASK_SILENCE_SECONDS = { min: 5, max: 86_400, default: 120 } as const;

export const taskSpecSchema = z
  .strictObject({
    /** A .tar.gz of the workspace: fetched, checked against sha256, unpacked before the command runs. */
    bundle: z
      .strictObject({
        url: bundleUrlSchema,
        /** Hex sha256 of the bundle file (64 digits, optional 0x). Required: a bundle is never run unchecked. */
        sha256: sha256Schema,
      })
      .optional(),
    /** Container image from a registry (container runtime only), e.g. `nvcr.io/nvidia/pytorch:24.03-py3` or `name@sha256:...`. */
    image: imageReferenceSchema
      .describe(
        "A registry reference the provider's engine pulls (container runtime): [host[:port]/]name[:tag][@sha256:digest]. Transports (docker-archive:, oci:, dir:, ...) are refused.",
      )
      .optional(),
    /**
     * A container image as an archive (container runtime only): what `podman save` / `docker save`
     * writes (docker-archive or oci-archive, optionally gzipped), fetched like a bundle and checked
     * against its sha256 before it is loaded. Not with `image`.
     */
    imageArchive: z
      .strictObject({
        url: bundleUrlSchema,
        /** Hex sha256 of the archive file (64 digits, optional 0x). Required: nothing unchecked is loaded. */
        sha256: sha256Schema,
      })
      .describe("A container image archive by URL (docker-archive or oci-archive .tar, optionally gzipped) with its required sha256; loaded by the provider's engine.")
      .optional(),
    /** A string runs through `/bin/sh -c`; an array is an argv run directly (no shell). */
    command: z.union([
      z
        .string()
        .min(1)
        .max(16 * 1024),
      z
        .array(z.string().max(16 * 1024))
        .min(1)
        .max(512),
    ]),
    /**
     * TCP ports the task serves (an inference server): the renter reaches them through the
     * provider with `client.forward` while the task runs. No other port is reachable.
     */
    ports: z
      .array(z.number().int().min(1).max(65_535))
      .max(16)
      .refine((ports) => new Set(ports).size === ports.length, { message: "ports must not repeat" })
      .optional(),
    /**
     * One machine of a group job (`colocation: "cluster"`): its rank, the number of machines,
     * and (ranks above 0) where rank 0 listens. The task gets SUANLI_RANK, SUANLI_WORLD_SIZE,
     * SUANLI_MASTER_ADDR and SUANLI_MASTER_PORT; rank 0's provider fills in its own address.
     */
    group: z
      .strictObject({
        rank: z.number().int().min(0).max(1023),
        worldSize: z.number().int().min(2).max(1024),
        masterAddr: z
          .string()
          .min(1)
          .max(253)
          .regex(/^[A-Za-z0-9.:_-]+$/, "expected a host name or IP address")
          .optional(),
        masterPort: z.number().int().min(1).max(65_535).optional(),
      })
      .refine((group) => group.rank < group.worldSize, { message: "rank must be below worldSize", path: ["rank"] })
      .refine((group) => group.rank === 0 || (group.masterAddr !== undefined && group.masterPort !== undefined), {
        message: "ranks above 0 need masterAddr and masterPort (rank 0's provider answers them)",
        path: ["masterAddr"],
      })
      .optional(),
    /**
     * Task liveness, opted into by the renter (docs/attestation.md, "Task liveness"): the task
     * gets SUANLI_LIVENESS_NONCE and SUANLI_LIVENESS_FILE and rewrites the nonce into that file at
     * least every `silenceSeconds` while it runs (its heartbeat). A task silent for longer is
     * stopped by the provider's node and its lease completed as the renter's (`TaskSilentError`:
     * paid until then, the rest of the deposit refunded, no SLA credit, no fault). Nothing the task
     * writes decides the provider's own liveness or a collateral payout (issue #34, finding 2).
     */
    taskLiveness: z
      .strictObject({
        /** Random, chosen by the renter's SDK for this task (16 to 64 bytes as hex). */
        nonce: z.string().regex(/^[0-9a-f]{32,128}$/, "expected the nonce as 32 to 128 lowercase hex digits"),
        /** Seconds without a heartbeat before the task is stopped (TASK_SILENCE_SECONDS: 5 to 86,400; default 120). */
        silenceSeconds: z
          .number()
          .int("expected whole seconds")
          .min(TASK_SILENCE_SECONDS.min, `expected at least ${TASK_SILENCE_SECONDS.min} seconds`)
          .max(TASK_SILENCE_SECONDS.max, `expected at most ${TASK_SILENCE_SECONDS.max} seconds (a day)`)
          .optional(),
      })
      .optional(),
    /**
     * Content-addressed data the task reads (docs/data.md): each CID is fetched by the provider's
     * data plane (cached across leases) and mounted read-only at its path under /data.
     */
    inputs: taskInputsSchema.describe("Data the task reads: [{ cid, mount: /data/<name>, bytes? }], each mounted read-only; at most 16.").optional(),
    /**
     * Checkpoints (docs/data.md): the task writes to $SUANLI_CHECKPOINT_DIR; the provider snapshots
     * that folder into UnixFS every `periodSeconds` (at least MIN_CHECKPOINT_PERIOD_SECONDS) and at
     * the task's end, and signs a record of each. Without it only the end snapshot is taken.
     */
    checkpoint: z
      .strictObject({
        periodSeconds: z
          .number()
          .int("expected whole seconds")
          .min(MIN_CHECKPOINT_PERIOD_SECONDS, `a checkpoint period is at least ${MIN_CHECKPOINT_PERIOD_SECONDS} seconds`)
          .max(86_400, "a checkpoint period is at most 86400 seconds (a day)"),
      })
      .optional(),
    /** A checkpoint CID to start from: fetched like an input and copied, writable, into $SUANLI_CHECKPOINT_DIR; the task gets $SUANLI_RESUMED_FROM. */
    resumeFrom: z
      .string()
      .max(200, "expected a CID of at most 200 characters")
      .refine(isCid, "expected a checkpoint CID (bafy... or Qm...; `suanli checkpoints TASK` prints them)")
      .optional(),
    /**
     * Where the provider may fetch `resumeFrom` from besides the peers it is connected to: the
     * libp2p addresses (ending in /p2p/<peer id>) of the providers whose leases took the checkpoint.
     * The SDK sets them when it resumes a task; the provider dials them under its own address policy.
     */
    resumeHints: z
      .array(
        z
          .string()
          .max(300, "expected a multiaddr of at most 300 characters")
          .regex(/^(\/[A-Za-z0-9._~:%-]+)+\/p2p\/[1-9A-HJ-NP-Za-km-z]{20,100}$/, "expected a libp2p multiaddr ending in /p2p/<peer id>"),
      )
      .max(8, "at most 8 resume hints")
      .optional(),
    env: z
      .record(envNameSchema, envValueSchema)
      .default({})
      .refine((env) => Object.keys(env).length <= 256, { message: "at most 256 variables" }),
  })
  .refine((spec) => spec.bundle !== undefined || spec.image !== undefined || spec.imageArchive !== undefined, {
    message: "a task needs a bundle (process runtime) or an image or imageArchive (container runtime)",
    path: ["bundle"],
  })
  .refine((spec) => spec.image === undefined || spec.imageArchive === undefined, {
    message: "give either image (a registry reference) or imageArchive (an archive by URL), not both",
    path: ["imageArchive"],
  })
  .refine((spec) => !Array.isArray(spec.command) || spec.command[0] !== "", { message: "the program (first element) must not be empty", path: ["command"] })
  .refine((spec) => spec.resumeHints === undefined || spec.resumeFrom !== undefined, {
    message: "resumeHints say where resumeFrom is: give resumeFrom too",
    path: ["resumeHints"],
  });

export type TaskSpec = z.output<typeof taskSpecSchema>;
