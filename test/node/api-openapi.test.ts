import assert from "node:assert/strict";
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020 } from "ajv/dist/2020.js";
import { startApiFixture, type ApiFixture } from "../support/api-fixture.js";
import { accounts } from "../support/market.js";

type Operation = { operationId: string; responses: Record<string, { content?: Record<string, { schema: unknown }> }> };
type Document = { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, unknown> } };

describe("OpenAPI document", () => {
  let fx: ApiFixture;
  let document: Document;
  before(async () => {
    fx = await startApiFixture();
    const response = await fx.api.app.inject({ method: "GET", url: "/openapi.json" });
    assert.equal(response.statusCode, 200);
    document = response.json() as Document;
  });
  after(async () => {
    await fx.close();
  });

  it("is a valid OpenAPI 3.1 document", async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document) as never);
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
    assert.equal(validator.version, "3.1");
  });

  it("documents every route the server registers, and nothing else", () => {
    const documented = new Set<string>();
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const method of Object.keys(operations)) documented.add(`${method.toUpperCase()} ${path}`);
    }
    const registered = new Set(
      fx.api.registeredRoutes
        // fastify adds a HEAD route for each GET, and @fastify/cors answers preflight on OPTIONS *
        .filter((route) => route.method !== "HEAD" && !(route.method === "OPTIONS" && route.url === "*"))
        .map((route) => `${route.method} ${route.url.replace(/:([A-Za-z0-9_]+)/g, "{$1}")}`),
    );
    assert.deepEqual([...registered].sort(), [...documented].sort());
    // The list is what the issue asks for, so a route cannot silently disappear from both.
    for (const expected of [
      "GET /v1/offers",
      "GET /v1/offers/{key}",
      "GET /v1/providers/{address}",
      "GET /v1/machines",
      "GET /v1/leases",
      "GET /v1/leases/{id}",
      "GET /v1/stats",
      "POST /v1/match",
      "POST /v1/reservations",
      "POST /v1/leases/{id}/task",
      "POST /v1/leases/{id}/status",
      "POST /v1/leases/{id}/logs",
      "POST /v1/leases/{id}/cancel",
      "POST /v1/data",
      "GET /v1/data",
      "GET /v1/data/{cid}",
      "DELETE /v1/data/{cid}",
      "POST /v1/data/pins",
      "GET /v1/templates",
      "GET /v1/events",
      "GET /v1/health",
      "GET /metrics",
      "GET /openapi.json",
      "GET /explorer",
    ]) {
      assert.ok(documented.has(expected), expected);
    }
  });

  it("describes the JSON the routes actually send", async () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    // Register the components so that $refs resolve, then validate real responses against them.
    ajv.addSchema({ $id: "api", components: document.components } as never);
    const check = async (method: "GET" | "POST", url: string, path: string, status: number, payload?: unknown) => {
      const response = await fx.api.app.inject({ method, url, payload: payload as string });
      assert.equal(response.statusCode, status, `${url}: ${response.body}`);
      const schema = document.paths[path]![method.toLowerCase()]!.responses[String(status)]!.content?.["application/json"]?.schema;
      assert.ok(schema, `${method} ${path} documents ${status}`);
      const rewritten = JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"api#/components/'));
      const valid = ajv.validate(rewritten, response.json());
      assert.equal(valid, true, `${method} ${url} ${status}: ${ajv.errorsText()}`);
    };
    await check("GET", "/v1/info", "/v1/info", 200);
    await check("GET", "/v1/health", "/v1/health", 200);
    await check("GET", "/v1/offers", "/v1/offers", 200);
    await check("GET", "/v1/offers?minVramMiB=x", "/v1/offers", 400);
    await check("GET", `/v1/offers/${fx.keys.a100}`, "/v1/offers/{key}", 200);
    await check("GET", `/v1/offers/${accounts.stranger.address}:1`, "/v1/offers/{key}", 404);
    await check("GET", "/v1/providers", "/v1/providers", 200);
    await check("GET", `/v1/providers/${accounts.providerA.address}`, "/v1/providers/{address}", 200);
    await check("GET", "/v1/machines", "/v1/machines", 200);
    await check("GET", "/v1/machines/1", "/v1/machines/{machineId}", 200);
    await check("GET", `/v1/leases?address=${accounts.renter.address}`, "/v1/leases", 200);
    await check("GET", "/v1/leases/1", "/v1/leases/{id}", 200);
    await check("GET", "/v1/stats", "/v1/stats", 200);
    await check("GET", "/v1/templates", "/v1/templates", 200);
    await check("POST", "/v1/match", "/v1/match", 200, { gpuType: "A100", gpuCount: 1, duration: 60, maxPricePerGpuHour: "5" });
    await check("POST", "/v1/match", "/v1/match", 200, { gpuType: "H200", gpuCount: 1, duration: 60, maxPricePerGpuHour: "5" });
    await check("POST", "/v1/match", "/v1/match", 400, { gpuType: "H200" });
    const auth = (action: string) => ({
      request: { leaseId: "3", provider: accounts.providerA.address, action, bodyHash: `0x${"ab".repeat(32)}`, issuedAt: 1, nonce: `0x${"cd".repeat(32)}` },
      signature: `0x${"11".repeat(65)}`,
    });
    await check("POST", "/v1/leases/3/task", "/v1/leases/{id}/task", 200, { auth: auth("task"), spec: { image: "busybox", command: "true" } });
    await check("POST", "/v1/leases/3/task", "/v1/leases/{id}/task", 200, {
      auth: auth("task"),
      spec: { imageArchive: { url: "https://example.com/training_container.tar", sha256: "ab".repeat(32) }, command: "true" },
    });
    await check("POST", "/v1/leases/3/task", "/v1/leases/{id}/task", 400, { auth: auth("task"), spec: { image: "docker-archive:/etc/passwd", command: "true" } });
    await check("POST", "/v1/leases/3/task", "/v1/leases/{id}/task", 400, { auth: auth("task"), spec: { imageArchive: { url: "https://example.com/x.tar" }, command: "true" } });
    await check("POST", "/v1/leases/3/status", "/v1/leases/{id}/status", 200, { auth: auth("status") });
    await check("POST", "/v1/leases/3/logs", "/v1/leases/{id}/logs", 200, { auth: auth("logs"), fromSeq: 0 });
    await check("POST", "/v1/leases/3/cancel", "/v1/leases/{id}/cancel", 200, { auth: auth("cancel") });
    await check("POST", "/v1/leases/3/cancel", "/v1/leases/{id}/cancel", 400, { auth: auth("task") });
  });

  it("documents amounts as decimal strings and query parameters with their constraints", () => {
    const offer = document.components.schemas.Offer as { properties: Record<string, { type?: string; pattern?: string }> };
    assert.equal(offer.properties.pricePerUnitSecond!.type, "string");
    assert.equal(offer.properties.pricePerUnitSecond!.pattern, "^\\d{1,78}$");
    const list = document.paths["/v1/offers"]!.get as unknown as { parameters: { name: string; in: string; required: boolean; schema: { pattern?: string; enum?: string[] } }[] };
    const byName = new Map(list.parameters.map((parameter) => [parameter.name, parameter]));
    assert.deepEqual([...byName.keys()].sort(), [
      "attested",
      "gpuIdentityVerified",
      "interruptible",
      "limit",
      "maxPricePerUnitSecond",
      "minFreeUnits",
      "minVramMiB",
      "model",
      "offset",
      "provider",
      "region",
      "sort",
    ]);
    assert.equal(byName.get("minVramMiB")?.required, false);
    assert.equal(byName.get("minVramMiB")?.in, "query");
    assert.match(String((byName.get("minVramMiB") as { description?: string } | undefined)?.description), /memory per unit/);
    assert.ok(byName.get("sort")?.schema.enum?.includes("-price"));
    const leases = document.paths["/v1/leases"]!.get as unknown as { parameters: { name: string; required: boolean }[] };
    assert.equal(leases.parameters.find((parameter) => parameter.name === "address")?.required, true);
  });
});
