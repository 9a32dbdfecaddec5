/**
 * The provider's store of attestors' probe receipts (docs/attestation.md, "A false liveness
 * fault"). Each liveness probe may carry the attestor's signed ProbeReceipt of its previous
 * answered probe of the same lease; the provider verifies it (signed by the probe's attestor, of
 * the probe's lease, not from the future) and keeps, per (lease, attestor), the last
 * RECEIPTS_KEPT of them in level (Bucket.providerProbeReceipts). A liveness fault signed by an
 * attestor that holds a receipt inside the fault window after observedAt is a lie that
 * AttestorStaking.disputeFault slashes (false-faults.ts sends it).
 *
 * Records not written for RECEIPTS_TTL_MS (the lease is long over) are pruned.
 */
import { getAddress, type Address, type Hex, type TypedDataDomain } from "viem";
import { recoverProbeReceiptSigner } from "../../common/attest/liveness.js";
import type { ProbeReceiptWire } from "../../common/attest/wire.js";
import type { ProbeReceipt } from "../../common/eip712.js";
import type { Logger } from "../log/logger.js";
import { Bucket } from "../store/buckets.js";
import type { Repository, Store } from "../store/store.js";
import { runDetached } from "../../common/detached.js";

/** Receipts kept per (lease, attestor): the latest ones, which are the ones a fault can contradict. */
export const RECEIPTS_KEPT = 64;
/** A receipt stamped further than this ahead of the provider's clock is dropped (a broken clock or a forgery). */
export const RECEIPT_MAX_FUTURE_MS = 5 * 60_000;
/** Records untouched this long are deleted: the lease is over and any fault of it long disputed. */
export const RECEIPTS_TTL_MS = 7 * 24 * 3_600_000;

/** One kept receipt: the EIP-712 ProbeReceipt and the attestor's signature. */
export type StoredReceipt = { receipt: ProbeReceipt; signature: Hex };

/** Per (lease, attestor): its receipts, oldest first, and the faults already disputed. */
export type ReceiptRecord = {
  leaseId: bigint;
  attestor: Address;
  receipts: StoredReceipt[];
  /** observedAt of each liveness fault of this lease already disputed against this attestor. */
  disputed: number[];
  updatedAtMs: number;
};

export type ReceiptVerdict = { ok: true; receipt: StoredReceipt } | { ok: false; reason: "wrong_signer" | "future" | "bad_signature"; detail: string };

function recordKey(leaseId: bigint, attestor: Address): string {
  return `${leaseId.toString().padStart(78, "0")}/${attestor.toLowerCase()}`;
}

/**
 * Checks a receipt a probe carried: signed by `attestor` (the probe's, whose probe signature was
 * already checked) for `leaseId` (the probe's), stamped no more than RECEIPT_MAX_FUTURE_MS ahead
 * of `nowMs`. The lease is the probe's by construction (the wire receipt has no lease of its own),
 * so a receipt for another lease does not recover to the attestor.
 */
export async function verifyReceipt(domain: TypedDataDomain, leaseId: bigint, attestor: Address, wire: ProbeReceiptWire, nowMs: number): Promise<ReceiptVerdict> {
  const receipt: ProbeReceipt = { leaseId, challenge: wire.challenge as Hex, receivedAtMs: wire.receivedAtMs };
  if (receipt.receivedAtMs > BigInt(nowMs + RECEIPT_MAX_FUTURE_MS)) {
    return { ok: false, reason: "future", detail: `receivedAtMs ${receipt.receivedAtMs} is more than ${RECEIPT_MAX_FUTURE_MS / 1000} s ahead of ${nowMs}` };
  }
  const signer = await recoverProbeReceiptSigner(domain, receipt, wire.signature);
  if (!signer) return { ok: false, reason: "bad_signature", detail: "the receipt's signature does not recover" };
  if (signer !== getAddress(attestor))
    return { ok: false, reason: "wrong_signer", detail: `the receipt is signed by ${signer}, not the probe's attestor ${attestor} (or is of another lease)` };
  return { ok: true, receipt: { receipt, signature: wire.signature } };
}

export class ProbeReceipts {
  private readonly repo: Repository<ReceiptRecord>;
  /** Per record key: the write in progress, so concurrent probes of one attestor do not lose receipts. */
  private readonly writes = new Map<string, Promise<unknown>>();

  constructor(
    store: Store,
    private readonly o: { domain: TypedDataDomain; now: () => number; logger: Logger },
  ) {
    this.repo = store.repository<ReceiptRecord>(Bucket.providerProbeReceipts);
  }

  /** Verifies and keeps a receipt; returns the verdict (a dropped receipt is logged at debug). */
  async accept(leaseId: bigint, attestor: Address, wire: ProbeReceiptWire): Promise<ReceiptVerdict> {
    const verdict = await verifyReceipt(this.o.domain, leaseId, attestor, wire, this.o.now());
    if (!verdict.ok) {
      this.o.logger.debug("Dropped an attestor's probe receipt", { leaseId, attestor, reason: verdict.reason, detail: verdict.detail });
      return verdict;
    }
    await this.mutate(leaseId, attestor, (record) => {
      if (record.receipts.some((held) => held.receipt.challenge === verdict.receipt.receipt.challenge)) return false;
      record.receipts.push(verdict.receipt);
      record.receipts.sort((a, b) => (a.receipt.receivedAtMs < b.receipt.receivedAtMs ? -1 : a.receipt.receivedAtMs > b.receipt.receivedAtMs ? 1 : 0));
      if (record.receipts.length > RECEIPTS_KEPT) record.receipts.splice(0, record.receipts.length - RECEIPTS_KEPT);
      return true;
    });
    return verdict;
  }

  /** The record of (lease, attestor), if any receipt was kept. */
  get(leaseId: bigint, attestor: Address): Promise<ReceiptRecord | undefined> {
    return this.repo.get(recordKey(leaseId, attestor));
  }

  /** Whether any attestor's receipt of `leaseId` is kept (only this provider's active leases' receipts are). */
  async holdsLease(leaseId: bigint): Promise<boolean> {
    const prefix = `${leaseId.toString().padStart(78, "0")}/`;
    for await (const _ of this.repo.entries({ gte: prefix, lt: `${prefix}~`, limit: 1 })) return true;
    return false;
  }

  /** Notes that the fault observed at `observedAt` was disputed against `attestor` (never sent twice). */
  async markDisputed(leaseId: bigint, attestor: Address, observedAt: number): Promise<void> {
    await this.mutate(leaseId, attestor, (record) => {
      if (record.disputed.includes(observedAt)) return false;
      record.disputed.push(observedAt);
      return true;
    });
  }

  /** Deletes records untouched for RECEIPTS_TTL_MS; returns how many. */
  async prune(): Promise<number> {
    const cutoff = this.o.now() - RECEIPTS_TTL_MS;
    const stale: string[] = [];
    for await (const [key, record] of this.repo.entries()) if (record.updatedAtMs < cutoff) stale.push(key);
    for (const key of stale) await this.repo.del(key);
    return stale.length;
  }

  private mutate(leaseId: bigint, attestor: Address, change: (record: ReceiptRecord) => boolean): Promise<void> {
    const key = recordKey(leaseId, attestor);
    const previous = this.writes.get(key) ?? Promise.resolve();
    const work = previous
      .catch(() => undefined)
      .then(async () => {
        const record = (await this.repo.get(key)) ?? { leaseId, attestor: getAddress(attestor), receipts: [], disputed: [], updatedAtMs: 0 };
        if (!change(record)) return;
        record.updatedAtMs = this.o.now();
        await this.repo.put(key, record);
      });
    this.writes.set(key, work);
    // The caller awaits `work` and sees its failure; this only clears the chain.
    runDetached(
      work.finally(() => {
        if (this.writes.get(key) === work) this.writes.delete(key);
      }),
      undefined,
      "Clearing a receipt write",
    );
    return work;
  }
}
