import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { lintOpenApi } from "../../scripts/lint-openapi.js";
import { startApiFixture } from "../support/api-fixture.js";

const noNetwork = pathToFileURL(path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../scripts/no-network.mjs")).href;

/** Redocly CLI's recommended rules on the document a node serves at /openapi.json, run offline. */
describe("OpenAPI document: Redocly lint (recommended rules, offline)", function () {
  this.timeout(120_000);
  let document: Record<string, unknown>;

  before(async () => {
    const fixture = await startApiFixture();
    try {
      const response = await fixture.api.app.inject({ method: "GET", url: "/openapi.json" });
      assert.equal(response.statusCode, 200);
      document = response.json() as Record<string, unknown>;
    } finally {
      await fixture.close();
    }
  });

  it("passes with no error and no warning, without touching the network", async () => {
    const result = await lintOpenApi(document);
    assert.deepEqual(result.networkAttempts, [], result.output);
    assert.equal(result.exitCode, 0, result.output);
    assert.match(result.output, /Your API description is valid/);
    assert.doesNotMatch(result.output, /\b(warning|error)\b/, result.output);
    // Only the two documented exemptions (scripts/openapi-lint/.redocly.lint-ignore.yaml).
    assert.match(result.output, /2 problems are explicitly ignored/);
  });

  it("carries the metadata the rules ask for: servers, security, license, described tags, no unused schemas", () => {
    const doc = document as {
      servers: { url: string }[];
      security: unknown[];
      info: { license: { identifier: string } };
      tags: { name: string; description?: string }[];
      paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: { oneOf?: { $ref: string }[] } }> }> }>>;
    };
    assert.deepEqual(
      doc.servers.map((server) => server.url),
      ["/"],
    );
    assert.deepEqual(doc.security, []);
    assert.equal(doc.info.license.identifier, "Apache-2.0");
    for (const tag of doc.tags) assert.ok(tag.description, `tag ${tag.name} has a description`);
    const stream = doc.paths["/v1/events"]!.get!.responses["200"]!.content?.["text/event-stream"]?.schema;
    assert.deepEqual(
      stream?.oneOf?.map((ref) => ref.$ref),
      ["#/components/schemas/Offer", "#/components/schemas/OfferRemovedEvent", "#/components/schemas/Lease", "#/components/schemas/ResetEvent"],
    );
  });

  it("fails a document that breaks a recommended rule (the check can fail)", async () => {
    const { servers: _servers, ...withoutServers } = document;
    const result = await lintOpenApi(withoutServers);
    assert.notEqual(result.exitCode, 0, result.output);
    assert.match(result.output, /no-empty-servers/);
  });

  it("the offline guard refuses and reports a connection attempt", async () => {
    const script = 'fetch("http://127.0.0.1:59999/").then(() => process.exit(3), () => process.exit(0))';
    const { stderr } = await promisify(execFile)(process.execPath, ["--import", noNetwork, "-e", script]);
    assert.match(stderr, /^NETWORK ATTEMPT 127\.0\.0\.1:59999$/m);
  });
});
