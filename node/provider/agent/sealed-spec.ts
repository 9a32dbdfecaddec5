/**
 * Sealed task secrets: a renter seals each secret env value to the provider's sealing key for one
 * lease and variable (common/sealed.ts); the node opens them only in memory, just before the task
 * starts, and never stores the opened values (records keep the sealed form).
 */
import { InvalidInputError } from "../../../common/errors.js";
import type { SealingKeyPair } from "../../../common/sealed.js";
import type { TaskSpec } from "../runtime/task.js";

/**
 * The spec with its sealed env values opened (in memory only, as `{ value, secret: true }`).
 * A value that does not open for this lease, variable and key is the renter's error.
 */
export async function openSealedSpec(sealing: { keyPair: SealingKeyPair; chainId: number } | undefined, leaseId: bigint, spec: TaskSpec): Promise<TaskSpec> {
  const sealed = Object.entries(spec.env).filter(([, value]) => typeof value !== "string" && "sealed" in value);
  if (sealed.length === 0) return spec;
  const env = { ...spec.env };
  for (const [name, value] of sealed) {
    try {
      if (!sealing) throw new Error("this provider has no sealing key");
      env[name] = { value: await sealing.keyPair.open((value as { sealed: string }).sealed, { chainId: sealing.chainId, leaseId, name }), secret: true };
    } catch {
      throw new InvalidInputError("task", [{ path: `env.${name}`, message: "the sealed value does not open with this provider's key for this lease and variable; seal it again to the key in the provider's acceptance" }]);
    }
  }
  return { ...spec, env };
}
