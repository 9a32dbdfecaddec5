/**
 * Resolves what a renter types as `gpuType` into the canonical model names offers are indexed
 * by: a model or alias (`"A100"`, `"NVIDIA H100 80GB HBM3"`), a MIG slice
 * (`"A100-80GB/1g.10gb"`), or a class: `"any"` (every full NVIDIA GPU model) or `"any 80GB"`
 * (every full NVIDIA model whose nominal memory is at least 80 GB, read from its canonical name).
 * AMD parts run ROCm, not CUDA, so a class takes them only when asked: `"any amd"`,
 * `"any amd 128GB"`; `"any gpu"` takes both vendors.
 */
import { GPU_MODELS, findGpuModel, knownGpuNames, type GpuModelInfo } from "../gpu.js";

export type GpuSelection = {
  /** What the renter asked for, normalized for display (`A100-80GB`, `any 80GB`). */
  label: string;
  /** Canonical model names (MIG slices included) that satisfy the request. */
  models: readonly string[];
};

const CLASS_PATTERN = /^any(?:[\s-]+(nvidia|amd|gpu))?(?:[\s-]*(\d{1,4})\s*gb)?$/i;
const SLICE_PATTERN = /^\d{1,2}g\.\d{1,4}gb$/i;

/** Nominal memory in GB as printed in the canonical name (`H100-80GB-SXM` → 80). */
export function nominalGb(canonicalName: string): number {
  const match = /-(\d+)GB/.exec(canonicalName);
  return match ? Number(match[1]) : 0;
}

/** The accepted spellings, for error messages. */
export function acceptedGpuTypes(): string {
  return `a model (${knownGpuNames().join(", ")}, or an alias such as "A100" or "H100"), a MIG slice such as "A100-80GB/1g.10gb", or a class: "any" or "any <N>GB" (NVIDIA, e.g. "any 80GB"), "any amd [<N>GB]" (AMD/ROCm), "any gpu [<N>GB]" (both)`;
}

/** One renter-typed name → canonical names, or an error message naming what is accepted. */
export function resolveGpuName(text: string): { models: string[]; label: string } | { error: string } {
  const trimmed = text.trim();
  const cls = CLASS_PATTERN.exec(trimmed);
  if (cls) {
    const vendor = (cls[1]?.toLowerCase() ?? "nvidia") as GpuModelInfo["vendor"] | "gpu";
    const minGb = cls[2] === undefined ? 0 : Number(cls[2]);
    const ofVendor = GPU_MODELS.filter((model) => vendor === "gpu" || model.vendor === vendor);
    const models = ofVendor.filter((model) => nominalGb(model.name) >= minGb).map((model) => model.name);
    if (models.length === 0) {
      const largest = Math.max(...ofVendor.map((model) => nominalGb(model.name)));
      return { error: `no ${vendor === "gpu" ? "GPU" : vendor.toUpperCase()} model has ${minGb} GB or more (the largest known has ${largest} GB)` };
    }
    const prefix = vendor === "nvidia" ? "any" : `any ${vendor}`;
    return { models, label: minGb === 0 ? prefix : `${prefix} ${minGb}GB` };
  }
  const [base, slice, ...rest] = trimmed.split("/");
  const model = findGpuModel(base!);
  if (!model || rest.length > 0) {
    return { error: `unknown GPU type ${JSON.stringify(text)}; accepted: ${acceptedGpuTypes()}` };
  }
  if (slice === undefined) return { models: [model.name], label: model.name };
  if (!SLICE_PATTERN.test(slice.trim())) {
    return { error: `unknown MIG profile ${JSON.stringify(slice)} in ${JSON.stringify(text)}; expected a profile such as "1g.10gb" or "3g.40gb"` };
  }
  const name = `${model.name}/${slice.trim().toLowerCase()}`;
  return { models: [name], label: name };
}
