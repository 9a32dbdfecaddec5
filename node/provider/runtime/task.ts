/**
 * What a renter asks a provider to run (the task spec, validated at the boundary) and what the
 * provider adds when it runs it (the launch: leased devices, lease time). Environment values can
 * be marked secret: `env: { TOKEN: { value: "...", secret: true } }`. Secret values reach the
 * child process and nothing else: log lines, error messages, results and anything stored get
 * them replaced (see {@link Redactor}).
 */
import { z } from "zod";

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
    value: z.string().min(1).max(32 * 1024),
    /** Passed to the task, replaced by `[secret:NAME]` everywhere else. */
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

export const taskSpecSchema = z
  .strictObject({
    /** A .tar.gz of the workspace: fetched, checked against sha256, unpacked before the command runs. */
    bundle: z
      .strictObject({
        url: bundleUrlSchema,
        /** Hex sha256 of the bundle file (64 digits, optional 0x). Required: a bundle is never run unchecked. */
        sha256: z
          .string()
          .regex(/^(0x)?[0-9a-fA-F]{64}$/, "expected a sha256 as 64 hex digits")
          .transform((value) => value.replace(/^0x/, "").toLowerCase()),
      })
      .optional(),
    /** Container image (container runtime only), e.g. `nvcr.io/nvidia/pytorch:24.03-py3`. */
    image: z.string().min(1).max(512).regex(/^[^\s]+$/, "expected an image reference without spaces").optional(),
    /** A string runs through `/bin/sh -c`; an array is an argv run directly (no shell). */
    command: z.union([z.string().min(1).max(16 * 1024), z.array(z.string().max(16 * 1024)).min(1).max(512)]),
    env: z
      .record(envNameSchema, envValueSchema)
      .default({})
      .refine((env) => Object.keys(env).length <= 256, { message: "at most 256 variables" }),
  })
  .refine((spec) => spec.bundle !== undefined || spec.image !== undefined, {
    message: "a task needs a bundle (process runtime) or an image (container runtime)",
    path: ["bundle"],
  })
  .refine((spec) => !Array.isArray(spec.command) || spec.command[0] !== "", { message: "the program (first element) must not be empty", path: ["command"] });

export type TaskSpec = z.output<typeof taskSpecSchema>;

/** What the provider adds to a spec when a lease starts it. */
export type TaskLaunch = {
  /** Names the workspace and the container; letters, digits, `.`, `_`, `-` (a lease id fits). */
  taskId: string;
  spec: TaskSpec;
  /** CUDA_VISIBLE_DEVICES entries of the leased units (GPU or MIG UUIDs). Empty for CPU-only runs. */
  devices: string[];
  /** How long the task may run: the lease time left. It is stopped (SIGTERM, grace, SIGKILL) after. */
  durationMs: number;
};

export const TASK_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Plain values of the env as the child gets them (secrets in clear). */
export function childEnv(spec: TaskSpec): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(spec.env)) out[name] = typeof value === "string" ? value : value.value;
  return out;
}

/** The env as it may be stored or shown: secret values replaced by `[secret]`. */
export function storableEnv(spec: TaskSpec): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(spec.env)) out[name] = typeof value === "string" ? value : "[secret]";
  return out;
}

/** The spec as it may be stored (the store keeps this, never the raw spec). */
export function storableSpec(spec: TaskSpec): Omit<TaskSpec, "env"> & { env: Record<string, string> } {
  return { ...spec, env: storableEnv(spec) };
}

/** Secret values of a spec, by variable name. */
export function secretsOf(spec: TaskSpec): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, value] of Object.entries(spec.env)) if (typeof value !== "string") out.set(name, value.value);
  return out;
}

/**
 * Replaces secret values in text. Each value is replaced wherever it appears, longest first (so a
 * secret containing another is replaced whole), and so is each line of a multi-line secret, since
 * output is read line by line.
 */
export class Redactor {
  private readonly patterns: { needle: string; label: string }[];

  constructor(secrets: ReadonlyMap<string, string>) {
    const patterns: { needle: string; label: string }[] = [];
    for (const [name, value] of secrets) {
      if (value === "") continue;
      patterns.push({ needle: value, label: `[secret:${name}]` });
      if (value.includes("\n")) {
        for (const part of value.split(/\r?\n/)) if (part.trim().length >= 4) patterns.push({ needle: part, label: `[secret:${name}]` });
      }
    }
    patterns.sort((a, b) => b.needle.length - a.needle.length);
    this.patterns = patterns;
  }

  get empty(): boolean {
    return this.patterns.length === 0;
  }

  redact(text: string): string {
    let out = text;
    for (const { needle, label } of this.patterns) if (out.includes(needle)) out = out.split(needle).join(label);
    return out;
  }
}

/**
 * Replaces every given secret value in `text`.
 *
 * @example
 * import { redact } from "./task.js";
 * redact("token=abc123", new Map([["TOKEN", "abc123"]])); // "token=[secret:TOKEN]"
 */
export function redact(text: string, secrets: ReadonlyMap<string, string>): string {
  return new Redactor(secrets).redact(text);
}

/**
 * Redacts secret values in an error's message, short message and details, in place, and returns
 * it. For errors raised while preparing a task, before they reach a log or the renter.
 */
export function redactError<E>(error: E, redactor: Redactor): E {
  if (redactor.empty || !(error instanceof Error)) return error;
  const target = error as unknown as Record<string, unknown>;
  for (const key of ["message", "shortMessage", "details"]) {
    if (typeof target[key] === "string") target[key] = redactor.redact(target[key] as string);
  }
  return error;
}
