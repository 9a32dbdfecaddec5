/**
 * The attestor's use of confidential-computing evidence in a challenge (docs/attestation-threats.md,
 * "Confidential-computing evidence"). With `attest.cc` configured, each unit of a commit may carry
 * (or, with `required`, must carry) its GPU's signed measurements for a request whose nonce is the
 * challenge id. The attestor checks, per unit, cheapest first:
 *
 * - the evidence verifies to a pinned device root for this challenge, and backs the claimed class
 *   (cc-nvidia.ts: chip, board table, the report's FWID = the certificate's);
 * - no device is named twice in the commit (one GPU is not two units);
 * - with RIMs configured (`rims`), the report's firmware measurements equal the golden values of
 *   NVIDIA's RIMs for its VBIOS and driver versions (cc-rim.ts; with `rims.required`, a version
 *   without a RIM here fails);
 * - no device was presented for another machine within `reuseWindowSeconds` (one GPU is not
 *   time-shared between machine ids). The devices a machine presented are remembered per attestor
 *   (device-registry.ts, in level when the role runs with a store);
 * - the host reports CC on and the GPUs ready (cc-mode.ts; `requireCcMode`, the host's word);
 * - no certificate of the unit's chain is revoked by the CRLs given, and with `crl.required` each
 *   one that names a CRL distribution point is covered by a fresh one (cc-revocation.ts).
 *
 * Each unit's evidence must answer its own nonce, ccEvidenceNonce(challenge id, unit, the unit's
 * committed root) (common/attest/cc.ts): bound to this challenge of this machine (the id binds the
 * provider, the machine id, the claim and the attestor's seed), to the unit, and to the answer the
 * provider committed for it.
 *
 * The evidence proves which physical GPUs answered that nonce while the challenge ran; it does not
 * prove that those GPUs computed the rows (the GEMM phase's timing does that), nor that they sit in
 * the machine that answered (a host can relay the nonce to a GPU elsewhere; see the docs).
 */
import { X509Certificate } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { Address, Hex } from "viem";
import { ccEvidenceNonce, type GpuEvidence } from "../../../common/attest/cc.js";
import type { MeasurementBlock } from "./cc-evidence.js";
import { ccModeProblem } from "./cc-mode.js";
import { checkRevocation, loadCrls, type RevocationPolicy } from "./cc-revocation.js";
import { ccKey, type DeviceRegistry } from "./device-registry.js";
import { repeatedDevice, verifyNvidiaGpuEvidence, type NvidiaDeviceIdentity, type NvidiaOpaque } from "./cc-nvidia.js";
import { compareWithRims, verifyRim, type Rim } from "./cc-rim.js";
import type { CcOptions } from "./options.js";

export type CcPolicy = {
  required: boolean;
  /** Pinned device identity roots, parsed once at start-up: NVIDIA's in production. */
  roots: X509Certificate[];
  /** Board key → GPU class; undefined: the check stops at the chip. */
  boards?: ReadonlyMap<string, string>;
  reuseWindowMs: number;
  /** Verified RIMs by `<product>:<version>` (upper case), and whether every unit needs both of its RIMs. */
  rims?: { byKey: ReadonlyMap<string, Rim>; required: boolean };
  /** Every unit's reported mode must show CC on and the GPUs ready (cc-mode.ts). */
  requireCcMode: boolean;
  /** The CRLs checked offline, and how (cc-revocation.ts); absent: no revocation check. */
  revocation?: RevocationPolicy;
};

/** What a passed challenge's evidence established, per unit. */
export type CcVerifiedUnit = {
  chip: string;
  deviceId: string;
  board?: string;
  driverVersion?: string;
  vbiosVersion?: string;
  /** The RIM versions its measurements were compared with and matched (VBIOS, driver). */
  rims?: string[];
};

const rimKey = (product: string, version: string) => `${product}:${version}`.toUpperCase();

/** Reads and verifies PEM certificates from files, naming the option, file and certificate on error. */
async function readRoots(option: string, files: readonly string[], readText: (file: string) => Promise<string>): Promise<X509Certificate[]> {
  const roots: X509Certificate[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = await readText(file);
    } catch (error) {
      throw new Error(`${option}: cannot read ${file}: ${(error as Error).message}`, { cause: error });
    }
    const pems = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
    if (pems.length === 0) throw new Error(`${option}: ${file} holds no PEM certificate`);
    // Parsed now: a root that does not parse would otherwise refuse every provider's evidence as
    // "a certificate does not parse", blaming the provider for the attestor's file.
    for (const [index, pem] of pems.entries()) {
      try {
        roots.push(new X509Certificate(pem));
      } catch (error) {
        throw new Error(`${option}: certificate ${index + 1} in ${file} is not a valid X.509 certificate: ${(error as Error).message}`, { cause: error });
      }
    }
  }
  return roots;
}

/** Verifies every RIM file to the RIM roots at `now`; an invalid, expired or duplicate RIM stops the start with the file named. */
async function loadRims(options: CcOptions["rims"], readText: (file: string) => Promise<string>, now: Date): Promise<Map<string, Rim>> {
  const roots = await readRoots("attest.cc.rims.rootFiles", options.rootFiles, readText);
  const byKey = new Map<string, Rim>();
  for (const file of options.files) {
    let xml: string;
    try {
      xml = await readText(file);
    } catch (error) {
      throw new Error(`attest.cc.rims.files: cannot read ${file}: ${(error as Error).message}`, { cause: error });
    }
    const verdict = verifyRim(xml, { roots, now });
    if (!verdict.ok) throw new Error(`attest.cc.rims.files: ${file} does not verify to attest.cc.rims.rootFiles: ${verdict.reason}: ${verdict.detail}`);
    const key = rimKey(verdict.rim.product, verdict.rim.version);
    if (byKey.has(key)) throw new Error(`attest.cc.rims.files: ${file} is a second RIM for ${verdict.rim.product} ${verdict.rim.version}`);
    byKey.set(key, verdict.rim);
  }
  return byKey;
}

/** Reads `attest.cc`'s root files. Undefined when CC evidence is not configured (no roots, not required). */
export async function loadCcPolicy(
  options: CcOptions,
  readText: (file: string) => Promise<string> = (file) => readFile(file, "utf8"),
  now: Date = new Date(),
  readBytes: (file: string) => Promise<Uint8Array> = (file) => readFile(file),
): Promise<CcPolicy | undefined> {
  if (options.rootFiles.length === 0) return undefined;
  const roots = await readRoots("attest.cc.rootFiles", options.rootFiles, readText);
  const boards = Object.entries(options.boards);
  const rims = options.rims.files.length ? { byKey: await loadRims(options.rims, readText, now), required: options.rims.required } : undefined;
  const crls = options.crl.files.length ? await loadCrls(options.crl.files, readBytes) : [];
  return {
    required: options.required,
    roots,
    ...(boards.length ? { boards: new Map(boards) } : {}),
    reuseWindowMs: options.reuseWindowSeconds * 1000,
    ...(rims ? { rims } : {}),
    requireCcMode: options.requireCcMode,
    ...(crls.length || options.crl.required ? { revocation: { crls, maxAgeMs: options.crl.maxAgeDays * 86_400_000, required: options.crl.required } } : {}),
  };
}

/**
 * One unit's firmware measurements against the RIMs of its VBIOS and driver versions: the RIM
 * versions compared, or why the unit fails. A RIM past its signer's expiry counts as absent.
 */
export function checkRims(
  rims: NonNullable<CcPolicy["rims"]>,
  chip: string,
  firmware: NvidiaOpaque,
  blocks: readonly MeasurementBlock[],
  now: Date,
): { ok: true; compared: string[] } | { ok: false; detail: string } {
  const found: Rim[] = [];
  for (const [what, version] of [
    ["VBIOS", firmware.vbiosVersion],
    ["driver", firmware.driverVersion],
  ] as const) {
    const rim = version === undefined ? undefined : rims.byKey.get(rimKey(chip, version));
    const current = rim && (rim.signerValidTo === undefined || rim.signerValidTo.getTime() >= now.getTime()) ? rim : undefined;
    if (current) found.push(current);
    else if (rims.required) {
      const why = version === undefined ? `the report names no ${what} version` : rim ? `the RIM for ${what} ${version} expired` : `no RIM for ${chip} ${what} ${version}`;
      return { ok: false, detail: `${why} (attest.cc.rims.files; attest.cc.rims.required)` };
    }
  }
  const mismatches = compareWithRims(blocks, found);
  if (mismatches.length) return { ok: false, detail: `firmware measurements differ from NVIDIA's RIMs: ${mismatches.map((m) => m.detail).join("; ")}` };
  return { ok: true, compared: found.map((rim) => rim.version) };
}

export type CcCheck = { ok: true; units?: CcVerifiedUnit[] } | { ok: false; detail: string };

/**
 * The commit's CC evidence against the policy, for challenge `challenge.id` of `machine` claiming
 * `model`; `roots` are the commit's per-unit roots (each unit's nonce binds its own).
 */
export function checkCommitEvidence(
  policy: CcPolicy | undefined,
  registry: DeviceRegistry,
  challenge: { id: Hex; provider: Address; machineId: number; model: string; units: number },
  roots: readonly Hex[],
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
    // Cheapest first: the host's reported mode is read before any certificate.
    const mode = policy.requireCcMode ? ccModeProblem(piece.mode) : undefined;
    if (mode) return { ok: false, detail: `unit ${unit}: cc_mode: ${mode}` };
    const root = roots[unit];
    if (!root) return { ok: false, detail: `unit ${unit}: the commit has no root for it` };
    const verdict = verifyNvidiaGpuEvidence(piece, {
      nonce: ccEvidenceNonce(challenge.id, unit, root),
      roots: policy.roots,
      claimedClass: challenge.model,
      ...(policy.boards ? { boards: policy.boards } : {}),
      now: new Date(nowMs),
    });
    if (!verdict.ok) return { ok: false, detail: `unit ${unit}: ${verdict.reason}: ${verdict.detail}` };
    const rims = policy.rims ? checkRims(policy.rims, verdict.device.chip, verdict.firmware, verdict.measurements, new Date(nowMs)) : undefined;
    if (rims && !rims.ok) return { ok: false, detail: `unit ${unit}: rim_mismatch: ${rims.detail}` };
    const revocation = policy.revocation ? checkRevocation(verdict.chain, verdict.anchor, policy.revocation, new Date(nowMs)) : undefined;
    if (revocation && !revocation.ok) return { ok: false, detail: `unit ${unit}: ${revocation.reason}: ${revocation.detail}` };
    devices.push(verdict.device);
    units.push({
      chip: verdict.device.chip,
      deviceId: verdict.device.deviceId,
      ...(verdict.board ? { board: verdict.board } : {}),
      ...(verdict.firmware.driverVersion ? { driverVersion: verdict.firmware.driverVersion } : {}),
      ...(verdict.firmware.vbiosVersion ? { vbiosVersion: verdict.firmware.vbiosVersion } : {}),
      ...(rims?.ok && rims.compared.length ? { rims: rims.compared } : {}),
    });
  }
  const twice = repeatedDevice(devices);
  if (twice) return { ok: false, detail: `two units present the same GPU ${twice}: each unit must be its own device` };
  const machine = `${challenge.provider.toLowerCase()}/${challenge.machineId}`;
  const reused = registry.claim(
    devices.map((device) => ccKey(device.chip, device.deviceId)),
    machine,
    nowMs,
    policy.reuseWindowMs,
    "cc:",
  );
  if (reused) {
    return {
      ok: false,
      detail: `GPU ${reused.device.slice("cc:".length)} answered a challenge of machine ${reused.machine} ${Math.round(reused.agoMs / 1000)} s ago: one GPU cannot serve two machines`,
    };
  }
  return { ok: true, units };
}
