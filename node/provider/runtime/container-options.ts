/** The container runtime's options (container-runtime.ts), in their own file to keep that one under the size cap. */
import type { Logger } from "../../log/logger.js";
import type { UnitMetrics } from "../inventory/inventory.js";
import type { PerUnitLimits } from "./container-args.js";
import type { EngineKind } from "./container-engine.js";
import type { FetchPolicy } from "./fetch-policy.js";
import type { LeaseBoundsOptions } from "./lease-bounds.js";
import type { ResourceLimits } from "./limits.js";
import type { BundleLimits } from "./process-runtime.js";

export type ContainerRuntimeOptions = {
  workspaceRoot: string;
  engine?: "auto" | EngineKind;
  enginePaths?: Partial<Record<EngineKind, string>>;
  /**
   * OCI runtimes to try, in order, when the config says `auto`: undefined is the engine's default.
   * Default: the engine's default, then runc, then crun. The first that starts the self-test
   * container is used.
   */
  ociRuntimes?: readonly (string | undefined)[];
  network?: boolean;
  /** Ranges a task may reach although private (Podman: routes through slirp4netns). */
  networkAllow?: { networks?: readonly string[]; loopbackPorts?: readonly number[] };
  limits?: ResourceLimits;
  /** CPU, memory and pids per leased unit (multiplied by the task's units). */
  perUnit?: PerUnitLimits;
  /** Per-lease bounds (lease-bounds.ts): memory, pids, CPUs and /tmp size unless perUnit sets them. */
  bounds?: LeaseBoundsOptions;
  /** Whether leased GPUs are passed to the container (CDI / --gpus / /dev/kfd). */
  gpus?: boolean;
  /** Every device of the inventory: the self-test passes them all, so an unresolvable one is found at start. */
  probeDevices?: readonly string[];
  /** The operator's extra engine flags (provider.runtime.containerArgs). */
  extraArgs?: readonly string[];
  bundle?: Partial<BundleLimits>;
  /** Where renter-supplied bundle URLs may be fetched from. */
  fetchPolicy?: Partial<FetchPolicy>;
  logs?: { maxLines?: number; maxLineChars?: number };
  stopGraceMs?: number;
  sampleGpus?: (devices: string[]) => Promise<UnitMetrics[]>;
  /** AMD inventories: the render node of a device (amd.ts); undefined on NVIDIA machines. */
  amdRenderNode?: ((device: string) => string) | undefined;
  logger?: Logger;
  /** The image cache (images.ts): its size cap and the registries pulled without TLS verification. */
  images?: { cacheBytes?: number; insecureRegistries?: readonly string[]; pullTimeoutMs?: number };
  /** Where to look for a RAM filesystem for task secrets (container-secrets.ts); default $XDG_RUNTIME_DIR, /dev/shm, /run. */
  secretsBases?: readonly string[];
  /** Rootful Podman maps each task's container to the subordinate ids of its own `<taskUser>-<slot>` user (task-user-slots.ts); default `suanli-task`. */
  taskUser?: string;
  /** The host-wide directory of task slot locks (task-user-slots.ts); default /run/suanli/task-slots. */
  taskSlotLockDir?: string;
};
