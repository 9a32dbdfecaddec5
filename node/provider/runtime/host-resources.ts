/**
 * What each leased unit comes with, declared in the node's offers and enforced by its runtime
 * from the same numbers (docs/provider.md, "Resources per GPU"): the operator's per-unit bounds
 * (`provider.runtime.bounds`), CPU cores capped so that every unit of the host can have its share
 * at once. A lease of N units is sized from N times these (lease-bounds.ts), so a task gets what
 * the offer it matched declared, and no more.
 *
 * Memory is declared as configured, not capped: in the process runtime without a cgroup it is an
 * address-space limit, which CUDA needs generous. The node warns when the host's units together
 * were promised more memory than it has (`overcommit`).
 */
import { availableParallelism, totalmem } from "node:os";
import type { HostResources } from "../../../common/offers/message.js";
import type { Inventory } from "../inventory/inventory.js";
import type { LeaseBoundsOptions } from "./lease-bounds.js";

const MiB = 1024 ** 2;

export type HostCapacity = { cpus: number; memoryBytes: number };

/** The units every machine of this host sells together (at least 1). */
export function hostUnits(inventory: Pick<Inventory, "machines"> | undefined): number {
  return Math.max(1, inventory?.machines.reduce((sum, machine) => sum + machine.units.length, 0) ?? 0);
}

/**
 * The resources per unit this node declares, or undefined when it enforces none (bounds off):
 * an offer never promises what the runtime does not hold the task to.
 */
export function declaredResources(
  bounds: LeaseBoundsOptions | undefined,
  units: number,
  host: HostCapacity = { cpus: availableParallelism(), memoryBytes: totalmem() },
): HostResources | undefined {
  if (!bounds || bounds.enforce === "off") return undefined;
  return {
    cpuCoresPerUnit: Math.max(1, Math.min(bounds.cpusPerUnit, Math.floor(host.cpus / Math.max(1, units)))),
    memoryMiBPerUnit: Math.max(1, Math.min(2 ** 32 - 1, Math.floor(bounds.memoryBytesPerUnit / MiB))),
    diskMiBPerUnit: Math.max(1, Math.min(2 ** 32 - 1, Math.floor(bounds.diskBytesPerUnit / MiB))),
  };
}

/**
 * The bounds the runtime sizes each lease from: the operator's, with the per-unit values replaced
 * by what the offers declare (the same numbers, CPU capped as above).
 */
export function leasedBoundsOptions(bounds: LeaseBoundsOptions | undefined, units: number, host?: HostCapacity): LeaseBoundsOptions | undefined {
  const declared = declaredResources(bounds, units, host);
  if (!bounds || !declared) return bounds;
  return {
    ...bounds,
    cpusPerUnit: declared.cpuCoresPerUnit,
    memoryBytesPerUnit: declared.memoryMiBPerUnit * MiB,
    diskBytesPerUnit: declared.diskMiBPerUnit * MiB,
  };
}

/** What an operator should hear at start: CPU cores cut to the host's share, memory promised beyond the host's. */
export function resourceWarnings(bounds: LeaseBoundsOptions | undefined, units: number, host: HostCapacity = { cpus: availableParallelism(), memoryBytes: totalmem() }): string[] {
  const declared = declaredResources(bounds, units, host);
  if (!bounds || !declared) return [];
  const warnings: string[] = [];
  if (declared.cpuCoresPerUnit < bounds.cpusPerUnit) {
    warnings.push(
      `provider.runtime.bounds.cpusPerUnit is ${bounds.cpusPerUnit} but ${units} units share ${host.cpus} CPU cores: offers declare, and leases get, ${declared.cpuCoresPerUnit} per unit`,
    );
  }
  if (declared.memoryMiBPerUnit * MiB * units > host.memoryBytes) {
    warnings.push(
      `offers declare ${declared.memoryMiBPerUnit} MiB of memory per unit, ${units} units together ${Math.round((declared.memoryMiBPerUnit * units) / 1024)} GiB, more than this host's ${Math.round(host.memoryBytes / 1024 ** 3)} GiB: lower provider.runtime.bounds.memoryBytesPerUnit so that every renter can have what it bought`,
    );
  }
  return warnings;
}

/** The resources per unit the agent's offers declare, each warning said once at start. */
export function announcedResources(bounds: LeaseBoundsOptions | undefined, inventory: Pick<Inventory, "machines">, warn: (line: string) => void): HostResources | undefined {
  const units = hostUnits(inventory);
  for (const warning of resourceWarnings(bounds, units)) warn(warning);
  return declaredResources(bounds, units);
}
