/**
 * Issue 24, item 2: the throughput an attestation carries is read by matching. An attested rate
 * above what the claimed class can physically reach (a faster card, or a made-up number) or below
 * the band's floor does not count, so the matcher (attested offers only, its default) passes the
 * offer over; a rate inside the band does.
 */
import assert from "node:assert/strict";
import { THROUGHPUT_CEILING_HEADROOM, throughputBand, unitInt8OpsPerSecond } from "../../common/attest/params.js";
import { MatchingEngine, offerEntryFromMessage, parseMatchRequest } from "../../common/matching/index.js";
import { CachedChainView } from "../../common/offers/chain-view.js";
import { encodeOfferMessage } from "../../common/offers/message.js";
import { OfferValidator, engineAttestation, isAttested } from "../../common/offers/validate.js";
import { MemoryChainView } from "../support/memory-chain-view.js";
import { TEST_CHAIN_ID, TEST_MARKET, attest, buildOfferMessage, createProvider, createSigner, machineSpec, nowSec, registerOnChain } from "../support/offer-fixtures.js";

const NO_REPUTATION = { leasesCompleted: 0, faults: 0, unitSecondsDelivered: 0n };

describe("throughput band per class, enforced through matching (issue 24, item 2)", () => {
  it("is the datasheet rate with headroom above, and the given efficiency below; H100 and A100 bands do not overlap at a calibrated floor", () => {
    const a100 = throughputBand("A100-80GB", 8, 0.7)!;
    assert.equal(a100.ceiling, BigInt(Math.ceil(624e12 * 8 * THROUGHPUT_CEILING_HEADROOM)));
    assert.equal(a100.floor, BigInt(Math.floor(624e12 * 8 * 0.7)));
    const h100 = throughputBand("H100-80GB-SXM", 8, 0.7)!;
    assert.ok(h100.floor > a100.ceiling, "an H100 at its calibrated floor is above what any A100 can measure");
    // MIG slices get their fraction of the card.
    assert.equal(throughputBand("A100-80GB/3g.40gb", 1)!.ceiling, BigInt(Math.ceil(unitInt8OpsPerSecond("A100-80GB/3g.40gb") * THROUGHPUT_CEILING_HEADROOM)));
    assert.equal(throughputBand("no-such-gpu", 1), undefined);
  });

  it("an attestation of a rate above the class's ceiling, or below a set floor, leaves the offer unattested and unmatched", async () => {
    const chain = new MemoryChainView();
    const attestor = createSigner();
    chain.addAttestor(attestor.address);
    const spec = machineSpec(7, { model: "A100-80GB", units: 1 });
    const provider = await createProvider();
    registerOnChain(chain, provider, [spec]);
    const strict = new OfferValidator({ chainId: TEST_CHAIN_ID, market: TEST_MARKET, chain: new CachedChainView(chain), minAttestedEfficiency: 0.5 });
    const lenient = new OfferValidator({ chainId: TEST_CHAIN_ID, market: TEST_MARKET, chain: new CachedChainView(chain) });
    const band = throughputBand("A100-80GB", 1, 0.5)!;

    const cases = [
      { name: "in band", throughput: (band.floor + band.ceiling) / 2n, strict: true, lenient: true },
      // An H100's measured rate (well above any A100's) signed as an A100 attestation.
      { name: "H100 rate", throughput: BigInt(1979e12 * 0.7), strict: false, lenient: false },
      { name: "just above the ceiling", throughput: band.ceiling + 1n, strict: false, lenient: false },
      // A rate only a lying attestor signs: below what any honest A100 runner reaches.
      { name: "below the floor", throughput: band.floor - 1n, strict: false, lenient: true },
    ];
    for (const [seq, c] of cases.entries()) {
      const message = await buildOfferMessage(provider, spec, { seq: seq + 1, attestations: [attest(attestor, provider.address, spec, 3_600, c.throughput)] });
      for (const [validator, expected] of [
        [strict, c.strict],
        [lenient, c.lenient],
      ] as const) {
        const result = await validator.validate(encodeOfferMessage(message));
        assert.ok(result.ok, result.ok ? "" : result.detail);
        const now = nowSec();
        assert.equal(isAttested(result.offer.attestation, now), expected, c.name);
        const engine = new MatchingEngine();
        engine.upsert(offerEntryFromMessage(result.offer.message, { attestation: engineAttestation(result.offer.attestation, now), reputation: NO_REPUTATION }));
        const matched = engine.match(parseMatchRequest({ gpuType: "A100", gpuCount: 1, duration: 3600, maxPricePerGpuHour: "100" }));
        assert.equal(matched.ok, expected, `${c.name}: matched ${matched.ok}`);
      }
    }
  });
});
