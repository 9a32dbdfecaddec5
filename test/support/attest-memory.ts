/**
 * Simulated GPUs for the memory phase. Tests cannot run GPUs, so a machine of simulated devices
 * computes its answer with the CPU memory runner (real buffers, real walks, real recomputation
 * of the words a device has no room for) and turns the work the runner counted into the time
 * the devices would take, from each device's (VRAM, random-read rate, hash rate). The tests
 * feed that time to the attestor's state machine as the arrival time (a virtual clock), so the
 * verdict depends on the work done, not on how loaded the test machine is.
 */
import type { Hex } from "viem";
import type { MemChallenge } from "../../common/attest/memory-messages.js";
import { CpuMemoryRunner, type MemoryBuffers, type MemoryRunner, type MemoryWalked, type UnitWork } from "../../node/attest/runner/index.js";

export type DeviceSpec = {
  /** Its UUID as the driver prints it. */
  uuid: string;
  vramMiB: number;
  /** Random word reads per second. */
  randomReadsPerSecond: number;
  /** Word-function iterations per second. */
  hashesPerSecond: number;
};

export type SimulatedMachineOptions = {
  /** Buffer words per MiB (the profile's wordsPerMiB): how many words a device's VRAM holds. */
  wordsPerMiB: number;
  /**
   * `units` (default): units are dealt to devices round-robin; a device with several units splits
   * its VRAM between them and runs them one after the other. `split`: every unit is spread over
   * all devices (parallel runners), and a read that lands on another device costs a peer read.
   */
  layout?: "units" | "split";
  /** Peer random reads per second between devices (split layout: NVLink or PCIe). */
  peerReadsPerSecond?: number;
  /** UUID per unit the machine reports; default the device's (a device with two units names itself twice). */
  reportedUuids?: (units: number) => string[];
};

/** A machine of simulated devices answering the memory phase; `fillMs` / `walkMs` are its times. */
export class SimulatedMemoryMachine implements MemoryRunner {
  readonly name = "simulated-memory";
  fillMs = 0;
  walkMs = 0;
  constructor(
    readonly devices: DeviceSpec[],
    private readonly options: SimulatedMachineOptions,
  ) {}

  private deviceOf(unit: number): number {
    return unit % this.devices.length;
  }

  private unitsOn(device: number, units: number): number {
    return Array.from({ length: units }, (_, u) => u).filter((u) => this.deviceOf(u) === device).length;
  }

  async fill(challenge: MemChallenge): Promise<MemoryBuffers> {
    const units = challenge.seeds.length;
    const split = this.options.layout === "split";
    const capacity = (unit: number) => {
      if (split) return this.devices.reduce((sum, d) => sum + d.vramMiB * this.options.wordsPerMiB, 0);
      const device = this.devices[this.deviceOf(unit)]!;
      return Math.floor((device.vramMiB * this.options.wordsPerMiB) / this.unitsOn(this.deviceOf(unit), units));
    };
    const devices = (count: number) => this.options.reportedUuids?.(count) ?? Array.from({ length: count }, (_, u) => this.devices[this.deviceOf(u)]!.uuid);
    const buffers = await new CpuMemoryRunner({ capacityWords: capacity, devices }).fill(challenge);
    this.fillMs = this.time(buffers.work, (work, d) => work.fillHashes / (split ? this.devices.length : 1) / d.hashesPerSecond);
    return {
      work: buffers.work,
      release: () => buffers.release(),
      walk: async (nonce: Hex): Promise<MemoryWalked> => {
        const walked = await buffers.walk(nonce);
        this.walkMs = this.time(walked.work, (work, d) => {
          if (!split) return work.reads / d.randomReadsPerSecond + work.walkHashes / d.hashesPerSecond;
          // Each device runs 1/n of the walks; of its reads, 1/n land on its own memory.
          const n = this.devices.length;
          const reads = work.reads / n;
          return reads / n / d.randomReadsPerSecond + (reads * (n - 1)) / n / (this.options.peerReadsPerSecond ?? d.randomReadsPerSecond);
        });
        return walked;
      },
    };
  }

  /** Milliseconds until the slowest device is done: each device runs its units one after the other. */
  private time(work: UnitWork[], seconds: (work: UnitWork, device: DeviceSpec) => number): number {
    const perDevice = this.devices.map(() => 0);
    const split = this.options.layout === "split";
    for (const [unit, w] of work.entries()) {
      if (split) this.devices.forEach((d, i) => (perDevice[i]! += seconds(w, d)));
      else perDevice[this.deviceOf(unit)]! += seconds(w, this.devices[this.deviceOf(unit)]!);
    }
    return Math.max(...perDevice) * 1000;
  }
}
