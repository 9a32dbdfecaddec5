/**
 * The provider's store of the attestations its machines passed (docs/attestation.md, "Fault kinds
 * and their evidence"). A capacity fault (kind 2) says the leased machine failed a challenge that
 * started at observedAt; an attestation of that machine, for at least the lease's units, signed by
 * the same attestor and issued in (observedAt, observedAt + W] proves it false on chain
 * (AttestorStaking.disputeCapacityFault; false-faults.ts sends it).
 *
 * The offers carry only each attestor's newest attestation of a machine, so a later pass would
 * replace the one inside a fault's window; this store keeps every pass issued in the last
 * PASSES_SPAN_SECONDS, in level (Bucket.providerPassedAttestations), one key per (machine,
 * attestor, second). A fault lands at most 600 s after its observedAt (the market's
 * FAULT_SUBMISSION_WINDOW), so the passes a lie contradicts are still here when it lands.
 */
import { getAddress, type Address } from "viem";
import type { SignedAttestation } from "../../../common/offers/message.js";
import { Bucket } from "../../store/buckets.js";
import type { Repository, Store } from "../../store/store.js";

/**
 * Passes issued this long before the provider's clock are deleted at the machine's next pass: the
 * market's 600 s submission window, plus 5 minutes of clock difference and 5 for the disputer's scan
 * (as for probe receipts, probe-receipts.ts RECEIPTS_SPAN_MS).
 */
export const PASSES_SPAN_SECONDS = 20 * 60;

function machinePrefix(machineId: number): string {
  return `${machineId.toString().padStart(10, "0")}/`;
}

function passKey(machineId: number, attestor: Address, issuedAt: number): string {
  return `${machinePrefix(machineId)}${attestor.toLowerCase()}/${issuedAt.toString().padStart(10, "0")}`;
}

export class PassedAttestations {
  private readonly repo: Repository<SignedAttestation>;

  constructor(
    private readonly store: Store,
    /** The provider's clock, unix ms. */
    private readonly now: () => number,
  ) {
    this.repo = store.repository<SignedAttestation>(Bucket.providerPassedAttestations);
  }

  /**
   * Keeps a pass the provider already verified (signed by `attestor`, an attestor on-chain, of this
   * provider's machine), and deletes the machine's passes older than the span.
   */
  async add(attestor: Address, signed: SignedAttestation): Promise<void> {
    const { machineId, issuedAt } = signed.attestation;
    const cutoff = Math.floor(this.now() / 1000) - PASSES_SPAN_SECONDS;
    const ops: Parameters<Store["batch"]>[0] = [];
    for await (const [key, kept] of this.repo.entries({ gte: machinePrefix(machineId), lt: `${machinePrefix(machineId)}~` })) {
      if (kept.attestation.issuedAt < cutoff) ops.push(this.repo.delOp(key));
    }
    if (issuedAt >= cutoff) ops.push(this.repo.putOp(passKey(machineId, attestor, issuedAt), signed));
    await this.store.batch(ops);
  }

  /**
   * The earliest pass by `attestor` of `machineId` for at least `units` units issued in [from, to]
   * (unix s), if one is kept: the evidence that contradicts that attestor's capacity fault.
   */
  async find(machineId: number, attestor: Address, units: number, from: number, to: number): Promise<SignedAttestation | undefined> {
    const base = `${machinePrefix(machineId)}${getAddress(attestor).toLowerCase()}/`;
    for await (const [, kept] of this.repo.entries({ gte: `${base}${from.toString().padStart(10, "0")}`, lt: `${base}${(to + 1).toString().padStart(10, "0")}` })) {
      if (kept.attestation.units >= units) return kept;
    }
    return undefined;
  }
}
