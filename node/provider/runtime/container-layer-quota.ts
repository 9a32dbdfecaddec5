/**
 * A storage quota on a container's writable layer, where the engine's storage can enforce one
 * (issue #33 item 3, its last limit). Every task container already runs with a read-only image
 * file system (`--read-only`, container-args.ts), so a task cannot write to the layer at all; the
 * quota is the second bound, for what `--read-only` does not cover (an operator's
 * `containerArgs` that turn it off, anything the engine writes there on the task's behalf).
 *
 * Only the overlay driver on XFS with project quotas can do it (`--storage-opt size=`: the upper
 * directory becomes an XFS project with a hard block limit); on any other file system Podman
 * refuses the flag ("only supported for backingFS XFS"), and on XFS without project quotas (not
 * mounted `pquota`, or a kernel built without XFS quota support) the container fails to start.
 * So the node decides at start: the engine's storage driver and backing file system from `info`,
 * then one self-test container with the flag. The start line says which it is (`describeLayerQuota`).
 */
import { engineErrorLine, probeContainer, runEngine, type ContainerEngine } from "./container-engine.js";

/**
 * The quota, bytes: the layer holds nothing a task needs (its image is read-only, /tmp, /var/tmp
 * and /run are sized tmpfs, /workspace its own disk), so a small fixed bound suffices.
 */
export const WRITABLE_LAYER_QUOTA_BYTES = 64 * 1024 ** 2;

export type LayerQuota = { bytes: number } | { bytes: undefined; reason: string };

/** The storage driver and its backing file system from `<engine> info --format '{{json .}}'` (Podman's or Docker's shape). */
export function storageOf(info: unknown): { driver: string | undefined; backing: string | undefined } {
  const record = (info ?? {}) as {
    store?: { graphDriverName?: string; graphStatus?: Record<string, string> };
    Driver?: string;
    DriverStatus?: [string, string][];
  };
  if (record.store) return { driver: record.store.graphDriverName, backing: record.store.graphStatus?.["Backing Filesystem"] };
  return { driver: record.Driver, backing: record.DriverStatus?.find(([key]) => key === "Backing Filesystem")?.[1] };
}

/** Why `storage` cannot hold a layer quota, or undefined when it may (then the self-test decides). */
export function layerQuotaUnsupported(storage: { driver: string | undefined; backing: string | undefined }): string | undefined {
  if (storage.driver !== "overlay" && storage.driver !== "overlay2") return `the storage driver is ${storage.driver ?? "unknown"}, not overlay`;
  if (storage.backing !== "xfs") return `overlay's backing file system is ${storage.backing ?? "unknown"}, not XFS with project quotas`;
  return undefined;
}

/** The create flags that apply `quota` (none without one). */
export function layerQuotaArgs(quota: LayerQuota): string[] {
  return quota.bytes === undefined ? [] : ["--storage-opt", `size=${quota.bytes}`];
}

/** Finds out whether containers started with `flags` can get a writable-layer quota here. */
export async function detectLayerQuota(engine: ContainerEngine, flags: readonly string[], labels: Record<string, string>, bytes = WRITABLE_LAYER_QUOTA_BYTES): Promise<LayerQuota> {
  const info = await runEngine(engine.path, ["info", "--format", "{{json .}}"], 60_000);
  let storage: { driver: string | undefined; backing: string | undefined };
  try {
    storage = storageOf(JSON.parse(info.stdout) as unknown);
  } catch {
    return { bytes: undefined, reason: `${engine.kind} info did not answer (${engineErrorLine(info.stderr || info.stdout) || `exit code ${info.code}`})` };
  }
  const unsupported = layerQuotaUnsupported(storage);
  if (unsupported) return { bytes: undefined, reason: unsupported };
  const failure = await probeContainer(engine, [...flags, ...layerQuotaArgs({ bytes })], labels);
  return failure === undefined
    ? { bytes }
    : { bytes: undefined, reason: `overlay on XFS refused the quota (${failure}): mount it with pquota, on a kernel with XFS quota support` };
}

/** For the start line: what bounds the writable layer. */
export function describeLayerQuota(quota: LayerQuota): string {
  return quota.bytes === undefined
    ? `writable layer read-only, no storage quota (${quota.reason})`
    : `writable layer read-only and quota'd to ${Math.round(quota.bytes / 1024 ** 2)} MiB (overlay on XFS, project quota)`;
}
