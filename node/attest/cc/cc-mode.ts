/**
 * The host's confidential-computing mode, as the runner reports it beside each unit's evidence
 * (`mode` in common/attest/cc.ts): the output of `nvidia-smi conf-compute -f` ("CC status: ON",
 * "OFF" or "DEVTOOLS") and `nvidia-smi conf-compute -grs` ("Confidential Compute GPUs Ready
 * state: ready" or "not-ready"), or NVML's nvmlSystemGetConfComputeState and
 * ...GpusReadyState printed in the same words. Parsed against a recording from a real H200
 * (test/node/fixtures/nvidia-smi/h200/conf-compute.txt: CC off, not ready).
 *
 * What it is worth: it is the host's word. NVIDIA's signed MEASUREMENTS response carries no
 * CC-on field (the recorded H100 report's opaque data has driver and VBIOS versions, board,
 * chip SKU, FWID, NVDEC0 and protected-PCIe status, measurement counts; newer firmware adds a
 * multi-GPU feature flag, not an on/off state), so a host that lies about the mode is not caught
 * here. What requiring it does catch is an honest host whose GPUs run with CC off or in
 * DEVTOOLS (debug) mode, whose evidence would otherwise pass with the same identity checks.
 */

export type ConfComputeStatus = {
  /** "ON", "OFF", "DEVTOOLS" as printed (upper case); undefined when the text has no "CC status:" line. */
  ccStatus?: string;
  /** The GPUs' ready state ("ready" → true, "not-ready" → false); undefined when the text does not say. */
  gpusReady?: boolean;
};

/** Reads `nvidia-smi conf-compute -f` / `-grs` output (either or both, in any order). */
export function parseConfComputeStatus(text: string): ConfComputeStatus {
  const status: ConfComputeStatus = {};
  for (const line of text.split(/\r?\n/)) {
    const cc = line.match(/^\s*CC status:\s*(\S+)\s*$/i);
    if (cc) status.ccStatus = cc[1]!.toUpperCase();
    const ready = line.match(/^\s*Confidential Compute GPUs Ready state:\s*(\S+)\s*$/i);
    if (ready) status.gpusReady = ready[1]!.toLowerCase() === "ready";
  }
  return status;
}

/** Why a unit's reported mode does not show CC on and the GPUs ready, or undefined when it does. */
export function ccModeProblem(mode: string | undefined): string | undefined {
  if (mode === undefined) return 'the evidence carries no CC mode (the runner reports `nvidia-smi conf-compute -f` and `-grs` as "mode")';
  const status = parseConfComputeStatus(mode);
  if (status.ccStatus === undefined) return 'the reported mode has no "CC status:" line';
  if (status.ccStatus !== "ON") return `CC status: ${status.ccStatus} (confidential computing must be ON; DEVTOOLS is a debug mode)`;
  if (status.gpusReady === undefined) return 'the reported mode has no "Confidential Compute GPUs Ready state:" line (`nvidia-smi conf-compute -grs`)';
  if (!status.gpusReady) return "CC is on but the GPUs are not ready (Confidential Compute GPUs Ready state: not-ready)";
  return undefined;
}
