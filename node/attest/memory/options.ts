import { z } from "zod";
import { memoryProfileSchema } from "../../../common/attest/memory-params.js";

/**
 * The memory phase (docs/attestation.md, "Memory phase"), run by the attestor after a passed GEMM
 * phase. Off by default: the external (GPU) runner contract has no memory operations yet, so
 * turning it on would fail every honest GPU provider until a GPU memory runner exists.
 */
export const memoryOptionsSchema = z.strictObject({
  enabled: z.boolean().default(false),
  profile: memoryProfileSchema.prefault({}),
});
export type MemoryOptions = z.output<typeof memoryOptionsSchema>;
