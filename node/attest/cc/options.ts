import { z } from "zod";
import { canonicalGpuName, knownGpuNames } from "../../../common/gpu.js";

/**
 * Confidential-computing evidence (docs/attestation-threats.md, "Confidential-computing evidence"): the
 * attestor verifies the per-unit GPU evidence a commit carries against these roots. Off while
 * `rootFiles` is empty (evidence is then ignored).
 */
export const ccOptionsSchema = z
  .strictObject({
    /** Fail a commit that carries no evidence (`cc_evidence`): only for attestors whose providers all run CC-mode GPUs. */
    required: z.boolean().default(false),
    /** PEM files of the device identity roots to trust: NVIDIA's device identity CA in production. */
    rootFiles: z.array(z.string().min(1).max(4096)).max(8).default([]),
    /**
     * Board key (`<project>-<project SKU>-<chip SKU>`, from the evidence) → GPU class. Empty: the
     * check stops at the chip (a GH100 backs H100 and H200 alike). Given: a board not listed fails.
     */
    boards: z
      .record(
        z.string().regex(/^[0-9A-Za-z]{1,16}-[0-9A-Za-z]{1,16}-[0-9A-Za-z]{1,16}$/, "a board key is <project>-<project SKU>-<chip SKU>, e.g. 1010-0200-882"),
        z
          .string()
          .refine((name) => canonicalGpuName(name) !== undefined, { message: `expected a known GPU class name: ${knownGpuNames().join(", ")}` })
          .transform((name) => canonicalGpuName(name)!),
      )
      .default({}),
    /**
     * NVIDIA's reference integrity manifests (RIMs): the golden firmware measurements a GPU's
     * report is compared with (docs/attestation-threats.md, "Confidential-computing evidence in a
     * challenge"). `files`: RIM XML files (one per VBIOS and per driver version in use, from
     * NVIDIA's RIM service), each verified at start-up to one of `rootFiles` (NVIDIA's RIM root,
     * another root than the devices'). `required`: a unit whose VBIOS or driver has no valid RIM
     * here fails; otherwise what the RIMs here cover is compared, and the rest is not.
     */
    rims: z
      .strictObject({
        rootFiles: z.array(z.string().min(1).max(4096)).max(8).default([]),
        files: z.array(z.string().min(1).max(4096)).max(256).default([]),
        required: z.boolean().default(false),
      })
      .refine((r) => r.files.length === 0 || r.rootFiles.length > 0, { message: "attest.cc.rims.files needs attest.cc.rims.rootFiles (NVIDIA's RIM root)", path: ["rootFiles"] })
      .refine((r) => !r.required || r.files.length > 0, { message: "attest.cc.rims.required needs attest.cc.rims.files", path: ["files"] })
      .prefault({}),
    /**
     * Every unit's evidence must report the host's CC mode ON and the GPUs ready (`mode`: the
     * output of `nvidia-smi conf-compute -f` and `-grs`); a unit whose report says OFF, DEVTOOLS or
     * not-ready, or says nothing, fails `cc_evidence` (`cc_mode`). The host's word: the signed
     * report carries no CC-mode field. false accepts any mode (e.g. to test with CC off).
     */
    requireCcMode: z.boolean().default(true),
    /**
     * Revocation, offline: CRL files (DER or PEM), NVIDIA's as the release bundles them
     * (ops/nvidia-crl/). A certificate a CRL signed by its issuer lists fails the unit (`revoked`).
     * With `required`, every certificate of a unit's chain that names a CRL distribution point
     * needs a fresh CRL of its issuer here (`revocation_unknown` otherwise): not past its
     * nextUpdate and issued at most `maxAgeDays` ago.
     */
    crl: z
      .strictObject({
        files: z.array(z.string().min(1).max(4096)).max(64).default([]),
        maxAgeDays: z.number().int().min(1).max(365).default(90),
        required: z.boolean().default(false),
      })
      .prefault({}),
    /** A GPU presented for one machine may not answer for another within this many seconds. */
    reuseWindowSeconds: z
      .number()
      .int()
      .min(0)
      .max(30 * 86_400)
      .default(86_400),
  })
  .refine((o) => !o.required || o.rootFiles.length > 0, { message: "attest.cc.required needs attest.cc.rootFiles (the roots to verify evidence against)", path: ["rootFiles"] });
export type CcOptions = z.output<typeof ccOptionsSchema>;
