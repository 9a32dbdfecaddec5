import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CachedChainView } from "../../common/offers/chain-view.js";
import { encodeOfferMessage, offerKey } from "../../common/offers/message.js";
import { OfferValidator, isAttested } from "../../common/offers/validate.js";
import { silentLogger } from "../../node/log/logger.js";
import { createMetrics } from "../../node/metrics/metrics.js";
import { OfferBook } from "../../node/offers/book.js";
import { OfferEviction } from "../../node/offers/eviction.js";
import { Store } from "../../node/store/store.js";
import { MemoryChainView } from "../support/memory-chain-view.js";
import {
  TEST_CHAIN_ID,
  TEST_MARKET,
  attest,
  buildOfferMessage,
  createProvider,
  createSigner,
  machineRecord,
  machineSpec,
  nowSec,
  registerOnChain,
  type ProviderFixture,
} from "../support/offer-fixtures.js";

describe("offer eviction on chain changes", () => {
  let dir: string;
  let store: Store;
  let book: OfferBook;
  let chain: MemoryChainView;
  let cached: CachedChainView;
  let eviction: OfferEviction;
  let validator: OfferValidator;
  let provider: ProviderFixture;
  const attestor = createSigner();
  const m1 = machineSpec(1);
  const m2 = machineSpec(2);

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-evict-"));
    store = await Store.open(dir);
    book = await OfferBook.open(store);
    chain = new MemoryChainView();
    cached = new CachedChainView(chain, { ttlMs: 3_600_000 });
    validator = new OfferValidator({ chainId: TEST_CHAIN_ID, market: TEST_MARKET, chain: cached });
    eviction = new OfferEviction({ book, validator, chain: cached, metrics: createMetrics(), logger: silentLogger(), sweepIntervalMs: 1_000 });
    provider = await createProvider();
    registerOnChain(chain, provider, [m1, m2], 10n ** 9n);
    chain.addAttestor(attestor.address);
    for (const spec of [m1, m2]) {
      const message = await buildOfferMessage(provider, spec, { minDuration: 600, attestations: [attest(attestor, provider.address, spec)] });
      const result = await validator.validate(encodeOfferMessage(message));
      assert.ok(result.ok);
      book.upsert(result.offer);
    }
  });

  afterEach(async () => {
    await book.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("evicts a provider's offers when its free stake drops below what they need", async () => {
    chain.setFreeStake(provider.address, 1_000n);
    assert.equal(book.size, 2, "nothing happens until the event arrives (the cache still says staked)");
    assert.equal(await eviction.onProviderChanged(provider.address), 2);
    assert.equal(book.size, 0);
  });

  it("keeps offers when the provider's change does not affect them", async () => {
    chain.setFreeStake(provider.address, 10n ** 8n);
    assert.equal(await eviction.onProviderChanged(provider.address), 0);
    assert.equal(book.size, 2);
  });

  it("removes the offer of a removed machine, and of a machine declared differently", async () => {
    const removed: string[] = [];
    book.on("removed", (entry, reason) => removed.push(`${entry.machineId}:${reason}`));
    chain.removeMachine(1);
    assert.equal(await eviction.onMachineRemoved(1), 1);
    chain.declareMachine(2, machineRecord(provider.address, { ...m2, region: "sa-east" }));
    assert.equal(await eviction.onMachineChanged(2), 1);
    assert.deepEqual(removed, ["1:machine_removed", "2:machine_changed"]);
  });

  it("downgrades attestation when the attestor loses its role", async () => {
    const key = offerKey(provider.address, 1);
    assert.ok(isAttested(book.get(key)!.attestation, nowSec()));
    chain.removeAttestor(attestor.address);
    await eviction.onAttestorsChanged();
    assert.equal(isAttested(book.get(key)!.attestation, nowSec()), false);
    assert.equal(book.size, 2, "an offer is not evicted for losing its attestation, only marked");
  });

  it("keeps offers when the chain cannot be read (an outage proves nothing)", async () => {
    chain.failWith = new Error("rpc down");
    assert.equal(await eviction.onProviderChanged(provider.address), 0);
    assert.equal(book.size, 2);
  });
});
