/**
 * The provider's side of probe receipts (issue 24, item 5): a receipt is kept only when the probe's
 * attestor signed it for the probe's lease and it is not stamped in the future; at most
 * RECEIPTS_KEPT per (lease, attestor) survive, in level, and old records are pruned.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { bytesToHex, type Hex } from "viem";
import { signProbeReceipt } from "../../../common/attest/liveness.js";
import { probeReceiptWireSchema } from "../../../common/attest/wire.js";
import { devnetAccount } from "../../../common/devnet.js";
import { suanliDomain } from "../../../common/eip712.js";
import { silentLogger } from "../../../node/log/logger.js";
import { ProbeReceipts, RECEIPT_MAX_FUTURE_MS, RECEIPTS_KEPT, RECEIPTS_TTL_MS, verifyReceipt } from "../../../node/attest/probe-receipts.js";
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

  it(`keeps the latest ${RECEIPTS_KEPT} per attestor, survives a reopen, and prunes records untouched for a week`, async () => {
    const first = 1_700_000_000_000n;
    await Promise.all(Array.from({ length: RECEIPTS_KEPT + 6 }, async (_, i) => receipts.accept(LEASE, attestor.address, await wireReceipt(attestor, LEASE, first + BigInt(i)))));
    await store.close();
    store = await Store.open(dir);
    receipts = new ProbeReceipts(store, { domain, now: () => clock, logger: silentLogger() });
    const kept = (await receipts.get(LEASE, attestor.address))!.receipts.map((entry) => entry.receipt.receivedAtMs);
    assert.equal(kept.length, RECEIPTS_KEPT);
    assert.equal(kept[0], first + 6n, "the oldest went first");
    assert.equal(kept.at(-1), first + BigInt(RECEIPTS_KEPT + 5));
    assert.equal(await receipts.prune(), 0);
    clock = nowMs + RECEIPTS_TTL_MS + 1;
    assert.equal(await receipts.prune(), 1);
    assert.equal(await receipts.get(LEASE, attestor.address), undefined);
  });
});
