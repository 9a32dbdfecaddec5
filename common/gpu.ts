import { keccak256, toBytes, type Hex } from "viem";

/**
 * Canonical GPU model names. On-chain a machine's model is keccak256 of its canonical name, so
 * every node must spell a model the same way. A MIG slice is the parent name plus `/` and the
 * profile (`A100-80GB/1g.10gb`). `aliases` are the names `nvidia-smi` and renters use.
 */
export type GpuModelInfo = {
  /** Canonical name, hashed on-chain. */
  name: string;
  /** Memory per full GPU, MiB. */
  vramMiB: number;
  /** Rough dense FP16/BF16 tensor throughput class in TFLOP/s, used for proof-of-capacity deadlines and "class" queries. */
  tflops: number;
  /** Names seen in nvidia-smi output or typed by users (case-insensitive). */
  aliases: string[];
};

export const GPU_MODELS: readonly GpuModelInfo[] = [
  { name: "H200-141GB", vramMiB: 143_771, tflops: 989, aliases: ["H200", "NVIDIA H200", "H200 141GB"] },
  { name: "H100-80GB-SXM", vramMiB: 81_559, tflops: 989, aliases: ["H100", "H100 SXM", "NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"] },
  { name: "H100-80GB-PCIE", vramMiB: 81_559, tflops: 756, aliases: ["H100 PCIe", "NVIDIA H100 PCIe"] },
  { name: "A100-80GB", vramMiB: 81_920, tflops: 312, aliases: ["A100", "A100 80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"] },
  { name: "A100-40GB", vramMiB: 40_960, tflops: 312, aliases: ["A100 40GB", "NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"] },
  { name: "L40S-48GB", vramMiB: 46_068, tflops: 362, aliases: ["L40S", "NVIDIA L40S"] },
  { name: "L4-24GB", vramMiB: 23_034, tflops: 121, aliases: ["L4", "NVIDIA L4"] },
  { name: "A10-24GB", vramMiB: 23_028, tflops: 125, aliases: ["A10", "NVIDIA A10"] },
  { name: "RTX4090-24GB", vramMiB: 24_564, tflops: 165, aliases: ["RTX 4090", "RTX4090", "4090", "NVIDIA GeForce RTX 4090"] },
  { name: "RTX3090-24GB", vramMiB: 24_576, tflops: 71, aliases: ["RTX 3090", "RTX3090", "3090", "NVIDIA GeForce RTX 3090"] },
  { name: "T4-16GB", vramMiB: 15_360, tflops: 65, aliases: ["T4", "Tesla T4", "NVIDIA T4"] },
  { name: "V100-32GB", vramMiB: 32_768, tflops: 125, aliases: ["V100", "Tesla V100-SXM2-32GB", "NVIDIA V100"] },
];

const byAlias = new Map<string, GpuModelInfo>();
for (const model of GPU_MODELS) {
  for (const alias of [model.name, ...model.aliases]) byAlias.set(alias.toLowerCase(), model);
}

/** Looks a model up by canonical name or alias (case-insensitive); MIG slices resolve to their parent. */
export function findGpuModel(name: string): GpuModelInfo | undefined {
  const base = name.split("/")[0].trim().toLowerCase();
  return byAlias.get(base);
}

/** The canonical spelling of a model name or alias (keeps a MIG suffix), or undefined if unknown. */
export function canonicalGpuName(name: string): string | undefined {
  const [base, slice] = name.split("/");
  const model = findGpuModel(base);
  if (!model) return undefined;
  return slice ? `${model.name}/${slice.trim()}` : model.name;
}

/** keccak256 of the canonical name: the on-chain `model` of machines, offers and attestations. */
export function modelHash(canonicalName: string): Hex {
  return keccak256(toBytes(canonicalName));
}

/** All canonical names, for error messages that list what is accepted. */
export function knownGpuNames(): string[] {
  return GPU_MODELS.map((model) => model.name);
}
