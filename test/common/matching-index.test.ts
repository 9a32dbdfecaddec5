import assert from "node:assert/strict";
import { BookIndex, type Slot, type SlotList } from "../../common/matching/book-index.js";
import { type MatchContext, failureMask, failureMasks, hostNeeds } from "../../common/matching/constraints.js";
import { parseMatchingOptions, parseMatchRequest } from "../../common/matching/index.js";
import { NOW, type OfferSpec, entry, requestInput } from "../support/matching-fixtures.js";

/** A small deterministic generator (mulberry32), so a failure names its seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MODELS = ["A100-80GB", "H100-80GB-SXM"];
const REGIONS = ["eu-west", "us-east"];

function randomSpec(random: () => number, machineId: number, seq: number): OfferSpec {
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)];
  const units = pick([1, 2, 4, 8]);
  const interruptible = Math.floor(random() * (units! + 1) * random());
  const onDemand = Math.floor(random() * (units! - interruptible + 1));
  const sells = random() < 0.5;
  return {
    machineId,
    seq,
    model: pick(MODELS),
    units,
    region: pick(REGIONS),
    cluster: random() < 0.5 ? 1 + Math.floor(random() * 4) : undefined,
    price: 300 + Math.floor(random() * 400),
    minBid: sells ? 100 + Math.floor(random() * 200) : 0,
    minDuration: pick([60, 3600]),
    maxDuration: pick([7200, 86_400]),
    expiry: NOW + pick([30, 3600, 86_400])!,
    free: units! - onDemand - interruptible,
    onDemand,
    interruptible,
    lowestBid: interruptible > 0 ? 150 + Math.floor(random() * 200) : null,
    attestedAgo: random() < 0.2 ? null : Math.floor(random() * 86_400),
    attestationExpiry: NOW + (random() < 0.2 ? -60 : 86_400),
    ...(random() < 0.5 ? { ccExpiry: NOW + (random() < 0.3 ? -60 : 3_600) } : {}),
    completed: Math.floor(random() * 50),
    faults: Math.floor(random() * 5),
    latencyMs: random() < 0.3 ? null : Math.floor(random() * 400),
    vramMiB: pick([40_960, 81_920]),
    ...(random() < 0.7 ? { resources: { cpuCoresPerUnit: pick([2, 8])!, memoryMiBPerUnit: pick([16_384, 65_536])!, diskMiBPerUnit: pick([51_200, 204_800])! } } : {}),
  };
}

function context(random: () => number): MatchContext {
  const interruptible = random() < 0.4;
  const request = parseMatchRequest(
    requestInput({
      gpuCount: 1 + Math.floor(random() * 8),
      duration: [600, 3600, 86_400][Math.floor(random() * 3)],
      attestedOnly: random() < 0.5,
      gpuIdentityVerified: random() < 0.3,
      minReputation: random() < 0.5 ? 0 : Math.round(random() * 100) / 100,
      ...(random() < 0.3 ? { minVramMiB: 50_000 } : {}),
      ...(random() < 0.2 ? { cpuCores: 16 } : {}),
      ...(random() < 0.2 ? { memoryGiB: 128 } : {}),
      ...(random() < 0.2 ? { diskGiB: 300 } : {}),
      ...(interruptible ? { mode: "interruptible", bidPerGpuHour: "1.20", maxPricePerGpuHour: undefined } : {}),
    }),
  );
  return {
    request,
    now: NOW,
    validUntil: NOW + 60,
    count: request.gpuCount,
    duration: request.duration,
    minVramMiB: request.minVramMiB,
    ...hostNeeds(request),
    attestedOnly: request.attestedOnly,
    gpuIdentityVerified: request.gpuIdentityVerified,
    minReputation: request.minReputation,
    maxAttestFailures: request.maxAttestFailures,
    interruptible,
    priceLimit: Number(interruptible ? request.bidPerUnitSecond : request.maxPricePerUnitSecond),
    exclusions: random() < 0.3 ? new Map([[entry({ machineId: 3 }).key, 5]]) : null,
  };
}

/** Every list of the index: the bucket lists and the per-model cluster lists. */
function lists(index: BookIndex): SlotList[] {
  index.settle();
  const all: SlotList[] = [];
  for (const group of index.models.values()) {
    all.push(group.clustered);
    for (const bucket of [group.all, ...group.buckets.values()]) all.push(bucket.byPrice, bucket.byBid, bucket.byCost);
  }
  return all;
}

describe("matching: the index's lists", () => {
  it("masks a range of offers exactly as failureMask masks each one", () => {
    for (let seed = 1; seed <= 20; seed++) {
      const random = rng(seed);
      const index = new BookIndex(parseMatchingOptions({}));
      for (let id = 1; id <= 60; id++) index.upsert(entry(randomSpec(random, id, 1 + Math.floor(random() * 8))));
      for (let round = 0; round < 10; round++) {
        const ctx = context(random);
        for (const list of lists(index)) {
          const out = new Uint16Array(list.length + 3);
          failureMasks(list, 0, list.length, ctx, out, 3);
          for (let i = 0; i < list.length; i++) assert.equal(out[i + 3], failureMask(list, i, ctx), `seed ${seed}, offer ${list.slots[i]!.key}`);
        }
      }
    }
  });

  it("keeps each clustered machine once in its model's cluster list, in step with its entry, through updates and removals", () => {
    for (let seed = 1; seed <= 20; seed++) {
      const random = rng(seed);
      const index = new BookIndex(parseMatchingOptions({}));
      const seqs = new Map<number, number>();
      for (let step = 0; step < 400; step++) {
        const id = 1 + Math.floor(random() * 40);
        if (random() < 0.15) {
          index.remove(entry({ machineId: id }).key);
          continue;
        }
        const seq = (seqs.get(id) ?? 0) + 1;
        seqs.set(id, seq);
        index.upsert(entry(randomSpec(random, id, seq)));
      }
      const expected = [...index.slots.values()].filter((slot) => slot.clusterKey !== "");
      const seen: Slot[] = [];
      index.settle();
      for (const group of index.models.values()) {
        const list = group.clustered;
        for (let i = 0; i < list.length; i++) {
          const slot = list.slots[i]!;
          seen.push(slot);
          assert.equal(slot.model, group.model, `seed ${seed}`);
          assert.equal(list.clusterIds[i], slot.clusterId, `seed ${seed}`);
          if (i > 0)
            assert.ok(list.clusterIds[i - 1]! < slot.clusterId || (list.clusterIds[i - 1] === slot.clusterId && list.slots[i - 1]!.id < slot.id), `seed ${seed}: out of order`);
          // The columns hold the entry's current numbers.
          assert.equal(list.prices[i], slot.price, `seed ${seed}`);
          assert.equal(list.free[i], slot.entry.capacity.freeUnits, `seed ${seed}`);
          assert.equal(list.available[i], slot.entry.capacity.freeUnits + slot.entry.capacity.interruptibleUnits, `seed ${seed}`);
          assert.equal(list.expiry[i], slot.entry.offer.expiry, `seed ${seed}`);
        }
      }
      assert.deepEqual(new Set(seen), new Set(expected), `seed ${seed}`);
      assert.equal(seen.length, expected.length, `seed ${seed}: a machine listed twice`);
    }
  });

  it("places large batches of inserts (merged) and small ones (spliced) in the same order, with every column in step", () => {
    const sortKey: Record<string, (slot: Slot) => number> = {
      byPrice: (slot) => slot.price,
      byBid: (slot) => slot.minBid,
      byCost: (slot) => slot.staticCost,
    };
    const check = (index: BookIndex, label: string) => {
      index.settle();
      let listed = 0;
      for (const group of index.models.values()) {
        for (const bucket of [group.all, ...group.buckets.values()]) {
          for (const name of ["byPrice", "byBid", "byCost"] as const) {
            const list = bucket[name];
            let maxAvailable = 0;
            for (let i = 0; i < list.length; i++) {
              const slot = list.slots[i]!;
              assert.equal(list.keys[i], sortKey[name]!(slot), `${label}: ${name} key of ${slot.key}`);
              if (i > 0)
                assert.ok(list.keys[i - 1]! < list.keys[i]! || (list.keys[i - 1] === list.keys[i] && list.slots[i - 1]!.id < slot.id), `${label}: ${name} out of order at ${i}`);
              assert.equal(list.prices[i], slot.price, label);
              assert.equal(list.bids[i], slot.minBid, label);
              assert.equal(list.costs[i], slot.staticCost, label);
              assert.equal(list.clusterIds[i], slot.clusterId, label);
              assert.equal(list.available[i], slot.entry.capacity.freeUnits + slot.entry.capacity.interruptibleUnits, label);
              maxAvailable = Math.max(maxAvailable, list.available[i]!);
            }
            assert.equal(list.maxAvailable, maxAvailable, `${label}: ${name} maxAvailable`);
            if (bucket === group.all && name === "byPrice") listed += list.length;
          }
        }
      }
      assert.equal(listed, index.size, `${label}: every offer listed once by price`);
    };
    for (let seed = 1; seed <= 10; seed++) {
      const random = rng(seed);
      const index = new BookIndex(parseMatchingOptions({}));
      const seqs = new Map<number, number>();
      const upsert = (id: number) => {
        const seq = (seqs.get(id) ?? 0) + 1;
        seqs.set(id, seq);
        index.upsert(entry(randomSpec(random, id, seq)));
      };
      // A book loaded at once: hundreds of inserts before the first read (the merge path).
      for (let id = 1; id <= 400; id++) upsert(id);
      check(index, `seed ${seed}, bulk load`);
      // Then batches of every size between reads: new machines, re-priced ones, removals.
      for (let round = 0; round < 12; round++) {
        const batch = Math.floor(random() * 80);
        for (let k = 0; k < batch; k++) {
          const id = 1 + Math.floor(random() * 600);
          if (random() < 0.15) index.remove(entry({ machineId: id }).key);
          else upsert(id);
        }
        check(index, `seed ${seed}, round ${round} (${batch} changes)`);
      }
    }
  });
});
