/**
 * The provider's side of probe receipts (issue 24, item 5): a receipt is kept only when the probe's
 * attestor signed it for the probe's lease and it is not stamped in the future; every receipt of
 * the last RECEIPTS_SPAN_MS is kept (one per second), in level, so that a fault backdated as far as
 * the market allows still meets them and a liar cannot flush them; old records are pruned.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { bytesToHex, type Hex } from "viem";
import { receiptContradictsFault, signProbeReceipt } from "../../../common/attest/liveness.js";
import { probeReceiptWireSchema } from "../../../common/attest/wire.js";
import { devnetAccount } from "../../../common/devnet.js";
import { FaultKind, suanliDomain, type Fault } from "../../../common/eip712.js";
import { silentLogger } from "../../../node/log/logger.js";
import { ProbeReceipts, RECEIPT_MAX_FUTURE_MS, RECEIPTS_MAX_KEPT, RECEIPTS_SPAN_MS, RECEIPTS_TTL_MS, verifyReceipt } from "../../../node/attest/disputes/probe-receipts.js";
import { Bucket } from "../../../node/store/buckets.js";
import { Store } from "../../../node/store/store.js";

const domain = suanliDomain(31337, "0x00000000000000000000000000000000000000aa");
const attestor = devnetAccount(6);
const other = devnetAccount(7);
const LEASE = 12n;

const challenge = (): Hex => bytesToHex(globalThis.crypto.getRandomValues(new Uint8Array(32)));

/** A receipt as it travels on a probe (parsed by the wire schema), signed by `account` for `leaseId`. */
async function wireReceipt(account = attestor, leaseId = LEASE, receivedAtMs = 1_700_000_000_000n) {
  const fields = { leaseId, challenge: challenge(), receivedAtMs };
  const signature = await signProbeReceipt(account, domain, fields);
  return probeReceiptWireSchema.parse({ challenge: fields.challenge, receivedAtMs: receivedAtMs.toString(), signature });
}

describe("provider: attestors' probe receipts", () => {
  const nowMs = 1_700_000_000_500;
  let dir: string;
  let store: Store;
  let clock = nowMs;
  let receipts: ProbeReceipts;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-receipts-"));
    store = await Store.open(dir);
    clock = nowMs;
    receipts = new ProbeReceipts(store, { domain, now: () => clock, logger: silentLogger() });
  });
  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps a receipt the probe's attestor signed for the probe's lease", async () => {
    const verdict = await receipts.accept(LEASE, attestor.address, await wireReceipt());
    assert.equal(verdict.ok, true);
    const record = await receipts.get(LEASE, attestor.address);
    assert.equal(record?.receipts.length, 1);
    assert.equal(record?.receipts[0]?.receipt.leaseId, LEASE);
    assert.equal(await receipts.holdsLease(LEASE), true);
    assert.equal(await receipts.holdsLease(LEASE + 1n), false);
  });

  it("drops a receipt signed by another key, one of another lease, and one stamped far in the future", async () => {
    const byOther = await receipts.accept(LEASE, attestor.address, await wireReceipt(other));
    assert.ok(!byOther.ok && byOther.reason === "wrong_signer", JSON.stringify(byOther));
    // Signed for lease 13, carried on a probe of lease 12: it recovers to some other key.
    const otherLease = await receipts.accept(LEASE, attestor.address, await wireReceipt(attestor, LEASE + 1n));
    assert.ok(!otherLease.ok && otherLease.reason === "wrong_signer", JSON.stringify(otherLease));
    const future = await receipts.accept(LEASE, attestor.address, await wireReceipt(attestor, LEASE, BigInt(nowMs + RECEIPT_MAX_FUTURE_MS + 1)));
    assert.ok(!future.ok && future.reason === "future", JSON.stringify(future));
    assert.equal(await receipts.get(LEASE, attestor.address), undefined, "nothing was kept");
    // Just inside the bound is kept.
    assert.equal((await verifyReceipt(domain, LEASE, attestor.address, await wireReceipt(attestor, LEASE, BigInt(nowMs + RECEIPT_MAX_FUTURE_MS)), nowMs)).ok, true);
  });

  it("refuses a malformed receipt on the wire (not a uint64, a bad challenge)", () => {
    const signature = `0x${"11".repeat(65)}`;
    assert.equal(probeReceiptWireSchema.safeParse({ challenge: challenge(), receivedAtMs: (2n ** 64n).toString(), signature }).success, false);
    assert.equal(probeReceiptWireSchema.safeParse({ challenge: challenge(), receivedAtMs: "-1", signature }).success, false);
    assert.equal(probeReceiptWireSchema.safeParse({ challenge: "0x12", receivedAtMs: "1", signature }).success, false);
  });

  /** The market's FAULT_SUBMISSION_WINDOW: a fault lands at most this long after its observedAt. */
  const SUBMISSION_WINDOW_S = 600;
  const WINDOW_S = 30;
  const held = async () => (await receipts.get(LEASE, attestor.address))?.receipts ?? [];
  const contradicted = async (fault: Fault) => (await held()).some((entry) => receiptContradictsFault(fault, entry.receipt, WINDOW_S));

  it("still holds the receipts of the window a fault backdated as far as the market allows lies about (a probe every 5 s for 600 s)", async () => {
    const startS = Math.floor(nowMs / 1000);
    for (let i = 0; i <= SUBMISSION_WINDOW_S / 5; i++) {
      clock = nowMs + i * 5_000;
      await receipts.accept(LEASE, attestor.address, await wireReceipt(attestor, LEASE, BigInt(clock - 150)));
    }
    // The liars' fault lands now and says the provider was silent from 600 s ago: the market takes it.
    const observedAt = Math.floor(clock / 1000) - SUBMISSION_WINDOW_S;
    assert.ok(observedAt >= startS);
    assert.equal(await contradicted({ leaseId: LEASE, kind: FaultKind.unresponsive, observedAt }), true, "a receipt inside the lied-about window is still held");
    assert.equal((await held()).length, SUBMISSION_WINDOW_S / 5 + 1);
  });

  it("cannot be flushed: receipts stamped ahead, many to a second, are kept one per second (the earliest) and evict nothing", async () => {
    const observedAt = Math.floor(nowMs / 1000) + 1;
    await receipts.accept(LEASE, attestor.address, await wireReceipt(attestor, LEASE, BigInt((observedAt + 3) * 1000 + 900)));
    // Later receipts of that same second add nothing; an earlier one replaces it.
    await receipts.accept(LEASE, attestor.address, await wireReceipt(attestor, LEASE, BigInt((observedAt + 3) * 1000 + 950)));
    await receipts.accept(LEASE, attestor.address, await wireReceipt(attestor, LEASE, BigInt((observedAt + 3) * 1000 + 100)));
    assert.deepEqual(
      (await held()).map((entry) => entry.receipt.receivedAtMs),
      [BigInt((observedAt + 3) * 1000 + 100)],
    );
    // The liar then sends 300 receipts, ten to a second.
    clock = nowMs + 60_000;
    for (let i = 0; i < 300; i++) await receipts.accept(LEASE, attestor.address, await wireReceipt(attestor, LEASE, BigInt(clock + 100 * i)));
    const kept = await held();
    assert.equal(kept.length, 1 + 31, "the first receipt and one for each of the 31 seconds the flood touches (x.5 s to x+30.4 s)");
    assert.ok(kept.length <= RECEIPTS_MAX_KEPT);
    assert.equal(await contradicted({ leaseId: LEASE, kind: FaultKind.unresponsive, observedAt }), true);
  });

  it(`deletes receipts older than ${RECEIPTS_SPAN_MS / 60_000} min at the attestor's next one, survives a reopen, and prunes records untouched for a week`, async () => {
    const first = BigInt(nowMs - 1_000);
    await Promise.all(Array.from({ length: 6 }, async (_, i) => receipts.accept(LEASE, attestor.address, await wireReceipt(attestor, LEASE, first + BigInt(i) * 1000n))));
    await receipts.accept(LEASE, other.address, await wireReceipt(other, LEASE, first));
    await receipts.markDisputed(LEASE, attestor.address, 42);
    await store.close();
    store = await Store.open(dir);
    receipts = new ProbeReceipts(store, { domain, now: () => clock, logger: silentLogger() });
    assert.deepEqual(
      (await held()).map((entry) => entry.receipt.receivedAtMs),
      Array.from({ length: 6 }, (_, i) => first + BigInt(i) * 1000n),
    );
    assert.deepEqual((await receipts.get(LEASE, attestor.address))?.disputed, [42]);
    // The span later, the next receipt deletes the first four (older than the span), keeps the rest.
    clock = Number(first) + 3_500 + RECEIPTS_SPAN_MS;
    await receipts.accept(LEASE, attestor.address, await wireReceipt(attestor, LEASE, BigInt(clock)));
    assert.deepEqual(
      (await held()).map((entry) => entry.receipt.receivedAtMs),
      [first + 4_000n, first + 5_000n, BigInt(clock)],
    );
    assert.equal((await receipts.get(LEASE, other.address))?.receipts.length, 1, "another attestor's receipts are its own");
    // A record an earlier version wrote (one value holding the latest 64) is dropped at the next pruning.
    const legacyKey = `${"0".repeat(76)}99/${attestor.address.toLowerCase()}`;
    await store.repository<unknown>(Bucket.providerProbeReceipts).put(legacyKey, { leaseId: 99n, attestor: attestor.address, receipts: [], disputed: [], updatedAtMs: clock });
    assert.equal(await receipts.holdsLease(99n), true);
    assert.equal(await receipts.prune(), 0);
    assert.equal(await receipts.holdsLease(99n), false);
    clock = nowMs + RECEIPTS_TTL_MS + 1;
    assert.equal(await receipts.prune(), 1, "the other attestor's record, untouched for a week");
    assert.equal(await receipts.get(LEASE, other.address), undefined);
    assert.equal((await held()).length, 3);
    clock += RECEIPTS_SPAN_MS + RECEIPTS_TTL_MS;
    assert.equal(await receipts.prune(), 1);
    assert.equal(await receipts.get(LEASE, attestor.address), undefined);
    assert.equal(await receipts.holdsLease(LEASE), false);
  });
});
