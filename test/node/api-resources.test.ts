/**
 * Host resources over HTTP (issue 33, item 4): offers show the CPU cores, memory and disk each
 * GPU comes with, and how long the provider keeps a lease's output (issue 36); POST /v1/match takes `cpuCores`, `memoryGiB` and `diskGiB`, filters on them,
 * says what each allocation gets and why a machine missed, and refuses bad values naming the
 * field; the SDK's HTTP feed carries the declaration into its own matching engine.
 */
import assert from "node:assert/strict";
import { matchResultSchema } from "../../common/api/market.js";
import { offerViewSchema } from "../../common/api/offers.js";
import { parseMatchRequest } from "../../common/matching/request.js";
import { parseSubmitParameters } from "../../sdk/actions/submitTask.js";
import { startHttpFeed } from "../../sdk/internal/http.js";
import { InvalidInputError } from "../../common/errors.js";
import { startApiFixture, T0, type ApiFixture } from "../support/api-fixture.js";
import { accounts, signedOfferEntry } from "../support/market.js";

const GiB = 1024;
// 4 cores, 32 GiB memory and 100 GiB disk per GPU.
const declared = { cpuCoresPerUnit: 4, memoryMiBPerUnit: 32 * GiB, diskMiBPerUnit: 100 * GiB };
// Outputs kept two days after the task ends.
const retention = { outputSeconds: 2 * 86_400 };

describe("HTTP API and SDK: host resources", () => {
  let fx: ApiFixture;
  let key: string;
  const post = (url: string, payload: unknown) => fx.api.app.inject({ method: "POST", url, payload: payload as string });

  before(async () => {
    fx = await startApiFixture();
    const entry = await signedOfferEntry({
      provider: accounts.providerB,
      machineId: 9,
      model: "A100-80GB",
      pricePerUnitSecond: 1200n,
      at: T0 - 60,
      attestor: accounts.attestor,
      resources: declared,
      retention,
    });
    fx.source.putOffer(entry);
    key = `${accounts.providerB.address.toLowerCase()}:9`;
  });
  after(async () => {
    await fx.close();
  });

  it("an offer shows what each GPU comes with and how long outputs are kept; one that declares nothing shows nothing", async () => {
    const view = offerViewSchema.decode((await fx.api.app.inject({ method: "GET", url: `/v1/offers/${key}` })).json());
    assert.deepEqual(view.resources, declared);
    assert.deepEqual(view.retention, retention);
    const old = offerViewSchema.decode((await fx.api.app.inject({ method: "GET", url: `/v1/offers/${fx.keys.a100}` })).json());
    assert.equal(old.resources, undefined);
    assert.equal(old.retention, undefined);
  });

  it("POST /v1/match keeps the machines whose GPUs add up and says what the allocation gets", async () => {
    const result = matchResultSchema.decode(
      (await post("/v1/match", { gpuType: "A100", gpuCount: 2, duration: 3600, maxPricePerGpuHour: "6", cpuCores: 8, memoryGiB: 64, diskGiB: 150 })).json(),
    );
    assert.equal(result.matched, true);
    assert.deepEqual(
      result.candidates.map((c) => c.allocations[0]!.offerKey),
      [key],
    );
    assert.deepEqual(result.candidates[0]!.allocations[0]!.resources, { cpuCores: 8, memoryMiB: 64 * GiB, diskMiB: 200 * GiB });
    const any = matchResultSchema.decode((await post("/v1/match", { gpuType: "A100", gpuCount: 2, duration: 3600, maxPricePerGpuHour: "6" })).json());
    assert.equal(any.candidates.length, 3, "asking nothing keeps the machines that declare nothing");
    assert.equal(any.candidates.find((c) => c.allocations[0]!.offerKey === fx.keys.a100)?.allocations[0]!.resources, null);
  });

  it("POST /v1/match explains a miss on host resources in words", async () => {
    const result = matchResultSchema.decode((await post("/v1/match", { gpuType: "A100", gpuCount: 2, duration: 3600, maxPricePerGpuHour: "6", cpuCores: 16 })).json());
    assert.equal(result.matched, false);
    const step = result.explanation!.steps.find((s) => s.constraint === "hostResources");
    assert.deepEqual([step?.label, step?.removed, step?.remaining], ["host resources of at least 8 CPU cores per GPU", 3, 0]);
    const miss = result.explanation!.nearMisses.find((m) => m.constraint === "hostResources");
    assert.match(miss?.message ?? "", /come with at most 4 CPU cores per GPU \(2 of them declare none\); you asked for 16 CPU cores for 2 GPUs, so 8 CPU cores per GPU\./);
  });

  it("POST /v1/match answers 400 naming each bad resource field", async () => {
    const response = await post("/v1/match", { gpuType: "A100", gpuCount: 1, duration: 60, maxPricePerGpuHour: "2", cpuCores: 1.5, memoryGiB: 0, diskGiB: "lots" });
    assert.equal(response.statusCode, 400);
    const error = (response.json() as { error: { name: string; fields: { path: string; message: string }[] } }).error;
    assert.equal(error.name, "InvalidInputError");
    assert.deepEqual(Object.fromEntries(error.fields.map((f) => [f.path, f.message])), {
      cpuCores: "expected a whole number of CPU cores",
      memoryGiB: "must be above 0 GiB",
      diskGiB: "expected disk in GiB, a number above 0",
    });
  });

  it("the SDK validates the same fields, and its HTTP feed matches on the node's declarations", async () => {
    const params = { gpuType: "A100", gpuCount: 2, duration: 3600, maxPricePerGpuHour: "6", command: "true", image: "busybox" };
    assert.equal(parseSubmitParameters({ ...params, cpuCores: 8, memoryGiB: 1.5 }).request.memoryMiB, 1536);
    assert.throws(
      () => parseSubmitParameters({ ...params, cpuCores: -2 }),
      (error: unknown) => error instanceof InvalidInputError && /cpuCores: must be at least 1/.test(error.message),
    );

    const url = await fx.api.listen();
    const feed = await startHttpFeed({ nodeUrl: url, now: () => T0 });
    try {
      await feed.ready();
      const result = feed.engine.match(parseMatchRequest({ gpuType: "A100", gpuCount: 2, duration: 3600, maxPricePerGpuHour: "6", cpuCores: 8 }), { now: T0 });
      assert.ok(result.ok, result.ok ? "" : result.explanation.message);
      assert.deepEqual(
        result.candidates.map((c) => c.parts[0]!.entry.key),
        [key],
      );
      assert.deepEqual(result.candidates[0]!.parts[0]!.entry.resources, declared);
      assert.equal(result.candidates[0]!.parts[0]!.entry.outputRetentionSeconds, retention.outputSeconds, "the feed carries the stated retention");
    } finally {
      await feed.close();
    }
  });
});
