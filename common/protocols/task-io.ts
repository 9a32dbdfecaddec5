/**
 * Messages of the task I/O protocols between a renter and the provider running its task:
 * output (download the task's output folder), exec (run a command in the task's environment)
 * and forward (a TCP connection to a port the task declared). Each request is one
 * length-prefixed JSON frame carrying a RenterRequest signed by the lease's renter (action
 * `output`, `exec` or `forward`; see common/protocols/lease.ts), answered by one JSON frame; then
 * the stream carries that protocol's data frames:
 *
 * - output `list`: the answer is the manifest, and the stream closes.
 * - output `read`: the answer is the manifest, then the bytes of the files in manifest order from
 *   (`fromPath`, `fromOffset`) to the end, in frames of up to OUTPUT_FRAME_BYTES; the renter knows
 *   where each file ends from its size; it acknowledges every OUTPUT_ACK_BYTES with a one-byte
 *   frame (flow control). A download resumes by asking again from where it stopped.
 * - exec: frames `{ stream, data }` (base64) until a final `{ exitCode, signal }`; the renter may
 *   send `{ stdin }` frames and `{ stdinEnd: true }`, and with `tty` `{ resize: { rows, cols } }`.
 * - forward: bytes both ways, each frame typed by its first byte (data or acknowledgement; see
 *   common/p2p/socket-pipe.ts); a data frame without bytes is a TCP half-close.
 *
 * Errors before the data starts are the answer frame `{ ok: false, error }` of common/p2p/reqresp.ts.
 */
import { z } from "zod";

/** Largest data frame of an output download. */
export const OUTPUT_FRAME_BYTES = 256 * 1024;
/**
 * Flow control of an output read: the provider keeps at most OUTPUT_WINDOW_BYTES sent but not
 * acknowledged; the renter sends a one-byte frame for every OUTPUT_ACK_BYTES it has written.
 */
export const OUTPUT_WINDOW_BYTES = 2 * 1024 * 1024;
export const OUTPUT_ACK_BYTES = 512 * 1024;
/** Largest data frame of a forwarded connection or an exec stream. */
export const FORWARD_FRAME_BYTES = 64 * 1024;
/** Largest control frame (request, answer, manifest). */
export const TASK_IO_CONTROL_MAX_BYTES = 4 * 1024 * 1024;
/** Files listed in one manifest at most (a larger output is refused with OutputTooLargeError). */
export const OUTPUT_MAX_FILES = 10_000;

const relPathSchema = z
  .string()
  .min(1)
  .max(4096)
  .refine((value) => !value.startsWith("/") && !value.split("/").some((part) => part === "" || part === "." || part === ".."), {
    message: "expected a relative POSIX path without empty, '.' or '..' segments",
  });

/** What the renter asks of the output protocol (without auth: what the signature's bodyHash binds). */
export const outputParamsSchema = z.discriminatedUnion("op", [
  z.strictObject({ op: z.literal("list") }),
  z.strictObject({
    op: z.literal("read"),
    /** The file to start at (manifest order); absent: the first. */
    fromPath: relPathSchema.optional(),
    /** Bytes of `fromPath` to skip (already downloaded). */
    fromOffset: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).default(0),
  }),
]);
export type OutputParams = z.output<typeof outputParamsSchema>;

/** How long the provider keeps outputs and how much: also what it advertises. */
export const outputPolicySchema = z.strictObject({
  /** Seconds the outputs stay downloadable after the task ends. */
  retentionSeconds: z.number().int().nonnegative(),
  /** Largest output folder kept per lease, bytes. */
  maxBytes: z.number().int().nonnegative(),
});
export type OutputPolicy = z.output<typeof outputPolicySchema>;

export const outputManifestSchema = z.strictObject({
  leaseId: z.string().regex(/^\d{1,78}$/),
  /** `final`: the task is over and these are the files its completion report digests; `snapshot`: it still runs. */
  kind: z.enum(["final", "snapshot"]),
  /** The files in digest order (common/output-digest.ts). */
  files: z.array(z.strictObject({ path: relPathSchema, size: z.number().int().nonnegative() })).max(OUTPUT_MAX_FILES),
  totalBytes: z.number().int().nonnegative(),
  /** Unix ms after which a final output is deleted; null for a snapshot. */
  expiresAt: z.number().int().nullable(),
  policy: outputPolicySchema,
});
export type OutputManifest = z.output<typeof outputManifestSchema>;

/** A command for exec: a string through /bin/sh -c, or an argv. */
export const execParamsSchema = z.strictObject({
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
  /** Seconds the command may run (capped by the provider's exec.maxSeconds and the lease). */
  timeoutSeconds: z.number().int().min(1).max(86_400).default(300),
  /**
   * Run the command on a pseudo-terminal of this size (interactive: `npx suanli exec -t`): its
   * stdout and stderr merge into `stdout` frames, and `{ resize }` input frames change the size.
   * Absent: plain pipes. A provider before this field refuses the request as invalid.
   */
  tty: z
    .strictObject({
      rows: z.number().int().min(1).max(1000),
      cols: z.number().int().min(1).max(1000),
      term: z
        .string()
        .regex(/^[A-Za-z0-9._+-]{1,64}$/)
        .default("xterm-256color"),
    })
    .optional(),
});
export type ExecParams = z.output<typeof execParamsSchema>;
export const execStartedSchema = z.strictObject({ pid: z.number().int().nullable() });
/** Frames from the provider during an exec. */
export const execFrameSchema = z.union([
  z.strictObject({ stream: z.enum(["stdout", "stderr"]), data: z.base64().max(4 * FORWARD_FRAME_BYTES) }),
  z.strictObject({ exitCode: z.number().int().nullable(), signal: z.string().max(32).nullable(), timedOut: z.boolean() }),
]);
/** Frames from the renter during an exec. */
export const execInputFrameSchema = z.union([
  z.strictObject({ stdin: z.base64().max(4 * FORWARD_FRAME_BYTES) }),
  z.strictObject({ stdinEnd: z.literal(true) }),
  /** A TTY exec's new terminal size. */
  z.strictObject({ resize: z.strictObject({ rows: z.number().int().min(1).max(1000), cols: z.number().int().min(1).max(1000) }) }),
]);

/** A TCP port of the task (one the spec declared in `ports`). */
export const forwardParamsSchema = z.strictObject({ port: z.number().int().min(1).max(65_535) });
export const forwardOpenedSchema = z.strictObject({ port: z.number().int() });
