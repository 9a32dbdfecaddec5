/**
 * The provider's store of attestors' probe receipts (docs/attestation.md, "A false liveness
 * fault"). Each liveness probe may carry the attestor's signed ProbeReceipt of its previous
 * answered probe of the same lease; the provider verifies it (signed by the probe's attestor, of
 * the probe's lease, not from the future) and keeps it in level (Bucket.providerProbeReceipts), one
 * key per receipt. A liveness fault signed by an attestor that holds a receipt inside the fault
 * window after observedAt is a lie that AttestorStaking.disputeFault slashes (false-faults.ts sends
 * it).
 *
 * What is kept is decided by time, not by count: every receipt received from RECEIPTS_SPAN_MS
 * before the provider's clock on, one per second (the earliest of its second: any fault window
 * that a later receipt of the same second falls in holds it too). A fault lands at most the
 * market's FAULT_SUBMISSION_WINDOW (600 s) after its observedAt, so a liar that backdates its fault
 * as far as the market allows still meets the receipts of the window it lies about; and as nothing
 * is evicted for room, a liar cannot flush them by sending many receipts. Per (lease, attestor) at
 * most (RECEIPTS_SPAN_MS + RECEIPT_MAX_FUTURE_MS) / 1000 + 1 receipts exist.
 *
 * Records not written for RECEIPTS_TTL_MS (the lease is long over) are pruned.
 */
import { getAddress, type Address, type Hex, type TypedDataDomain } from "viem";
import { recoverProbeReceiptSigner } from "../../../common/attest/liveness.js";
import type { ProbeReceiptWire } from "../../../common/attest/wire.js";
import type { ProbeReceipt } from "../../../common/eip712.js";
import type { Logger } from "../../log/logger.js";
import { Bucket } from "../../store/buckets.js";
import type { Repository, Store } from "../../store/store.js";
import { runDetached } from "../../../common/detached.js";

/** A receipt stamped further than this ahead of the provider's clock is dropped (a broken clock or a forgery). */
export const RECEIPT_MAX_FUTURE_MS = 5 * 60_000;
/**
 * Receipts received this long before the provider's clock are deleted when the attestor's next one
 * comes: the market's 600 s FAULT_SUBMISSION_WINDOW, plus 5 minutes for the clocks of chain,
 * attestor and provider to differ and 5 for the disputer to scan.
 */
export const RECEIPTS_SPAN_MS = 20 * 60_000;
/** The most receipts one (lease, attestor) can have kept: one per second of the span and of the future allowed. */
export const RECEIPTS_MAX_KEPT = (RECEIPTS_SPAN_MS + RECEIPT_MAX_FUTURE_MS) / 1000 + 1;
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

type RawOp = Parameters<Store["batch"]>[0][number];

/** What one key of the bucket holds: a (lease, attestor)'s record less its receipts, or one receipt. */
type Entry = { meta: Omit<ReceiptRecord, "receipts"> } | { kept: StoredReceipt };

export type ReceiptVerdict = { ok: true; receipt: StoredReceipt } | { ok: false; reason: "wrong_signer" | "future" | "bad_signature"; detail: string };

function recordKey(leaseId: bigint, attestor: Address): string {
  return `${leaseId.toString().padStart(78, "0")}/${attestor.toLowerCase()}/`;
}

/** The key of a record's receipt of second `second`: after its meta key ("m"), in time order. */
function receiptKey(base: string, second: bigint): string {
  return `${base}r${second.toString().padStart(20, "0")}`;
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
  private readonly repo: Repository<Entry>;
  /** Per record key: the write in progress, so concurrent probes of one attestor do not lose receipts. */
  private readonly writes = new Map<string, Promise<unknown>>();

  constructor(
    private readonly store: Store,
    private readonly o: { domain: TypedDataDomain; now: () => number; logger: Logger },
  ) {
    this.repo = store.repository<Entry>(Bucket.providerProbeReceipts);
  }

  /** Verifies and keeps a receipt (the earliest of its second), deleting the attestor's receipts older than the span; returns the verdict. */
  async accept(leaseId: bigint, attestor: Address, wire: ProbeReceiptWire): Promise<ReceiptVerdict> {
    const nowMs = this.o.now();
    const verdict = await verifyReceipt(this.o.domain, leaseId, attestor, wire, nowMs);
    if (!verdict.ok) {
      this.o.logger.debug("Dropped an attestor's probe receipt", { leaseId, attestor, reason: verdict.reason, detail: verdict.detail });
      return verdict;
    }
    const base = recordKey(leaseId, attestor);
    const cutoffMs = BigInt(Math.max(0, Math.floor(nowMs - RECEIPTS_SPAN_MS)));
    await this.serialized(base, async () => {
      const ops: RawOp[] = [];
      const receivedAtMs = verdict.receipt.receipt.receivedAtMs;
      if (receivedAtMs >= cutoffMs) {
        const key = receiptKey(base, receivedAtMs / 1000n);
        const held = await this.repo.get(key);
        if (!held || !("kept" in held) || held.kept.receipt.receivedAtMs > receivedAtMs) ops.push(this.repo.putOp(key, { kept: verdict.receipt }));
      }
      for await (const [key] of this.repo.entries({ gte: `${base}r`, lt: receiptKey(base, cutoffMs / 1000n) })) ops.push(this.repo.delOp(key));
      const meta = await this.meta(base, leaseId, attestor);
      ops.push(this.repo.putOp(`${base}m`, { meta: { ...meta, updatedAtMs: nowMs } }));
      await this.store.batch(ops);
    });
    return verdict;
  }

  /** The record of (lease, attestor), if any receipt was kept: its receipts oldest first. */
  async get(leaseId: bigint, attestor: Address): Promise<ReceiptRecord | undefined> {
    const base = recordKey(leaseId, attestor);
    let meta: Entry | undefined;
    const receipts: StoredReceipt[] = [];
    for await (const [key, entry] of this.repo.entries({ gte: base, lt: `${base}~` })) {
      if ("kept" in entry) receipts.push(entry.kept);
      else if (key === `${base}m`) meta = entry;
    }
    if (!meta || !("meta" in meta)) return undefined;
    return { ...meta.meta, receipts };
  }

  /** Whether any attestor's receipt of `leaseId` is kept (only this provider's active leases' receipts are). */
  async holdsLease(leaseId: bigint): Promise<boolean> {
    const prefix = `${leaseId.toString().padStart(78, "0")}/`;
    for await (const _ of this.repo.entries({ gte: prefix, lt: `${prefix}~`, limit: 1 })) return true;
    return false;
  }

  /** Notes that the fault observed at `observedAt` was disputed against `attestor` (never sent twice). */
  async markDisputed(leaseId: bigint, attestor: Address, observedAt: number): Promise<void> {
    const base = recordKey(leaseId, attestor);
    await this.serialized(base, async () => {
      const meta = await this.meta(base, leaseId, attestor);
      if (meta.disputed.includes(observedAt)) return;
      await this.repo.put(`${base}m`, { meta: { ...meta, disputed: [...meta.disputed, observedAt], updatedAtMs: this.o.now() } });
    });
  }

  /** Deletes the records (and their receipts) untouched for RECEIPTS_TTL_MS; returns how many records. */
  async prune(): Promise<number> {
    const cutoff = this.o.now() - RECEIPTS_TTL_MS;
    const stale = new Set<string>();
    const ops: RawOp[] = [];
    for await (const [key, entry] of this.repo.entries()) {
      // A record in the earlier layout (one value per lease and attestor, its latest 64 receipts): dropped.
      if (!("meta" in entry) && !("kept" in entry)) {
        ops.push(this.repo.delOp(key));
        continue;
      }
      const base = key.slice(0, key.lastIndexOf("/") + 1);
      if ("meta" in entry && entry.meta.updatedAtMs < cutoff) stale.add(base);
      // The meta key ("m") sorts before its receipts ("r…"): a stale record's receipts follow it.
      if (stale.has(base)) ops.push(this.repo.delOp(key));
    }
    await this.store.batch(ops);
    return stale.size;
  }

  private async meta(base: string, leaseId: bigint, attestor: Address): Promise<Omit<ReceiptRecord, "receipts">> {
    const held = await this.repo.get(`${base}m`);
    return held && "meta" in held ? held.meta : { leaseId, attestor: getAddress(attestor), disputed: [], updatedAtMs: 0 };
  }

  private serialized(base: string, change: () => Promise<void>): Promise<void> {
    const previous = this.writes.get(base) ?? Promise.resolve();
    const work = previous.catch(() => undefined).then(change);
    this.writes.set(base, work);
    // The caller awaits `work` and sees its failure; this only clears the chain.
    runDetached(
      work.finally(() => {
        if (this.writes.get(base) === work) this.writes.delete(base);
      }),
      undefined,
      "Clearing a receipt write",
    );
    return work;
  }
}
