import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CachedChainView } from "../../common/offers/chain-view.js";
import { encodeOfferMessage, offerKey } from "../../common/offers/message.js";
import { OfferValidator, type ValidatedOffer } from "../../common/offers/validate.js";
import { OfferBook, type BookEntry } from "../../node/offers/book.js";
import { Store } from "../../node/store/store.js";
import { MemoryChainView } from "../support/memory-chain-view.js";
import {
  TEST_CHAIN_ID,
  TEST_MARKET,
  attest,
  buildOfferMessage,
  createProvider,
  createSigner,
  machineSpec,
  nowSec,
  registerOnChain,
  type MachineSpec,
  type OfferDraft,
  type ProviderFixture,
} from "../support/offer-fixtures.js";

describe("offer book", function () {
  this.timeout(20_000);
  let dir: string;
  let store: Store;
  let book: OfferBook;
  let clock = nowSec();
  const chain = new MemoryChainView();
  const validator = new OfferValidator({ chainId: TEST_CHAIN_ID, market: TEST_MARKET, chain: new CachedChainView(chain), now: () => clock });
  const attestor = createSigner();
  chain.addAttestor(attestor.address);
  let alice: ProviderFixture;
  let bob: ProviderFixture;

  const machines: Record<string, MachineSpec> = {
    a1: machineSpec(1, { model: "A100-80GB", units: 8, vramMiB: 81_920, region: "eu-west", interconnect: "nvlink" }),
    a2: machineSpec(2, { model: "H100-80GB-SXM", units: 8, vramMiB: 81_559, region: "us-east", interconnect: "fabric" }),
    b3: machineSpec(3, { model: "RTX4090-24GB", units: 2, vramMiB: 24_564, region: "eu-west", interconnect: "none" }),
    b4: machineSpec(4, { model: "A100-80GB", units: 4, vramMiB: 81_920, region: "EU-West", interconnect: "none" }),
  };

  async function validated(provider: ProviderFixture, spec: MachineSpec, draft: OfferDraft = {}): Promise<ValidatedOffer> {
    const result = await validator.validate(encodeOfferMessage(await buildOfferMessage(provider, spec, draft)));
    assert.ok(result.ok, result.ok ? "" : result.detail);
    return result.offer;
  }

  before(async () => {
    alice = await createProvider();
    bob = await createProvider();
    registerOnChain(chain, alice, [machines.a1!, machines.a2!]);
    registerOnChain(chain, bob, [machines.b3!, machines.b4!]);
  });

  beforeEach(async () => {
    clock = nowSec();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-book-"));
    store = await Store.open(dir);
    book = await OfferBook.open(store, { now: () => clock });
  });

  afterEach(async () => {
    await book.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function fill(): Promise<void> {
    book.upsert(await validated(alice, machines.a1!, { pricePerUnitSecond: 300n, attestations: [attest(attestor, alice.address, machines.a1!)] }));
    book.upsert(await validated(alice, machines.a2!, { pricePerUnitSecond: 900n, freeUnits: 2 }));
    book.upsert(await validated(bob, machines.b3!, { pricePerUnitSecond: 100n }));
    book.upsert(await validated(bob, machines.b4!, { pricePerUnitSecond: 400n, freeUnits: 4 }));
  }

  const keys = (entries: BookEntry[]) => entries.map((e) => e.machineId);

  it("answers queries by model, free units, VRAM, price, region, interconnect and attestation, cheapest first", async () => {
    await fill();
    assert.deepEqual(keys(book.query().offers), [3, 1, 4, 2]);
    assert.deepEqual(keys(book.query({ model: "A100" }).offers), [1, 4], "aliases resolve to the canonical model");
    assert.deepEqual(keys(book.query({ minFreeUnits: 4 }).offers), [1, 4]);
    assert.deepEqual(keys(book.query({ minVramMiB: 80_000 }).offers), [1, 4, 2]);
    assert.deepEqual(keys(book.query({ maxPricePerUnitSecond: "400" }).offers), [3, 1, 4]);
    assert.deepEqual(keys(book.query({ maxPricePerUnitSecond: 399 }).offers), [3, 1]);
    assert.deepEqual(keys(book.query({ region: "eu-west" }).offers), [3, 1, 4], "regions match case-insensitively");
    assert.deepEqual(keys(book.query({ interconnect: "fabric" }).offers), [2]);
    assert.deepEqual(keys(book.query({ attested: true }).offers), [1]);
    assert.deepEqual(keys(book.query({ attested: "false" }).offers), [3, 4, 2]);
    assert.deepEqual(keys(book.query({ provider: bob.address.toLowerCase() as `0x${string}` }).offers), [3, 4]);
    assert.deepEqual(keys(book.query({ model: "A100-80GB", region: "eu-west", minFreeUnits: 8, attested: true }).offers), [1]);
  });

  it("pages with a cursor until the last page, and names bad parameters", async () => {
    await fill();
    const seen: number[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 10; page++) {
      const result = book.query({}, { limit: 3, cursor });
      seen.push(...keys(result.offers));
      cursor = result.nextCursor;
      if (!cursor) break;
    }
    assert.deepEqual(seen, [3, 1, 4, 2]);
    assert.throws(
      () => book.query({}, { cursor: "garbage" }),
      (error: unknown) => (error as { fields: string[] }).fields[0] === "cursor",
    );
    assert.throws(
      () => book.query({ model: "Z9000" }),
      (error: unknown) => (error as { fields: string[] }).fields[0] === "model",
    );
    assert.throws(() => book.query({ minFreeUnits: -1 }), { name: "InvalidInputError" });
    assert.throws(() => book.query({}, { limit: 0 }), { name: "InvalidInputError" });
  });

  it("breaks price ties by key, so pages never skip or repeat an offer", async () => {
    book.upsert(await validated(alice, machines.a1!, { pricePerUnitSecond: 500n }));
    book.upsert(await validated(bob, machines.b3!, { pricePerUnitSecond: 500n }));
    book.upsert(await validated(alice, machines.a2!, { pricePerUnitSecond: 500n }));
    const all = book.query().offers.map((e) => e.key);
    assert.deepEqual(all, [...all].sort());
    const first = book.query({}, { limit: 2 });
    const second = book.query({}, { limit: 2, cursor: first.nextCursor });
    assert.deepEqual(
      [...first.offers, ...second.offers].map((e) => e.key),
      all,
    );
    assert.equal(second.nextCursor, undefined);
  });

  it("replaces an offer only with a newer sequence number and tells subscribers", async () => {
    const events: string[] = [];
    book.on("offer", (entry, previous) => events.push(`${entry.seq}<-${previous?.seq ?? "none"}`));
    assert.equal(book.upsert(await validated(alice, machines.a1!, { seq: 2 })), "added");
    assert.equal(book.upsert(await validated(alice, machines.a1!, { seq: 1 })), "stale");
    assert.equal(book.upsert(await validated(alice, machines.a1!, { seq: 3, pricePerUnitSecond: 5n })), "updated");
    assert.deepEqual(events, ["2<-none", "3<-2"]);
    assert.equal(book.size, 1);
    assert.equal(book.get(offerKey(alice.address, 1))?.pricePerUnitSecond, 5n);
  });

  it("sweeps expired offers and reports them as removed", async () => {
    const removed: string[] = [];
    book.on("removed", (entry, reason) => removed.push(`${entry.machineId}:${reason}`));
    book.upsert(await validated(alice, machines.a1!, { expiry: clock + 10 }));
    book.upsert(await validated(bob, machines.b3!, { expiry: clock + 100 }));
    book.upsert(await validated(alice, machines.a1!, { seq: 2, expiry: clock + 50 }));
    assert.deepEqual(book.sweepExpired(clock + 20), [], "the replaced copy's expiry does not remove the new one");
    assert.equal(book.nextExpiry(), 50 + clock);
    assert.deepEqual(keys(book.sweepExpired(clock + 60)), [1]);
    assert.deepEqual(removed, ["1:expired"]);
    assert.equal(book.query({}).offers.length, 1);
  });

  it("survives a restart: offers reload from level, expired ones are dropped", async () => {
    await fill();
    book.upsert(await validated(alice, machines.a2!, { seq: 2, expiry: clock + 30, pricePerUnitSecond: 800n }));
    await book.close();
    await store.close();

    store = await Store.open(dir);
    clock += 40;
    book = await OfferBook.open(store, { now: () => clock });
    assert.deepEqual(keys(book.query().offers), [3, 1, 4]);
    assert.equal(book.get(offerKey(alice.address, 1))?.attestation.attestors[0], attestor.address);
    assert.deepEqual(keys(book.query({ attested: true }).offers), [1], "attestation state survives too");
  });

  it("pages in key order for offers-sync", async () => {
    await fill();
    const all = await book.pageByKey(undefined, 10);
    assert.deepEqual(
      all.map((e) => e.key),
      [...all.map((e) => e.key)].sort(),
    );
    const firstTwo = await book.pageByKey(undefined, 2);
    const rest = await book.pageByKey(firstTwo[1]!.key, 10);
    assert.deepEqual(
      [...firstTwo, ...rest].map((e) => e.key),
      all.map((e) => e.key),
    );
  });

  it("holds at most maxOffers machines", async () => {
    const small = await OfferBook.open(store, { maxOffers: 2, now: () => clock });
    assert.equal(small.upsert(await validated(alice, machines.a1!)), "added");
    assert.equal(small.upsert(await validated(alice, machines.a2!)), "added");
    assert.equal(small.upsert(await validated(bob, machines.b3!)), "full");
    assert.equal(small.upsert(await validated(alice, machines.a1!, { seq: 2 })), "updated", "updates still land when full");
    await small.close();
  });
});
