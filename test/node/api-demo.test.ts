import assert from "node:assert/strict";
import { recoverTypedDataAddress } from "viem";
import { devnetAccount } from "../../common/devnet.js";
import { suanliDomain, suanliTypes } from "../../common/eip712.js";
import { seedDemoMarket, startDemoActivity } from "../../node/api/demo.js";
import { InMemoryMarketSource } from "../../node/api/memory-source.js";
import type { MarketChange } from "../../node/api/source.js";
import { eventually } from "../support/sse.js";
import { TEST_CHAIN_ID, TEST_MARKET } from "../support/market.js";

describe("devnet demo market", () => {
  const domain = { chainId: TEST_CHAIN_ID, verifyingContract: TEST_MARKET };

  it("seeds signed, attested offers and provider records from devnet wallets", async () => {
    const source = new InMemoryMarketSource({ domain });
    const now = Math.floor(Date.now() / 1000);
    await seedDemoMarket(source, { domain, nowSeconds: now });
    const page = await source.queryOffers({ sort: "price" }, { limit: 50, offset: 0 });
    assert.equal(page.total, 6);
    for (const entry of page.items) {
      const signer = await recoverTypedDataAddress({
        domain: suanliDomain(domain.chainId, domain.verifyingContract),
        types: { Offer: suanliTypes.Offer },
        primaryType: "Offer",
        message: entry.message.offer,
        signature: entry.message.signature,
      });
      assert.equal(signer, entry.message.offer.provider);
    }
    assert.equal((await source.queryOffers({ sort: "price", attested: true }, { limit: 50, offset: 0 })).total, 5);
    const provider = await source.getProvider(devnetAccount(1).address);
    assert.deepEqual(provider?.machines.map((machine) => [machine.machineId, machine.offerKey !== null]), [
      [1, true],
      [2, true],
    ]);
  });

  it("republishes offers with new versions until stopped", async () => {
    const source = new InMemoryMarketSource({ domain });
    await seedDemoMarket(source, { domain, nowSeconds: Math.floor(Date.now() / 1000) });
    const changes: MarketChange[] = [];
    source.subscribe((change) => changes.push(change));
    const stop = startDemoActivity(source, { domain, intervalMs: 20, nowSeconds: () => Math.floor(Date.now() / 1000) });
    try {
      await eventually(() => changes.length >= 3, "three republished offers");
    } finally {
      stop();
    }
    assert.ok(changes.every((change) => change.type === "offer" && change.entry.message.seq > 1));
  });
});
