import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { LeaseView } from "../../common/chain/market.js";
import { parseConfigFlags } from "../../node/cli/config-flags.js";
import { loadConfig } from "../../node/config/load.js";
import { nodeConfigSchema } from "../../node/config/schema.js";
import { claimWorthy } from "../../node/provider/agent/claims.js";
import { newLeaseRecord, type LeaseRecord } from "../../node/provider/agent/records.js";
import { ReservationBook } from "../../node/provider/agent/reservations.js";
import { preemptionCandidates } from "../../node/provider/agent/reserve.js";
import { clampToHardLimits } from "../../node/provider/runtime/limits.js";
import { Store } from "../../node/store/store.js";

const RENTER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC" as const;

function view(overrides: Partial<LeaseView>): LeaseView {
  return {
    leaseId: 1n,
    renter: RENTER,
    provider: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    machineId: 1,
    units: 1,
    pricePerUnitSecond: 100n,
    interruptible: false,
    collateralBps: 1_000,
    collateral: 0n,
    deposit: 6_000n,
    paid: 0n,
    startDeadline: 0,
    activatedAt: 1_000,
    stopAt: 0,
    end: 1_060,
    duration: 60,
    status: "Active",
    endReason: "None",
    accrued: 0n,
    claimable: 0n,
    ...overrides,
  };
}

function lease(leaseId: bigint, overrides: Partial<LeaseView>): LeaseRecord {
  return newLeaseRecord(view({ leaseId, ...overrides }), 0n);
}

describe("provider agent parts", function () {
  describe("reservations in level", function () {
    let dir: string;
    beforeEach(async () => {
      dir = await mkdtemp(path.join(tmpdir(), "suanli-reservations-"));
    });
    afterEach(async () => rm(dir, { recursive: true, force: true }));

    it("a restarted node has the holds, the used reserve nonces and the offer-nonce counter it wrote before answering", async () => {
      let now = 1_000_000;
      let store = await Store.open(dir);
      let book = await ReservationBook.load(store, { ttlMs: 60_000, now: () => now });
      book.table.setCapacity(1, { freeUnits: 2, preemptibleUnits: 0 });
      const first = book.allocateOfferNonce();
      const second = book.allocateOfferNonce();
      assert.equal(second, first + 1n);
      assert.ok(first >= 1_000_000_000n, "renter-bound nonces stay clear of the public offers' nonce 0");
      assert.equal(book.table.hold({ id: second.toString(), machineId: 1, units: 2, renter: RENTER }).ok, true);
      book.addTerms({
        holdId: second.toString(),
        reserveNonce: `0x${"ab".repeat(32)}`,
        renter: RENTER,
        machineId: 1,
        units: 2,
        duration: 60,
        interruptible: false,
        pricePerUnitSecond: 100n,
        deposit: 12_000n,
        collateral: 1_200n,
        expiresAt: now + 60_000,
      });
      book.markNonceUsed(`0x${"AB".repeat(32)}`, now + 600_000);
      await book.persist();
      await store.close();

      store = await Store.open(dir);
      book = await ReservationBook.load(store, { ttlMs: 60_000, now: () => now });
      assert.equal(book.table.holds().length, 1);
      assert.equal(book.table.available(1), 0, "the restored hold still takes both units");
      assert.equal(book.pendingCollateral(), 1_200n);
      assert.equal(book.isNonceUsed(`0x${"ab".repeat(32)}`), true);
      assert.equal(book.allocateOfferNonce(), second + 1n, "no nonce is signed twice");
      // The lease opened: its hold ends and its units leave the capacity.
      assert.equal(book.commit(second.toString())?.units, 2);
      assert.equal(book.table.capacity(1)?.freeUnits, 0);
      assert.equal(book.termsOf(second.toString()), undefined);
      await book.persist();
      await store.close();

      // Expired holds and nonces are gone after a restart much later.
      now += 3_600_000;
      store = await Store.open(dir);
      book = await ReservationBook.load(store, { ttlMs: 60_000, now: () => now });
      assert.equal(book.table.holds().length, 0);
      assert.equal(book.isNonceUsed(`0x${"ab".repeat(32)}`), false);
      await store.close();
    });
  });

  it("preemption candidates: expired leases first, then interruptible leases by ascending price; an interruptible opener only outbids lower bids", () => {
    const leases = [
      lease(1n, { interruptible: true, pricePerUnitSecond: 70n }),
      lease(2n, { interruptible: true, pricePerUnitSecond: 50n }),
      lease(3n, { interruptible: false, pricePerUnitSecond: 100n }),
      lease(4n, { interruptible: false, end: 900 }),
      lease(5n, { interruptible: true, pricePerUnitSecond: 40n, status: "Ended" }),
      lease(6n, { interruptible: true, pricePerUnitSecond: 10n, machineId: 2 }),
      lease(7n, { interruptible: true, pricePerUnitSecond: 60n, status: "Open", end: 0 }),
    ];
    assert.deepEqual(
      preemptionCandidates(leases, 1, { interruptible: false, bid: 0n }, 1_000).map((l) => l.leaseId),
      [4n, 2n, 7n, 1n],
    );
    assert.deepEqual(
      preemptionCandidates(leases, 1, { interruptible: true, bid: 65n }, 1_000).map((l) => l.leaseId),
      [4n, 2n, 7n],
    );
  });

  it("claims: ended leases once their accrual is over, active ones past the threshold or past their end (finalized even with nothing claimable yet), never zero otherwise", () => {
    assert.equal(claimWorthy(view({ claimable: 0n, status: "Ended", stopAt: 900 }), 1_000, 1n), false);
    assert.equal(claimWorthy(view({ claimable: 50n, status: "Ended", stopAt: 900 }), 1_000, 1_000n), true);
    assert.equal(claimWorthy(view({ claimable: 50n, status: "Ended", stopAt: 1_010 }), 1_000, 1_000n), false, "a preempted lease still accruing waits for its notice");
    assert.equal(claimWorthy(view({ claimable: 50n }), 1_000, 1_000n), false);
    assert.equal(claimWorthy(view({ claimable: 5_000n }), 1_000, 1_000n), true);
    assert.equal(claimWorthy(view({ claimable: 50n, end: 990 }), 1_000, 1_000n), true, "past its end: the claim finalizes it");
    assert.equal(claimWorthy(view({ claimable: 0n, end: 990 }), 1_000, 1_000n), true, "past its end with its pay held (issue #34): still finalized, its units freed");
    assert.equal(claimWorthy(view({ claimable: 0n, end: 990 }), 1_000, 1_000n, true), false, "but not before its completion report");
    assert.equal(claimWorthy(view({ claimable: 50n, status: "Settled" }), 1_000, 1n), false);
    assert.equal(claimWorthy(view({ claimable: 5_000n, end: 990 }), 1_000, 1_000n, true), false, "a lease that still gets its completion report is not finalized by a claim");
    assert.equal(claimWorthy(view({ claimable: 5_000n }), 1_000, 1_000n, true), true, "before its end it may be claimed in part");
  });

  it("config flags after the command's options: --dotted.key value and --dotted.key=value (one parser for every start command)", async () => {
    assert.deepEqual(parseConfigFlags(["--chain.rpcUrl", "http://127.0.0.1:8545", "--log.level=debug"]), { "chain.rpcUrl": "http://127.0.0.1:8545", "log.level": "debug" });
    // A bare flag is `true`; the config schema refuses it where a key takes something else.
    assert.deepEqual(parseConfigFlags(["--log.level"]), { "log.level": "true" });
    await assert.rejects(loadConfig(nodeConfigSchema, { env: {}, flags: parseConfigFlags(["--log.level"]) }), { name: "ConfigError" });
    assert.throws(() => parseConfigFlags(["stray"]), { name: "CliError" });
  });

  it("resource limits are lowered to the node's hard limits, never raised", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-limits-"));
    try {
      const file = path.join(dir, "limits");
      const { writeFile } = await import("node:fs/promises");
      await writeFile(
        file,
        [
          "Limit                     Soft Limit           Hard Limit           Units     ",
          "Max cpu time              unlimited            unlimited            seconds   ",
          "Max processes             4096                 8192                 processes ",
          "Max open files            1024                 20000                files     ",
        ].join("\n"),
      );
      assert.deepEqual(await clampToHardLimits({ openFiles: 65_536, processes: 100, cpuSeconds: 30 }, file), { openFiles: 20_000, processes: 100, cpuSeconds: 30 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
