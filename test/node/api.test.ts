import assert from "node:assert/strict";
import { recoverTypedDataAddress, type Hex } from "viem";
import { leasePageSchema, leaseViewSchema, machinePageSchema, machineViewSchema, providerPageSchema, providerViewSchema } from "../../common/api/chain.js";
import { healthSchema, marketStatsSchema, matchResultSchema, nodeInfoSchema, reservationAnswerSchema } from "../../common/api/market.js";
import { offerPageSchema, offerViewSchema } from "../../common/api/offers.js";
import { ccIdentitiesHash } from "../../common/attest/cc.js";
import { suanliDomain, suanliTypes, type ReserveRequest } from "../../common/eip712.js";
import { startApiFixture, T0, testDeployment, type ApiFixture } from "../support/api-fixture.js";
import { accounts, signedOfferEntry, TEST_CHAIN_ID, TEST_MARKET } from "../support/market.js";
import { InMemoryMarketSource } from "../support/memory-source.js";

type ErrorBody = { error: { name: string; message: string; fields?: { path: string; message: string }[] } };

function errorOf(body: string): ErrorBody["error"] {
  const parsed = JSON.parse(body) as ErrorBody;
  assert.ok(parsed.error, `expected an error body, got ${body}`);
  return parsed.error;
}

describe("HTTP API routes", () => {
  let fx: ApiFixture;
  const get = (url: string, headers: Record<string, string> = {}) => fx.api.app.inject({ method: "GET", url, headers });
  const post = (url: string, payload: unknown, headers: Record<string, string> = {}) => fx.api.app.inject({ method: "POST", url, payload: payload as string, headers });

  before(async () => {
    fx = await startApiFixture();
  });
  after(async () => {
    await fx.close();
  });

  describe("GET /v1/info and /v1/health", () => {
    it("describes the chain, token, contracts and GPU models", async () => {
      const response = await get("/v1/info");
      assert.equal(response.statusCode, 200);
      const info = nodeInfoSchema.decode(response.json());
      assert.equal(info.chainId, TEST_CHAIN_ID);
      assert.deepEqual(info.token, { symbol: "tUSD", decimals: 6 });
      assert.equal(info.contracts.market, TEST_MARKET);
      assert.equal(info.contracts.registry, null);
      assert.equal(info.contracts.sessions, null); // the fixture's manifest predates SessionKeys
      assert.equal(info.reservations, true);
      assert.ok(info.gpuModels.some((model) => model.name === "A100-80GB" && model.vramMiB === 81_920));
    });

    it("reports ok with the source's checks", async () => {
      const response = await get("/v1/health");
      assert.equal(response.statusCode, 200);
      const health = healthSchema.decode(response.json());
      assert.equal(health.status, "ok");
      assert.deepEqual(
        health.checks.map((check) => check.name),
        ["offers"],
      );
      assert.match(health.checks[0]!.detail ?? "", /3 live offers/);
    });

    it("answers 503 with status down when the chain is unreachable", async () => {
      const { createPublicClient, http } = await import("viem");
      // Port 9 (discard) on loopback: nothing listens there, the connection is refused at once.
      const source = new InMemoryMarketSource({ publicClient: createPublicClient({ transport: http("http://127.0.0.1:9", { retryCount: 0, timeout: 2000 }) }) });
      const down = await startApiFixture({}, { source });
      try {
        const response = await down.api.app.inject({ method: "GET", url: "/v1/health" });
        assert.equal(response.statusCode, 503);
        const health = healthSchema.decode(response.json());
        assert.equal(health.status, "down");
        assert.equal(health.checks.find((check) => check.name === "chain")?.status, "down");
      } finally {
        await down.close();
      }
    });
  });

  it("answers 503 when the health checks hang past api.healthTimeoutMs", async () => {
    class HangingSource extends InMemoryMarketSource {
      override health() {
        return new Promise<never>(() => {});
      }
    }
    const hanging = await startApiFixture({ healthTimeoutMs: 100 }, { source: new HangingSource() });
    try {
      const response = await hanging.api.app.inject({ method: "GET", url: "/v1/health" });
      assert.equal(response.statusCode, 503);
      const health = healthSchema.decode(response.json());
      assert.deepEqual(
        health.checks.map((check) => [check.name, check.status]),
        [["source", "down"]],
      );
      assert.match(health.checks[0]!.detail ?? "", /within 100 ms/);
    } finally {
      await hanging.close();
    }
  });

  describe("GET /v1/offers", () => {
    it("lists live offers cheapest first, amounts as decimal strings, with a usable signed offer", async () => {
      const response = await get("/v1/offers");
      assert.equal(response.statusCode, 200);
      const raw = response.json() as { items: { pricePerUnitSecond: unknown }[] };
      assert.equal(raw.items[0]!.pricePerUnitSecond, "1000");
      const page = offerPageSchema.decode(response.json());
      assert.deepEqual(
        page.items.map((offer) => offer.key),
        [fx.keys.a100, fx.keys.a100b, fx.keys.h100],
      );
      assert.equal(page.total, 3);
      assert.equal(page.nextOffset, null);
      const first = page.items[0]!;
      assert.equal(first.pricePerUnitHour, 3_600_000n);
      assert.equal(first.capacity.freeUnits, 6);
      assert.equal(first.attested, true);
      assert.equal(first.attestations[0]!.attestor, accounts.attestor.address);
      // The signed offer is exactly what the provider signed: a front end can open a lease with it.
      const signer = await recoverTypedDataAddress({
        domain: suanliDomain(TEST_CHAIN_ID, TEST_MARKET),
        types: { Offer: suanliTypes.Offer },
        primaryType: "Offer",
        message: first.signed.offer,
        signature: first.signed.signature,
      });
      assert.equal(signer, accounts.providerA.address);
    });

    it("filters by model alias, free GPUs, VRAM, price, region, attestation, provider and interruptible", async () => {
      const keys = async (query: string) => offerPageSchema.decode((await get(`/v1/offers?${query}`)).json()).items.map((offer) => offer.key);
      assert.deepEqual(await keys("model=A100"), [fx.keys.a100, fx.keys.a100b]);
      assert.deepEqual(await keys("model=h100%20sxm"), [fx.keys.h100]);
      assert.deepEqual(await keys("minFreeUnits=7"), [fx.keys.h100]);
      assert.deepEqual(await keys("minVramMiB=81700"), [fx.keys.a100, fx.keys.a100b]);
      assert.deepEqual(await keys("maxPricePerUnitSecond=1500"), [fx.keys.a100, fx.keys.a100b]);
      assert.deepEqual(await keys("region=us-east"), [fx.keys.a100b, fx.keys.h100]);
      assert.deepEqual(await keys("attested=true"), [fx.keys.a100, fx.keys.a100b]);
      assert.deepEqual(await keys("attested=false"), [fx.keys.h100]);
      assert.deepEqual(await keys(`provider=${accounts.providerB.address.toLowerCase()}`), [fx.keys.a100b]);
      assert.deepEqual(await keys("interruptible=true"), [fx.keys.a100b]);
      assert.deepEqual(await keys("model=A100&region=eu-west&attested=true&minFreeUnits=6"), [fx.keys.a100]);
      assert.deepEqual(await keys("sort=-price"), [fx.keys.h100, fx.keys.a100b, fx.keys.a100]);
      assert.deepEqual(await keys("sort=freeUnits"), [fx.keys.a100b, fx.keys.a100, fx.keys.h100]);
    });

    it("says which machines' GPUs an attestor verified by confidential-computing evidence, and filters on it", async () => {
      const source = new InMemoryMarketSource({ now: () => T0 * 1000 });
      const cc = ccIdentitiesHash([{ chip: "GH100", deviceId: "48B02D92494BADF4" }]);
      source.putOffer(
        await signedOfferEntry({
          provider: accounts.providerB,
          machineId: 9,
          model: "H100-80GB-SXM",
          units: 1,
          pricePerUnitSecond: 2000n,
          at: T0 - 60,
          attestor: accounts.attestor,
          cc,
        }),
      );
      const withCc = await startApiFixture({}, { source });
      try {
        const page = async (query: string) => offerPageSchema.decode((await withCc.api.app.inject({ method: "GET", url: `/v1/offers?${query}` })).json()).items;
        const verified = await page("gpuIdentityVerified=true");
        assert.deepEqual(
          verified.map((offer) => [offer.machineId, offer.gpuIdentityVerified, offer.attestations.map((a) => [a.gpuIdentityVerified, a.cc])]),
          [[9, true, [[true, cc]]]],
        );
        // Attested without CC evidence (the A100s), or not attested at all (the H100 of provider A): not CC-verified.
        const others = await page("gpuIdentityVerified=false");
        assert.deepEqual(others.map((offer) => offer.key).sort(), [fx.keys.a100, fx.keys.a100b, fx.keys.h100].sort());
        assert.ok(others.every((offer) => !offer.gpuIdentityVerified && offer.attestations.every((a) => !a.gpuIdentityVerified && a.cc === `0x${"00".repeat(32)}`)));
        const bad = await withCc.api.app.inject({ method: "GET", url: "/v1/offers?gpuIdentityVerified=yes" });
        assert.equal(bad.statusCode, 400);
        assert.match(bad.body, /gpuIdentityVerified/);
        // The old name said more than it checks: it is refused, not silently ignored.
        const renamed = await withCc.api.app.inject({ method: "GET", url: "/v1/offers?confidentialComputing=true" });
        assert.equal(renamed.statusCode, 400);
        assert.match(renamed.body, /confidentialComputing/);
      } finally {
        await withCc.close();
      }
    });

    it("pages with limit and offset", async () => {
      const page = offerPageSchema.decode((await get("/v1/offers?limit=2&offset=1")).json());
      assert.deepEqual(
        page.items.map((offer) => offer.key),
        [fx.keys.a100b, fx.keys.h100],
      );
      assert.equal(page.total, 3);
      assert.equal(page.nextOffset, null);
      const first = offerPageSchema.decode((await get("/v1/offers?limit=1")).json());
      assert.equal(first.nextOffset, 1);
    });

    it("answers 400 naming each bad query parameter", async () => {
      const cases: [string, string, RegExp][] = [
        ["minVramMiB=abc", "minVramMiB", /expected a positive integer/],
        ["minVramMiB=0", "minVramMiB", /expected a positive integer/],
        ["minFreeUnits=-2", "minFreeUnits", /expected a positive integer/],
        ["model=Z9000", "model", /unknown GPU model "Z9000" \(known: .*A100-80GB/],
        ["maxPricePerUnitSecond=1.5", "maxPricePerUnitSecond", /decimal integer/],
        ["attested=maybe", "attested", /expected true or false/],
        ["limit=0", "limit", /from 1 to 200/],
        ["limit=500", "limit", /from 1 to 200/],
        ["sort=cheapest", "sort", /expected one of price/],
        ["provider=0x1234", "provider", /20-byte hex address/],
        ["region=eu%20west", "region", /region label/],
        ["colour=blue", "colour", /unknown key \(accepted keys here: model, minFreeUnits/],
        ["limit=1&limit=2", "limit", /expected string/],
      ];
      for (const [query, field, message] of cases) {
        const response = await get(`/v1/offers?${query}`);
        assert.equal(response.statusCode, 400, query);
        const error = errorOf(response.body);
        assert.equal(error.name, "InvalidInputError");
        assert.equal(error.fields?.[0]?.path, field, query);
        assert.match(error.fields?.[0].message ?? "", message, query);
        assert.match(error.message, new RegExp(`${field}: `), query);
      }
    });

    it("drops offers once they expire", async () => {
      const saved = fx.clock.seconds;
      try {
        fx.clock.seconds = T0 + 3600 - 300; // the H100 offer (published T0-300, 1 h) has just expired
        const page = offerPageSchema.decode((await get("/v1/offers")).json());
        assert.ok(!page.items.some((offer) => offer.key === fx.keys.h100));
        assert.equal(page.total, 1);
      } finally {
        fx.clock.seconds = saved;
      }
    });
  });

  describe("GET /v1/offers/:key", () => {
    it("returns one offer by key, whatever the address case", async () => {
      const key = `${accounts.providerB.address}:3`;
      const response = await get(`/v1/offers/${key}`);
      assert.equal(response.statusCode, 200);
      const offer = offerViewSchema.decode(response.json());
      assert.equal(offer.key, fx.keys.a100b);
      assert.equal(offer.capacity.interruptibleUnits, 2);
      assert.equal(offer.minBidPerUnitSecond, 500n);
    });

    it("answers 404 for an unknown key and 400 for a malformed one", async () => {
      const missing = await get(`/v1/offers/${accounts.stranger.address}:9`);
      assert.equal(missing.statusCode, 404);
      assert.equal(errorOf(missing.body).name, "OfferNotFoundError");
      const malformed = await get("/v1/offers/not-a-key");
      assert.equal(malformed.statusCode, 400);
      assert.equal(errorOf(malformed.body).fields?.[0]?.path, "key");
    });
  });

  describe("providers and machines", () => {
    it("lists providers by stake and returns one with machines, live offers and reputation", async () => {
      const page = providerPageSchema.decode((await get("/v1/providers")).json());
      assert.deepEqual(
        page.items.map((provider) => provider.address),
        [accounts.providerA.address, accounts.providerB.address],
      );
      const byReputation = providerPageSchema.decode((await get("/v1/providers?sort=reputation")).json());
      assert.equal(byReputation.items[0]!.address, accounts.providerB.address);

      const response = await get(`/v1/providers/${accounts.providerA.address.toLowerCase()}`);
      assert.equal(response.statusCode, 200);
      const provider = providerViewSchema.decode(response.json());
      assert.equal(provider.stake, 10_000_000_000n);
      assert.equal(provider.freeStake, 9_000_000_000n);
      assert.deepEqual(provider.reputation, { leasesCompleted: 12, faults: 1, unitSecondsDelivered: 3_600_000n, uptimePercent: 92.3 });
      assert.deepEqual(
        provider.machines.map((machine) => [machine.machineId, machine.offerKey]),
        [
          [1, fx.keys.a100],
          [2, fx.keys.h100],
        ],
      );
    });

    it("answers 404 for an address that never registered and 400 for a bad address or sort", async () => {
      const missing = await get(`/v1/providers/${accounts.stranger.address}`);
      assert.equal(missing.statusCode, 404);
      assert.equal(errorOf(missing.body).name, "ProviderNotFoundError");
      const bad = await get("/v1/providers/0xnothex");
      assert.equal(bad.statusCode, 400);
      assert.equal(errorOf(bad.body).fields?.[0]?.path, "address");
      const badSort = await get("/v1/providers?sort=age");
      assert.equal(badSort.statusCode, 400);
      assert.equal(errorOf(badSort.body).fields?.[0]?.path, "sort");
    });

    it("lists machines with filters and returns one by id", async () => {
      const all = machinePageSchema.decode((await get("/v1/machines")).json());
      assert.deepEqual(
        all.items.map((machine) => machine.machineId),
        [1, 2, 3],
      );
      const a100 = machinePageSchema.decode((await get("/v1/machines?model=A100&minUnits=8")).json());
      assert.deepEqual(
        a100.items.map((machine) => machine.machineId),
        [1],
      );
      const ofB = machinePageSchema.decode((await get(`/v1/machines?provider=${accounts.providerB.address}`)).json());
      assert.deepEqual(
        ofB.items.map((machine) => machine.machineId),
        [3],
      );

      const one = await get("/v1/machines/2");
      assert.equal(one.statusCode, 200);
      const machine = machineViewSchema.decode(one.json());
      assert.equal(machine.model, "H100-80GB-SXM");
      assert.equal(machine.idleUnits, 6);
    });

    it("answers 404 for an unknown machine and 400 for a bad id", async () => {
      const missing = await get("/v1/machines/99");
      assert.equal(missing.statusCode, 404);
      assert.equal(errorOf(missing.body).name, "MachineNotFoundError");
      for (const id of ["0", "abc", "99999999999"]) {
        const bad = await get(`/v1/machines/${id}`);
        assert.equal(bad.statusCode, 400, id);
        assert.equal(errorOf(bad.body).fields?.[0]?.path, "machineId");
      }
    });
  });

  describe("leases", () => {
    it("returns a lease by id", async () => {
      const response = await get("/v1/leases/2");
      assert.equal(response.statusCode, 200);
      assert.equal((response.json() as { deposit: unknown }).deposit, "7200000");
      const lease = leaseViewSchema.decode(response.json());
      assert.equal(lease.status, "Ended");
      assert.equal(lease.provider, accounts.providerB.address);
      assert.equal(lease.stopAt, 1_700_001_000);
    });

    it("answers 404 for an unknown lease and 400 for a bad id", async () => {
      const missing = await get("/v1/leases/77");
      assert.equal(missing.statusCode, 404);
      assert.equal(errorOf(missing.body).name, "LeaseNotFoundError");
      const bad = await get("/v1/leases/-1");
      assert.equal(bad.statusCode, 400);
      assert.equal(errorOf(bad.body).fields?.[0]?.path, "id");
    });

    it("lists leases by renter, by provider and by status, newest first", async () => {
      const ids = async (query: string) => leasePageSchema.decode((await get(`/v1/leases?${query}`)).json()).items.map((lease) => lease.id);
      assert.deepEqual(await ids(`address=${accounts.renter.address}&role=renter`), [2n, 1n]);
      assert.deepEqual(await ids(`address=${accounts.renter.address}&role=provider`), []);
      assert.deepEqual(await ids(`address=${accounts.providerA.address}&role=provider`), [3n, 1n]);
      assert.deepEqual(await ids(`address=${accounts.providerA.address}&status=Open`), [3n]);
      assert.deepEqual(await ids(`address=${accounts.renter.address}&limit=1&offset=1`), [1n]);
    });

    it("answers 400 when the address is missing or the role or status is unknown", async () => {
      const missing = await get("/v1/leases");
      assert.equal(missing.statusCode, 400);
      assert.equal(errorOf(missing.body).fields?.[0]?.path, "address");
      const role = await get(`/v1/leases?address=${accounts.renter.address}&role=owner`);
      assert.equal(errorOf(role.body).fields?.[0]?.path, "role");
      const status = await get(`/v1/leases?address=${accounts.renter.address}&status=Running`);
      assert.equal(status.statusCode, 400);
      assert.match(errorOf(status.body).fields?.[0]?.message ?? "", /Open, Active, Ended, Settled, Cancelled/);
    });
  });

  describe("GET /v1/stats", () => {
    it("gives price percentiles and utilization per model, now and per bucket", async () => {
      const response = await get(`/v1/stats?from=${T0 - 3600}&to=${T0}&bucketSeconds=600`);
      assert.equal(response.statusCode, 200);
      const stats = marketStatsSchema.decode(response.json());
      assert.deepEqual(
        stats.models.map((model) => model.model),
        ["A100-80GB", "H100-80GB-SXM"],
      );
      const a100 = stats.models[0]!;
      assert.equal(a100.current.offers, 2);
      assert.equal(a100.current.units, 12);
      assert.equal(a100.current.usedUnits, 4); // 2 on-demand on machine 1, 2 interruptible on machine 3
      assert.equal(a100.current.utilization, 4 / 12);
      assert.deepEqual(a100.current.price, { min: 1000n, p10: 1000n, p50: 1000n, p90: 1500n, max: 1500n });
      assert.equal(a100.series.length, 6);
      // Machine 1 was published at T0-600: the last bucket [T0-600, T0) holds both A100 offers.
      const last = a100.series[5]!;
      assert.equal(last.start, T0 - 600);
      assert.equal(last.offers, 2);
      assert.equal(a100.series[4]!.offers, 0);
      assert.equal(a100.series[4]!.price, null);
    });

    it("answers 400 for a bad window", async () => {
      const cases: [string, string][] = [
        ["bucketSeconds=5", "bucketSeconds"],
        [`from=${T0}&to=${T0 - 10}`, "from"],
        [`from=0&to=${T0}&bucketSeconds=60`, "bucketSeconds"],
        ["model=TPU", "model"],
      ];
      for (const [query, field] of cases) {
        const response = await get(`/v1/stats?${query}`);
        assert.equal(response.statusCode, 400, query);
        assert.equal(errorOf(response.body).fields?.[0]?.path, field, query);
      }
    });
  });

  describe("POST /v1/match", () => {
    it("ranks candidates for a task that fits, with the request format of the SDK", async () => {
      // 1000 base units per second = 3.60 USD per GPU-hour (6 decimals); machine 3 asks 5.40.
      const response = await post("/v1/match", { gpuType: "A100", gpuCount: 2, duration: 3600, maxPricePerGpuHour: "6" });
      assert.equal(response.statusCode, 200);
      const result = matchResultSchema.decode(response.json());
      assert.equal(result.matched, true);
      assert.equal(result.explanation, null);
      assert.deepEqual(
        result.candidates.map((candidate) => candidate.allocations[0]!.offerKey),
        [fx.keys.a100, fx.keys.a100b],
      );
      const [best] = result.candidates;
      assert.equal(best!.rank, 1);
      assert.equal(best!.provider, accounts.providerA.address);
      assert.equal(best!.units, 2);
      assert.equal(best!.pricePerGpuHour, 3_600_000n);
      // Beside the base units, the price in the question's own unit (issue #22 item 6).
      assert.equal(best!.pricePerGpuHourUsd, "3.60");
      assert.equal(best!.totalCost, 1000n * 2n * 3600n);
      assert.equal(best!.allocations[0]!.pricePerUnitSecond, 1000n);
      assert.equal(best!.allocations[0]!.model, "A100-80GB");
      assert.deepEqual(best!.reputation, { leasesCompleted: 12, faults: 1, unitSecondsDelivered: 3_600_000n, uptimePercent: 92.3 });
      assert.ok(best!.cost < result.candidates[1]!.cost);

      const one = matchResultSchema.decode((await post("/v1/match?limit=1", { gpuType: "A100", gpuCount: 2, duration: 3600, maxPricePerGpuHour: "6" })).json());
      assert.deepEqual(
        one.candidates.map((candidate) => candidate.allocations[0]!.offerKey),
        [fx.keys.a100],
      );
    });

    it("explains which constraint removed how many offers when nothing matches", async () => {
      const response = await post("/v1/match", { gpuType: "A100-80GB", gpuCount: 2, duration: 3600, maxPricePerGpuHour: "3.00" });
      const result = matchResultSchema.decode(response.json());
      assert.equal(result.matched, false);
      assert.deepEqual(result.candidates, []);
      const explanation = result.explanation!;
      assert.equal(explanation.totalOffers, 3);
      assert.deepEqual(
        explanation.steps.filter((step) => step.removed > 0).map((step) => [step.constraint, step.removed]),
        [
          ["gpuType", 1],
          ["price", 2],
        ],
      );
      assert.match(explanation.message, /3\.60 USD\/GPU-h/);

      const big = matchResultSchema.decode((await post("/v1/match", { gpuType: "A100", gpuCount: 9, duration: 3600, maxPricePerGpuHour: "6" })).json());
      assert.equal(big.matched, false);
      assert.deepEqual(
        big.explanation!.steps.filter((step) => step.removed > 0).map((step) => step.constraint),
        ["gpuType", "capacity"],
      );
    });

    it("answers 400 naming the bad body fields", async () => {
      const response = await post("/v1/match", { gpuType: "A100", gpuCount: 0, maxPricePerGpuHour: "2" });
      assert.equal(response.statusCode, 400);
      const error = errorOf(response.body);
      assert.equal(error.name, "InvalidInputError");
      assert.deepEqual(error.fields?.map((field) => field.path).sort(), ["duration", "gpuCount"]);
      const unknown = await post("/v1/match", { gpuType: "TPU-v5", gpuCount: 1, duration: 60, maxPricePerGpuHour: "2" });
      assert.equal(errorOf(unknown.body).fields?.[0]?.path, "gpuType");
      assert.match(errorOf(unknown.body).fields?.[0]?.message ?? "", /A100-80GB/);
      const noBid = await post("/v1/match", { gpuType: "A100", gpuCount: 1, duration: 60, mode: "interruptible" });
      assert.equal(noBid.statusCode, 400);
      assert.deepEqual(
        errorOf(noBid.body).fields?.map((field) => field.path),
        ["bidPerGpuHour"],
      );
      const badLimit = await post("/v1/match?limit=0", { gpuType: "A100", gpuCount: 1, duration: 60, maxPricePerGpuHour: "2" });
      assert.equal(errorOf(badLimit.body).fields?.[0]?.path, "limit");
    });

    it("answers 400 for invalid JSON, 415 for another media type and 413 for an oversized body", async () => {
      const invalid = await post("/v1/match", "{not json", { "content-type": "application/json" });
      assert.equal(invalid.statusCode, 400);
      assert.equal(errorOf(invalid.body).name, "InvalidInputError");
      const text = await post("/v1/match", "gpuType=A100", { "content-type": "text/plain" });
      assert.equal(text.statusCode, 415);
      assert.equal(errorOf(text.body).name, "UnsupportedMediaTypeError");
      const huge = await post("/v1/match", JSON.stringify({ gpuType: "A100", padding: "x".repeat(70 * 1024) }), { "content-type": "application/json" });
      assert.equal(huge.statusCode, 413);
      assert.equal(errorOf(huge.body).name, "PayloadTooLargeError");
    });
  });

  describe("POST /v1/reservations (signed)", () => {
    const domain = suanliDomain(TEST_CHAIN_ID, TEST_MARKET);
    let nonceCounter = 0;
    function request(overrides: Partial<ReserveRequest> = {}): ReserveRequest {
      nonceCounter += 1;
      return {
        renter: accounts.renter.address,
        provider: accounts.providerA.address,
        machineId: 1,
        units: 2,
        duration: 3600,
        interruptible: false,
        bidPerUnitSecond: 0n,
        issuedAt: T0,
        nonce: `0x${nonceCounter.toString(16).padStart(64, "0")}`,
        ...overrides,
      };
    }
    const sign = (message: ReserveRequest, account = accounts.renter) =>
      account.signTypedData({ domain, types: { ReserveRequest: suanliTypes.ReserveRequest }, primaryType: "ReserveRequest", message });
    const wire = (message: ReserveRequest, signature: Hex) => ({
      request: { ...message, bidPerUnitSecond: message.bidPerUnitSecond.toString() },
      signature,
    });
    const relayed = () => fx.relay.reserved.length;

    it("hands a request signed by the renter to the relay and returns the provider's answer", async () => {
      const before = relayed();
      const message = request();
      const signature = await sign(message);
      const response = await post("/v1/reservations", wire(message, signature));
      assert.equal(response.statusCode, 200);
      const answer = reservationAnswerSchema.decode(response.json());
      assert.deepEqual(answer, { accepted: false, reason: "busy", message: "recorded by the test relay", availableUnits: 2 });
      assert.equal(relayed(), before + 1);
      assert.deepEqual(fx.relay.reserved.at(-1), { request: message, signature });
    });

    it("answers 401 for a signature by another wallet, without burning the nonce or reaching the provider", async () => {
      const before = relayed();
      const message = request();
      const forged = await post("/v1/reservations", wire(message, await sign(message, accounts.stranger)));
      assert.equal(forged.statusCode, 401);
      const error = errorOf(forged.body);
      assert.equal(error.name, "InvalidSignatureError");
      assert.match(error.message, new RegExp(accounts.stranger.address));
      assert.equal(relayed(), before);
      // The real renter can still use that nonce.
      const genuine = await post("/v1/reservations", wire(message, await sign(message)));
      assert.equal(genuine.statusCode, 200);
      assert.equal(relayed(), before + 1);
    });

    it("answers 409 for a replayed request and 401 for a stale one", async () => {
      const message = request();
      const body = wire(message, await sign(message));
      assert.equal((await post("/v1/reservations", body)).statusCode, 200);
      const before = relayed();
      const replay = await post("/v1/reservations", body);
      assert.equal(replay.statusCode, 409);
      assert.equal(errorOf(replay.body).name, "ReplayedRequestError");

      const old = request({ issuedAt: T0 - 3600 });
      const stale = await post("/v1/reservations", wire(old, await sign(old)));
      assert.equal(stale.statusCode, 401);
      assert.equal(errorOf(stale.body).name, "StaleSignatureError");
      assert.equal(relayed(), before);
    });

    it("answers 400 for a malformed signature or request", async () => {
      const message = request();
      const bad = await post("/v1/reservations", { ...wire(message, "0x1234"), extra: 1 });
      assert.equal(bad.statusCode, 400);
      assert.deepEqual(
        errorOf(bad.body)
          .fields?.map((field) => field.path)
          .sort(),
        ["extra", "signature"],
      );
      const badRenter = await post("/v1/reservations", wire({ ...message, renter: "0xabc" as Hex }, "0x".padEnd(132, "1") as Hex));
      assert.equal(errorOf(badRenter.body).fields?.[0]?.path, "request.renter");
    });

    it("answers 503 when the deployment has no LeaseMarket", async () => {
      const noMarket = await startApiFixture({}, { deployment: testDeployment(false) });
      try {
        const message = request();
        const response = await noMarket.api.app.inject({ method: "POST", url: "/v1/reservations", payload: wire(message, await sign(message)) });
        assert.equal(response.statusCode, 503);
        assert.equal(errorOf(response.body).name, "ServiceUnavailableError");
        assert.equal(nodeInfoSchema.decode((await noMarket.api.app.inject({ method: "GET", url: "/v1/info" })).json()).reservations, false);
      } finally {
        await noMarket.close();
      }
    });
  });

  describe("POST /v1/leases/:id/{task,status,logs,cancel} (relayed)", () => {
    const auth = (action: string, leaseId = "7") => ({
      request: {
        leaseId,
        provider: accounts.providerA.address,
        action,
        bodyHash: `0x${"ab".repeat(32)}`,
        issuedAt: T0,
        nonce: `0x${"cd".repeat(32)}`,
      },
      signature: `0x${"11".repeat(65)}`,
    });

    it("hands each body, exactly as sent, to the relay for the lease of the route", async () => {
      const spec = { bundle: { url: "https://example.com/b.tar.gz", sha256: `0x${"AB".repeat(32)}` }, command: ["python", "train.py"] };
      const bodies = {
        task: { auth: auth("task"), spec },
        status: { auth: auth("status") },
        logs: { auth: auth("logs"), fromSeq: 10, waitMs: 500 },
        cancel: { auth: auth("cancel") },
      };
      for (const [action, body] of Object.entries(bodies)) {
        const response = await post(`/v1/leases/7/${action}`, body);
        assert.equal(response.statusCode, 200, `${action}: ${response.body}`);
        assert.deepEqual(fx.relay.forwarded.at(-1), { action, leaseId: 7n, raw: body });
      }
      // The relay's answer is encoded by the route's schema: lease ids as decimal strings.
      const answer = (await post("/v1/leases/7/cancel", bodies.cancel)).json() as { leaseId: unknown; state: string };
      assert.deepEqual(answer, { leaseId: "7", state: "stopped" });
    });

    it("answers 400 naming the field for a bad lease id, auth or body, before anything is relayed", async () => {
      const before = fx.relay.forwarded.length;
      const cases: [string, unknown, string][] = [
        ["/v1/leases/abc/status", { auth: auth("status") }, "id"],
        ["/v1/leases/7/status", { auth: { ...auth("status"), signature: "0x12" } }, "auth.signature"],
        ["/v1/leases/7/status", { auth: auth("pause") }, "auth.request.action"],
        ["/v1/leases/7/status", { auth: auth("status", "-3") }, "auth.request.leaseId"],
        ["/v1/leases/7/logs", { auth: auth("logs"), fromSeq: -1 }, "fromSeq"],
        ["/v1/leases/7/logs", { auth: auth("logs"), fromSeq: 0, waitMs: 60_000 }, "waitMs"],
        ["/v1/leases/7/task", { auth: auth("task"), spec: { command: "run" } }, "spec.bundle"],
        ["/v1/leases/7/task", { auth: auth("task"), spec: { image: "x", command: "run", env: { CUDA_VISIBLE_DEVICES: "0" } } }, "spec.env.CUDA_VISIBLE_DEVICES"],
        ["/v1/leases/7/cancel", { auth: auth("cancel"), reason: "bored" }, "reason"],
      ];
      for (const [url, body, field] of cases) {
        const response = await post(url, body);
        assert.equal(response.statusCode, 400, `${url} ${JSON.stringify(body)}: ${response.body}`);
        const error = errorOf(response.body);
        assert.equal(error.name, "InvalidInputError");
        assert.ok(
          error.fields?.some((issue) => issue.path === field),
          `${field} in ${JSON.stringify(error.fields)}`,
        );
      }
      assert.equal(fx.relay.forwarded.length, before);
    });
  });

  describe("errors, CORS and metrics", () => {
    it("answers 404 with a JSON error for an unknown route", async () => {
      const response = await get("/v2/offers");
      assert.equal(response.statusCode, 404);
      assert.equal(errorOf(response.body).name, "RouteNotFoundError");
    });

    it("allows browser front ends from any origin by default, including preflight", async () => {
      const simple = await get("/v1/offers", { origin: "https://dapp.example" });
      assert.equal(simple.headers["access-control-allow-origin"], "*");
      const preflight = await fx.api.app.inject({
        method: "OPTIONS",
        url: "/v1/match",
        headers: { origin: "https://dapp.example", "access-control-request-method": "POST", "access-control-request-headers": "content-type" },
      });
      assert.equal(preflight.statusCode, 204);
      assert.match(String(preflight.headers["access-control-allow-methods"]), /POST/);
      assert.match(String(preflight.headers["access-control-allow-headers"]), /content-type/);
    });

    it("allows only the configured origins when corsOrigins is set", async () => {
      const strict = await startApiFixture({ corsOrigins: ["https://app.suanli.example"] });
      try {
        const allowed = await strict.api.app.inject({ method: "GET", url: "/v1/info", headers: { origin: "https://app.suanli.example" } });
        assert.equal(allowed.headers["access-control-allow-origin"], "https://app.suanli.example");
        const other = await strict.api.app.inject({ method: "GET", url: "/v1/info", headers: { origin: "https://evil.example" } });
        assert.equal(other.headers["access-control-allow-origin"], undefined);
      } finally {
        await strict.close();
      }
    });

    it("serves Prometheus metrics from the registry the node passed in", async () => {
      const { Counter } = await import("prom-client");
      new Counter({ name: "suanli_node_test_total", help: "a metric of another part of the node", registers: [fx.registry] }).inc();
      await get("/v1/offers/not-a-key");
      const response = await get("/metrics");
      assert.equal(response.statusCode, 200);
      assert.match(String(response.headers["content-type"]), /^text\/plain/);
      assert.match(response.body, /suanli_api_requests_total\{method="GET",route="\/v1\/offers\/:key",status="400"\} \d+/);
      assert.match(response.body, /suanli_api_request_duration_seconds_bucket/);
      assert.match(response.body, /suanli_node_test_total 1/);
    });
  });

  describe("rate limits", () => {
    it("answers 429 with Retry-After past the per-client limit, per client address, and never limits /metrics", async () => {
      const limited = await startApiFixture({ rateLimitPerMinute: 3 });
      try {
        const from = (remoteAddress: string, url = "/v1/offers") => limited.api.app.inject({ method: "GET", url, remoteAddress });
        for (let i = 0; i < 3; i++) assert.equal((await from("10.0.0.1")).statusCode, 200);
        const refused = await from("10.0.0.1");
        assert.equal(refused.statusCode, 429);
        assert.equal(errorOf(refused.body).name, "RateLimitedError");
        const retryAfter = Number(refused.headers["retry-after"]);
        assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${refused.headers["retry-after"]}`);
        // Other routes share the client's budget; unknown routes count too.
        assert.equal((await from("10.0.0.1", "/v1/info")).statusCode, 429);
        assert.equal((await from("10.0.0.1", "/nowhere")).statusCode, 429);
        // Another client is unaffected; Prometheus can always scrape.
        assert.equal((await from("10.0.0.2")).statusCode, 200);
        for (let i = 0; i < 5; i++) assert.equal((await from("10.0.0.1", "/metrics")).statusCode, 200);
        assert.match((await from("10.0.0.3", "/metrics")).body, /suanli_api_rate_limited_total\{route="\/v1\/offers"\} 1/);
      } finally {
        await limited.close();
      }
    });

    it("limits match dry-runs and reservations by their own, stricter budget", async () => {
      const limited = await startApiFixture({ writeRateLimitPerMinute: 2 });
      try {
        const match = () => limited.api.app.inject({ method: "POST", url: "/v1/match", payload: { gpuType: "A100", gpuCount: 1, duration: 60, maxPricePerGpuHour: "5" } });
        assert.equal((await match()).statusCode, 200);
        assert.equal((await match()).statusCode, 200);
        const refused = await match();
        assert.equal(refused.statusCode, 429);
        assert.ok(refused.headers["retry-after"]);
        assert.equal((await limited.api.app.inject({ method: "GET", url: "/v1/offers" })).statusCode, 200);
      } finally {
        await limited.close();
      }
    });

    it("limits relayed task and cancel requests by the write budget, and lets status be polled", async () => {
      const limited = await startApiFixture({ writeRateLimitPerMinute: 1 });
      try {
        const auth = (action: string) => ({
          request: { leaseId: "7", provider: accounts.providerA.address, action, bodyHash: `0x${"ab".repeat(32)}`, issuedAt: T0, nonce: `0x${"cd".repeat(32)}` },
          signature: `0x${"11".repeat(65)}`,
        });
        const relay = (action: string) => limited.api.app.inject({ method: "POST", url: `/v1/leases/7/${action}`, payload: { auth: auth(action) } });
        assert.equal((await relay("cancel")).statusCode, 200);
        const refused = await relay("cancel");
        assert.equal(refused.statusCode, 429);
        assert.equal(errorOf(refused.body).name, "RateLimitedError");
        for (let i = 0; i < 3; i++) assert.equal((await relay("status")).statusCode, 200);
        // What was refused never reached the relay.
        assert.deepEqual(
          limited.relay.forwarded.map((call) => call.action),
          ["cancel", "status", "status", "status"],
        );
      } finally {
        await limited.close();
      }
    });
  });

  describe("options", () => {
    it("reads api.* from the node configuration's sources", async () => {
      const { loadConfig, ConfigError } = await import("../../node/config/load.js");
      const { nodeConfigSchema } = await import("../../node/config/schema.js");
      const config = await loadConfig(nodeConfigSchema, {
        env: { SUANLI_API__PORT: "9090", SUANLI_API__CORS_ORIGINS: "https://a.example,https://b.example" },
        flags: { "api.sse.heartbeatMs": "5000", "api.enabled": "true" },
      });
      assert.equal(config.api.enabled, true);
      assert.equal(config.api.host, "127.0.0.1");
      assert.equal(config.api.port, 9090);
      assert.deepEqual(config.api.corsOrigins, ["https://a.example", "https://b.example"]);
      assert.equal(config.api.sse.heartbeatMs, 5000);
      assert.equal(config.api.maxBodyBytes, 65_536);
      await assert.rejects(loadConfig(nodeConfigSchema, { env: { SUANLI_API__RATE_LIMIT_PER_MINUTE: "0" } }), (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.deepEqual(error.keys, ["api.rateLimitPerMinute"]);
        assert.match(error.message, /SUANLI_API__RATE_LIMIT_PER_MINUTE/);
        return true;
      });
    });

    it("refuses bad api options naming the key", async () => {
      const { createApiServer } = await import("../../node/api/server.js");
      await assert.rejects(
        createApiServer({ source: new InMemoryMarketSource(), deployment: testDeployment(), options: { port: 70_000, corsOrigins: ["ftp://x"] } }),
        (error: Error & { fields?: string[] }) => {
          assert.equal(error.name, "InvalidInputError");
          assert.deepEqual(error.fields?.sort(), ["corsOrigins.0", "port"]);
          return true;
        },
      );
    });
  });

  describe("market changes", () => {
    it("shows a newer version of an offer and ignores an older one", async () => {
      const source = fx.source;
      const newer = await signedOfferEntry({
        provider: accounts.providerB,
        machineId: 3,
        model: "A100-80GB",
        pricePerUnitSecond: 1400n,
        at: T0,
        seq: 2,
        units: 4,
        region: "us-east",
      });
      assert.equal(source.putOffer(newer), true);
      const older = await signedOfferEntry({ provider: accounts.providerB, machineId: 3, model: "A100-80GB", pricePerUnitSecond: 99n, at: T0, seq: 1, units: 4 });
      assert.equal(source.putOffer(older), false);
      const offer = offerViewSchema.decode((await get(`/v1/offers/${fx.keys.a100b}`)).json());
      assert.equal(offer.pricePerUnitSecond, 1400n);
      assert.equal(offer.seq, 2);
    });
  });
});
