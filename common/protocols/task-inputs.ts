/**
 * Task inputs (issue 36, "Use it in a task"): content-addressed data a task reads, each a CID the
 * provider fetches through its data plane and mounts read-only at a path under /data. One schema
 * for the SDK (which refuses bad inputs before anything is reserved or paid) and the provider
 * (which validates the spec it receives): docs/data.md.
 */
import { CID } from "multiformats/cid";
import { z } from "zod";

/** At most this many inputs per task (each is one read-only mount). */
export const MAX_TASK_INPUTS = 16;

/** Whether `value` parses as a CID (v0 `Qm...` or v1 `bafy...`). */
export function isCid(value: string): boolean {
  try {
    CID.parse(value.trim());
    return true;
  } catch {
    return false;
  }
}

/** One input of a task: a CID and where the task sees it (under /data). */
export const taskInputSchema = z.strictObject({
  cid: z
    .string()
    .min(8, "expected a CID (bafy... or Qm...; `suanli data add` prints one)")
    .max(200, "expected a CID of at most 200 characters")
    .refine(isCid, "expected a CID (bafy... or Qm...; `suanli data add` prints one)"),
  mount: z
    .string()
    .max(200, "expected a mount path of at most 200 characters")
    .regex(/^\/data(\/[A-Za-z0-9_][A-Za-z0-9._-]*)+$/, "a mount is a path under /data, e.g. /data/imagenet"),
  /** The size the renter declares (bytes of file content): matching refuses offers whose disk for the lease is smaller. */
  bytes: z.number().int("expected whole bytes").nonnegative("expected bytes, 0 or more").optional(),
});
export type TaskInput = z.output<typeof taskInputSchema>;

/** A task's inputs: valid CIDs, distinct mounts, none inside another, at most MAX_TASK_INPUTS. */
export const taskInputsSchema = z
  .array(taskInputSchema)
  .max(MAX_TASK_INPUTS, `at most ${MAX_TASK_INPUTS} inputs`)
  .superRefine((inputs, ctx) => {
    const mounts = inputs.map((input) => input.mount);
    mounts.forEach((mount, index) => {
      if (mounts.some((other, at) => at !== index && (other === mount || other.startsWith(`${mount}/`) || mount.startsWith(`${other}/`)))) {
        ctx.addIssue({ code: "custom", path: [index, "mount"], message: `${mount} is shared with or nested in another input's mount` });
      }
    });
  });

/** Bytes the inputs declare together (those without `bytes` count 0). */
export function declaredInputBytes(inputs: readonly TaskInput[] | undefined): number {
  return (inputs ?? []).reduce((sum, input) => sum + (input.bytes ?? 0), 0);
}

/**
 * `CID:/data/name` (the CLI's `--input`) as a task input; the mount may carry `:BYTES` after it
 * (`CID:/data/name:1073741824`) to declare the size. Validation is the schema's.
 */
export function parseInputFlag(value: string): { cid: string; mount: string; bytes?: number } {
  const [cid = "", mount = "", bytes, ...rest] = value.split(":");
  if (rest.length > 0 || (bytes !== undefined && !/^\d+$/.test(bytes))) return { cid, mount: `${mount}:${[bytes, ...rest].join(":")}` };
  return bytes === undefined ? { cid, mount } : { cid, mount, bytes: Number(bytes) };
}
