/**
 * Liveness probes, heartbeats, receipts and faults: the EIP-712 messages of liveness (the attestor's
 * `LivenessProbe` below; common/eip712.ts `Heartbeat`, `ProbeReceipt`, `Fault`), signed with a local account and
 * recovered with viem (pure: the SDK may import it).
 */
import { getAddress, hashTypedData, recoverTypedDataAddress, type Address, type Hex, type TypedDataDomain } from "viem";
import { signTyped, type TypedDataSigner } from "../chain/sign.js";
import { suanliTypes, type Fault, type Heartbeat, type ProbeReceipt } from "../eip712.js";
import { isContractSignature } from "../signature.js";

function heartbeatTypedData(domain: TypedDataDomain, heartbeat: Heartbeat) {
  return { domain, types: { Heartbeat: suanliTypes.Heartbeat }, primaryType: "Heartbeat" as const, message: heartbeat };
}

function faultTypedData(domain: TypedDataDomain, fault: Fault) {
  return { domain, types: { Fault: suanliTypes.Fault }, primaryType: "Fault" as const, message: fault };
}

/** EIP-712 type of a liveness probe. Kept beside the protocol rather than in common/eip712.ts: nothing on-chain reads it. */
export const livenessProbeTypes = {
  LivenessProbe: [
    { name: "leaseId", type: "uint256" },
    { name: "challenge", type: "bytes32" },
    { name: "attestor", type: "address" },
    { name: "issuedAtMs", type: "uint64" },
  ],
} as const;

/** The fields of a probe its attestor signs. */
export type LivenessProbeFields = { leaseId: bigint; challenge: Hex; attestor: Address; issuedAtMs: number };

function probeTypedData(domain: TypedDataDomain, probe: LivenessProbeFields) {
  return {
    domain,
    types: livenessProbeTypes,
    primaryType: "LivenessProbe" as const,
    message: { leaseId: probe.leaseId, challenge: probe.challenge, attestor: probe.attestor, issuedAtMs: BigInt(probe.issuedAtMs) },
  };
}

/** The EIP-712 digest of a probe (what its attestor signs). */
export function livenessProbeDigest(domain: TypedDataDomain, probe: LivenessProbeFields): Hex {
  return hashTypedData(probeTypedData(domain, probe));
}

/** The attestor's signature of a probe. */
export function signLivenessProbe(account: TypedDataSigner, domain: TypedDataDomain, probe: LivenessProbeFields): Promise<Hex> {
  return signTyped(account, probeTypedData(domain, probe));
}

/** The provider's signature of a heartbeat. */
export function signHeartbeat(account: TypedDataSigner, domain: TypedDataDomain, heartbeat: Heartbeat): Promise<Hex> {
  return signTyped(account, heartbeatTypedData(domain, heartbeat));
}

/** Who signed a heartbeat; undefined when the signature is malformed. */
export async function recoverHeartbeatSigner(domain: TypedDataDomain, heartbeat: Heartbeat, signature: Hex): Promise<Address | undefined> {
  try {
    return getAddress(await recoverTypedDataAddress({ ...heartbeatTypedData(domain, heartbeat), signature }));
  } catch {
    return undefined;
  }
}

/** Who signed a fault; undefined when the signature is malformed or one submitFault would refuse (common/signature.ts). */
export async function recoverFaultSigner(domain: TypedDataDomain, fault: Fault, signature: Hex): Promise<Address | undefined> {
  if (!isContractSignature(signature)) return undefined;
  try {
    return getAddress(await recoverTypedDataAddress({ ...faultTypedData(domain, fault), signature }));
  } catch {
    return undefined;
  }
}

function receiptTypedData(domain: TypedDataDomain, receipt: ProbeReceipt) {
  return { domain, types: { ProbeReceipt: suanliTypes.ProbeReceipt }, primaryType: "ProbeReceipt" as const, message: receipt };
}

/** The attestor's signature of a receipt: it got the provider's heartbeat for a probe and counted it as an answer. */
export function signProbeReceipt(account: TypedDataSigner, domain: TypedDataDomain, receipt: ProbeReceipt): Promise<Hex> {
  return signTyped(account, receiptTypedData(domain, receipt));
}

/** Who signed a receipt; undefined when the signature is malformed or one the contract would refuse (common/signature.ts). */
export async function recoverProbeReceiptSigner(domain: TypedDataDomain, receipt: ProbeReceipt, signature: Hex): Promise<Address | undefined> {
  if (!isContractSignature(signature)) return undefined;
  try {
    return getAddress(await recoverTypedDataAddress({ ...receiptTypedData(domain, receipt), signature }));
  } catch {
    return undefined;
  }
}

/**
 * Whether an attestor's receipt contradicts its signature of a liveness fault: the receipt is of
 * the fault's lease and was taken after the second of `observedAt` and no later than `observedAt`
 * + `windowSeconds` (ms ∈ [(observedAt + 1)·1000, (observedAt + windowSeconds)·1000]). An honest
 * attestor signs a liveness fault only once it has heard nothing after observedAt for the whole
 * window (node/attest/faults/fault-evidence.ts), so it never holds such a receipt. The same rule as
 * AttestorStaking.disputeFault.
 */
export function receiptContradictsFault(fault: Fault, receipt: ProbeReceipt, windowSeconds: number): boolean {
  return (
    receipt.leaseId === fault.leaseId && receipt.receivedAtMs >= BigInt(fault.observedAt + 1) * 1000n && receipt.receivedAtMs <= BigInt(fault.observedAt + windowSeconds) * 1000n
  );
}
