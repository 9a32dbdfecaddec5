import { keccak256, toBytes, type Hex } from "viem";

/**
 * Canonical GPU model names. On-chain a machine's model is keccak256 of its canonical name, so
 * every node must spell a model the same way. A MIG slice is the parent name plus `/` and the
 * profile (`A100-80GB/1g.10gb`). `aliases` are the names `nvidia-smi` and renters use.
 */
export type GpuModelInfo = {
  /** Canonical name, hashed on-chain. */
  name: string;
  /** Who makes it: NVIDIA parts run CUDA (CUDA_VISIBLE_DEVICES), AMD parts ROCm/HIP (ROCR_VISIBLE_DEVICES). */
  vendor: "nvidia" | "amd";
  /** Memory per full GPU, MiB. */
  vramMiB: number;
  /** Rough dense FP16/BF16 tensor throughput class in TFLOP/s, used for proof-of-capacity deadlines and "class" queries. */
  tflops: number;
  /** Names seen in nvidia-smi / amd-smi / rocm-smi output or typed by users (case-insensitive). */
  aliases: string[];
};

export const GPU_MODELS: readonly GpuModelInfo[] = [
  { vendor: "nvidia", name: "H200-141GB", vramMiB: 143_771, tflops: 989, aliases: ["H200", "NVIDIA H200", "H200 141GB"] },
  { vendor: "nvidia", name: "H100-80GB-SXM", vramMiB: 81_559, tflops: 989, aliases: ["H100", "H100 SXM", "NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"] },
  { vendor: "nvidia", name: "H100-80GB-PCIE", vramMiB: 81_559, tflops: 756, aliases: ["H100 PCIe", "NVIDIA H100 PCIe"] },
  { vendor: "nvidia", name: "A100-80GB", vramMiB: 81_920, tflops: 312, aliases: ["A100", "A100 80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"] },
  { vendor: "nvidia", name: "A100-40GB", vramMiB: 40_960, tflops: 312, aliases: ["A100 40GB", "NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"] },
  { vendor: "nvidia", name: "L40S-48GB", vramMiB: 46_068, tflops: 362, aliases: ["L40S", "NVIDIA L40S"] },
  { vendor: "nvidia", name: "L4-24GB", vramMiB: 23_034, tflops: 121, aliases: ["L4", "NVIDIA L4"] },
  { vendor: "nvidia", name: "A10-24GB", vramMiB: 23_028, tflops: 125, aliases: ["A10", "NVIDIA A10"] },
  { vendor: "nvidia", name: "RTX4090-24GB", vramMiB: 24_564, tflops: 165, aliases: ["RTX 4090", "RTX4090", "4090", "NVIDIA GeForce RTX 4090"] },
  { vendor: "nvidia", name: "RTX3090-24GB", vramMiB: 24_576, tflops: 71, aliases: ["RTX 3090", "RTX3090", "3090", "NVIDIA GeForce RTX 3090"] },
  { vendor: "nvidia", name: "T4-16GB", vramMiB: 15_360, tflops: 65, aliases: ["T4", "Tesla T4", "NVIDIA T4"] },
  { vendor: "nvidia", name: "V100-32GB", vramMiB: 32_768, tflops: 125, aliases: ["V100", "Tesla V100-SXM2-32GB", "NVIDIA V100"] },
  // AMD: one unit is one device as ROCm enumerates it. An MI250/MI250X package holds two GCDs of
  // 64 GB each, which ROCm lists as two GPUs: the MI250 class is one GCD (half the package's rate).
  // Memory is what amd-smi reports (MB as MiB). FP16 dense, datasheets.
  { vendor: "amd", name: "MI325X-256GB", vramMiB: 262_128, tflops: 1_307, aliases: ["MI325X", "AMD Instinct MI325X"] },
  { vendor: "amd", name: "MI300X-192GB", vramMiB: 196_592, tflops: 1_307, aliases: ["MI300X", "AMD Instinct MI300X", "AMD Instinct MI300X OAM"] },
  { vendor: "amd", name: "MI250-64GB", vramMiB: 65_520, tflops: 181, aliases: ["MI250", "MI250X", "AMD Instinct MI250", "AMD Instinct MI250X"] },
  { vendor: "amd", name: "MI210-64GB", vramMiB: 65_520, tflops: 181, aliases: ["MI210", "AMD Instinct MI210"] },
  { vendor: "amd", name: "W7900-48GB", vramMiB: 49_136, tflops: 123, aliases: ["W7900", "Radeon PRO W7900", "AMD Radeon PRO W7900"] },
  { vendor: "amd", name: "RX7900XTX-24GB", vramMiB: 24_560, tflops: 123, aliases: ["RX 7900 XTX", "RX7900XTX", "7900 XTX", "Radeon RX 7900 XTX", "AMD Radeon RX 7900 XTX"] },
];

const byAlias = new Map<string, GpuModelInfo>();
for (const model of GPU_MODELS) {
  for (const alias of [model.name, ...model.aliases]) byAlias.set(alias.toLowerCase(), model);
}

/** Looks a model up by canonical name or alias (case-insensitive); MIG slices resolve to their parent. */
export function findGpuModel(name: string): GpuModelInfo | undefined {
  const base = name.split("/")[0]!.trim().toLowerCase();
  return byAlias.get(base);
}

/** The canonical spelling of a model name or alias (keeps a MIG suffix), or undefined if unknown. */
export function canonicalGpuName(name: string): string | undefined {
  const [base, slice] = name.split("/");
  const model = findGpuModel(base!);
  if (!model) return undefined;
  return slice ? `${model.name}/${slice.trim()}` : model.name;
}

/** keccak256 of the canonical name: the on-chain `model` of machines, offers and attestations. */
export function modelHash(canonicalName: string): Hex {
  return keccak256(toBytes(canonicalName));
}

/** The canonical names of one vendor's models. */
export function gpuNamesOf(vendor: GpuModelInfo["vendor"]): string[] {
  return GPU_MODELS.filter((model) => model.vendor === vendor).map((model) => model.name);
}

/** All canonical names, for error messages that list what is accepted. */
export function knownGpuNames(): string[] {
  return GPU_MODELS.map((model) => model.name);
}
