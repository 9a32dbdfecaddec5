/**
 * Which machine presented each GPU last, per attestor (docs/attestation.md, "One GPU, one
 * machine"). Two kinds of identity go in, each under its own prefix:
 *
 * - `uuid:` the GPU UUIDs a provider's signed commit names per unit (the runner reports them, as
 *   `nvidia-smi -L` prints them; compared case- and space-blind). Recorded when a challenge
 *   passes; a commit naming a UUID that another machine passed with within the window fails
 *   (`duplicate_gpus`), so one card that reports its real UUID cannot back two machine ids of any
 *   provider. A runner that invents UUIDs escapes this (the UUIDs are its word); what holds it is
 *   the timing, the memory phase and confidential-computing evidence.
 * - `cc:` `<chip>:<device id>` from confidential-computing evidence (cc-policy.ts), which only the
 *   device's key can sign, recorded when the evidence verifies.
 *
 * A machine that passes again releases the identities it no longer names (a card moved to another
 * machine is free at once). Kept in level (Bucket.attestDevices) when a store is given, so a
 * restarted attestor remembers; at most `cap` identities, the one presented longest ago forgotten
 * first.
 */
import { runDetached } from "../../../common/detached.js";
import type { Logger } from "../../log/logger.js";
import type { Repository } from "../../store/store.js";

export type DeviceHolder = { machine: string; atMs: number };
export type DeviceConflict = { device: string; machine: string; agoMs: number };

/** A runner-reported UUID as a registry key: trimmed, lower case (as duplicateDevice compares them). */
export const uuidKey = (uuid: string) => `uuid:${uuid.trim().toLowerCase()}`;
/** A CC-verified identity as a registry key. */
export const ccKey = (chip: string, deviceId: string) => `cc:${chip}:${deviceId.toUpperCase()}`;

export class DeviceRegistry {
  private readonly seen = new Map<string, DeviceHolder>();
  /** GPUs named by commits whose challenge has not ended yet (hold()). */
  private readonly pending = new Map<string, { machine: string; challengeId: string; untilMs: number }>();

  constructor(
    private readonly cap = 100_000,
    private readonly repo?: Repository<DeviceHolder>,
    private readonly logger?: Logger,
  ) {}

  /** Loads what a previous run recorded (oldest first, so the cap drops the oldest). */
  async load(): Promise<void> {
    if (!this.repo) return;
    const entries: [string, DeviceHolder][] = [];
    for await (const entry of this.repo.entries()) entries.push(entry);
    entries.sort((a, b) => a[1].atMs - b[1].atMs);
    for (const [key, holder] of entries) this.seen.set(key, holder);
    this.trim();
  }

  /** The first of `devices` another machine presented within `windowMs` before `nowMs`, or undefined. */
  conflict(devices: readonly string[], machine: string, nowMs: number, windowMs: number): DeviceConflict | undefined {
    for (const device of devices) {
      const last = this.seen.get(device);
      if (last && last.machine !== machine && nowMs - last.atMs < windowMs) return { device, machine: last.machine, agoMs: nowMs - last.atMs };
    }
    return undefined;
  }

  /**
   * Records `devices` (keys of one `prefix`) as `machine`'s at `nowMs`, and releases the identities
   * of that prefix the machine held before and no longer names.
   */
  record(devices: readonly string[], machine: string, nowMs: number, prefix: string): void {
    const named = new Set(devices);
    for (const [device, holder] of this.seen) {
      if (holder.machine === machine && device.startsWith(prefix) && !named.has(device)) this.remove(device);
    }
    for (const device of devices) {
      this.seen.delete(device);
      this.seen.set(device, { machine, atMs: nowMs });
      if (this.repo) runDetached(this.repo.put(device, { machine, atMs: nowMs }), this.logger, "Recording a GPU's machine");
    }
    this.trim();
  }

  /**
   * Holds `devices` for `machine`'s challenge `challengeId` from its commit until it ends (or
   * `untilMs`): a commit of another machine naming one of them meanwhile conflicts, so machines
   * challenged at once (a round, challenger.ts) cannot all name one GPU before any has passed.
   * Returns the first device another machine's challenge in progress holds, or undefined (then
   * holds them). In memory only: a challenge does not outlive its attestor.
   */
  hold(devices: readonly string[], machine: string, challengeId: string, nowMs: number, untilMs: number): { device: string; machine: string } | undefined {
    for (const [device, held] of this.pending) if (held.untilMs < nowMs) this.pending.delete(device);
    const taken = devices.map((device) => [device, this.pending.get(device)] as const).find(([, held]) => held && held.machine !== machine);
    if (taken) return { device: taken[0], machine: taken[1]!.machine };
    for (const device of devices) this.pending.set(device, { machine, challengeId, untilMs });
    return undefined;
  }

  /**
   * conflict() within `windowMs`, then hold() until `untilMs`: the GPU check of a commit. The
   * conflict has `agoMs` when a passed machine holds the GPU, none when a challenge in progress does.
   */
  claimInFlight(
    devices: readonly string[],
    machine: string,
    challengeId: string,
    nowMs: number,
    windowMs: number,
    untilMs: number,
  ): { device: string; machine: string; agoMs?: number } | undefined {
    return this.conflict(devices, machine, nowMs, windowMs) ?? this.hold(devices, machine, challengeId, nowMs, untilMs);
  }

  /** Ends the hold of challenge `challengeId` (it passed, failed or ended). */
  unhold(challengeId: string): void {
    for (const [device, held] of this.pending) if (held.challengeId === challengeId) this.pending.delete(device);
  }

  /** conflict(), and when there is none, record(): one GPU, one machine within the window. */
  claim(devices: readonly string[], machine: string, nowMs: number, windowMs: number, prefix: string): DeviceConflict | undefined {
    const found = this.conflict(devices, machine, nowMs, windowMs);
    if (!found) this.record(devices, machine, nowMs, prefix);
    return found;
  }

  private remove(device: string): void {
    this.seen.delete(device);
    if (this.repo) runDetached(this.repo.del(device), this.logger, "Forgetting a GPU's machine");
  }

  private trim(): void {
    while (this.seen.size > this.cap) this.remove(this.seen.keys().next().value!);
  }
}
