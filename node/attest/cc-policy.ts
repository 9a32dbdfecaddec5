/**
 * The attestor's use of confidential-computing evidence in a challenge (docs/attestation.md,
 * "Confidential-computing evidence"). With `attest.cc` configured, each unit of a commit may carry
 * (or, with `required`, must carry) its GPU's signed measurements for a request whose nonce is the
 * challenge id. The attestor checks, per unit, cheapest first:
 *
 * - the evidence verifies to a pinned device root for this challenge, and backs the claimed class
 *   (cc-nvidia.ts: chip, board table, the report's FWID = the certificate's);
 * - no device is named twice in the commit (one GPU is not two units);
 * - no device was presented for another machine within `reuseWindowSeconds` (one GPU is not
 *   time-shared between machine ids). The devices a machine presented are remembered per attestor
 *   (in memory, bounded: a restart forgets them, which only delays the catch to the next time both
 *   machines answer).
 *
 * The evidence proves which physical GPUs answered the challenge's nonce while the challenge ran;
 * it does not prove that those GPUs computed the rows (the GEMM phase's timing does that).
 */
import { X509Certificate } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { Address, Hex } from "viem";
import type { GpuEvidence } from "../../common/attest/cc.js";
import { repeatedDevice, verifyNvidiaGpuEvidence, type NvidiaDeviceIdentity } from "./cc-nvidia.js";
import type { CcOptions } from "./options.js";

export type CcPolicy = {
  required: boolean;
  /** Pinned device identity roots, parsed once at start-up: NVIDIA's in production. */
  roots: X509Certificate[];
  /** Board key → GPU class; undefined: the check stops at the chip. */
  boards?: ReadonlyMap<string, string>;
  reuseWindowMs: number;
};

/** What a passed challenge's evidence established, per unit. */
export type CcVerifiedUnit = { chip: string; deviceId: string; board?: string; driverVersion?: string; vbiosVersion?: string };

/** Reads `attest.cc`'s root files. Undefined when CC evidence is not configured (no roots, not required). */
export async function loadCcPolicy(options: CcOptions, readText: (file: string) => Promise<string> = (file) => readFile(file, "utf8")): Promise<CcPolicy | undefined> {
  if (options.rootFiles.length === 0) return undefined;
  const roots: X509Certificate[] = [];
  for (const file of options.rootFiles) {
    let text: string;
    try {
      text = await readText(file);
    } catch (error) {
      throw new Error(`attest.cc.rootFiles: cannot read ${file}: ${(error as Error).message}`, { cause: error });
    }
    const pems = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
    if (pems.length === 0) throw new Error(`attest.cc.rootFiles: ${file} holds no PEM certificate`);
    // Parsed now: a root that does not parse would otherwise refuse every provider's evidence as
    // "a certificate does not parse", blaming the provider for the attestor's file.
    for (const [index, pem] of pems.entries()) {
      try {
        roots.push(new X509Certificate(pem));
      } catch (error) {
        throw new Error(`attest.cc.rootFiles: certificate ${index + 1} in ${file} is not a valid X.509 certificate: ${(error as Error).message}`, { cause: error });
      }
    }
  }
  const boards = Object.entries(options.boards);
  return { required: options.required, roots, ...(boards.length ? { boards: new Map(boards) } : {}), reuseWindowMs: options.reuseWindowSeconds * 1000 };
}

/** Which machine presented each device last, and when. */
export class CcDeviceRegistry {
  private readonly seen = new Map<string, { machine: string; atMs: number }>();
  constructor(private readonly cap = 100_000) {}

  /** Records `devices` for `machine`; a device another machine presented within the window is returned instead, and nothing is recorded. */
  claim(devices: readonly string[], machine: string, nowMs: number, windowMs: number): { device: string; machine: string; agoMs: number } | undefined {
    for (const device of devices) {
      const last = this.seen.get(device);
      if (last && last.machine !== machine && nowMs - last.atMs < windowMs) return { device, machine: last.machine, agoMs: nowMs - last.atMs };
    }
    for (const device of devices) {
      this.seen.delete(device);
      this.seen.set(device, { machine, atMs: nowMs });
    }
    while (this.seen.size > this.cap) this.seen.delete(this.seen.keys().next().value!);
    return undefined;
  }
}

export type CcCheck = { ok: true; units?: CcVerifiedUnit[] } | { ok: false; detail: string };

/** The commit's CC evidence against the policy, for challenge `challengeId` of `machine` claiming `model`. */
export function checkCommitEvidence(
  policy: CcPolicy | undefined,
  registry: CcDeviceRegistry,
  challenge: { id: Hex; provider: Address; machineId: number; model: string; units: number },
  evidence: readonly GpuEvidence[] | undefined,
  nowMs: number,
): CcCheck {
  if (!policy) return { ok: true };
  if (!evidence) {
    return policy.required
      ? { ok: false, detail: `this attestor requires confidential-computing evidence for each of the ${challenge.units} units (attest.cc.required), and the commit carries none` }
      : { ok: true };
  }
  const devices: NvidiaDeviceIdentity[] = [];
  const units: CcVerifiedUnit[] = [];
  for (const [unit, piece] of evidence.entries()) {
    const verdict = verifyNvidiaGpuEvidence(piece, {
      nonce: challenge.id,
      roots: policy.roots,
      claimedClass: challenge.model,
      ...(policy.boards ? { boards: policy.boards } : {}),
      now: new Date(nowMs),
    });
    if (!verdict.ok) return { ok: false, detail: `unit ${unit}: ${verdict.reason}: ${verdict.detail}` };
    devices.push(verdict.device);
    units.push({
      chip: verdict.device.chip,
      deviceId: verdict.device.deviceId,
      ...(verdict.board ? { board: verdict.board } : {}),
      ...(verdict.firmware.driverVersion ? { driverVersion: verdict.firmware.driverVersion } : {}),
      ...(verdict.firmware.vbiosVersion ? { vbiosVersion: verdict.firmware.vbiosVersion } : {}),
    });
  }
  const twice = repeatedDevice(devices);
  if (twice) return { ok: false, detail: `two units present the same GPU ${twice}: each unit must be its own device` };
  const machine = `${challenge.provider.toLowerCase()}/${challenge.machineId}`;
  const reused = registry.claim(
    devices.map((device) => `${device.chip}:${device.deviceId}`),
    machine,
    nowMs,
    policy.reuseWindowMs,
  );
  if (reused) {
    return {
      ok: false,
      detail: `GPU ${reused.device} answered a challenge of machine ${reused.machine} ${Math.round(reused.agoMs / 1000)} s ago: one GPU cannot serve two machines`,
    };
  }
  return { ok: true, units };
}
