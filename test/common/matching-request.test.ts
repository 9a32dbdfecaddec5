import assert from "node:assert/strict";
import { InvalidInputError } from "../../common/errors.js";
import { formatUsd, parseMatchRequest } from "../../common/matching/index.js";
import { PER_SECOND_ROUNDING_NOTE, showsPerSecondRounding } from "../../common/matching/money.js";
import { pricePerUnitSecond } from "../../node/provider/options.js";
import { requestInput } from "../support/matching-fixtures.js";

function fieldsOf(input: unknown): string[] {
  try {
    parseMatchRequest(input);
  } catch (error) {
    assert.ok(error instanceof InvalidInputError, `expected InvalidInputError, got ${String(error)}`);
    assert.equal(error.name, "InvalidInputError");
    return error.fields;
  }
  assert.fail("expected the request to be refused");
}

describe("matching: request validation", () => {
  it("fills defaults and converts the USD cap to base units per hour and per second", () => {
    const request = parseMatchRequest({ gpuType: "a100", gpuCount: 4, duration: 7200, maxPricePerGpuHour: "2.50" });
    assert.deepEqual(request.gpuType.models, ["A100-80GB"]);
    assert.equal(request.mode, "on-demand");
    assert.equal(request.interruptible, false);
    assert.equal(request.attestedOnly, true);
    assert.equal(request.colocation, "machine");
    assert.equal(request.minReputation, 0);
    assert.equal(request.minVramMiB, 0);
    assert.equal(request.regions, null);
    assert.equal(request.maxPricePerGpuHour, 2_500_000n);
    assert.equal(request.maxPricePerUnitSecond, 694n); // floor(2_500_000 / 3600)
    assert.equal(request.bidPerUnitSecond, null);
  });

  it("accepts the cap as a number with up to 6 decimals", () => {
    assert.equal(parseMatchRequest(requestInput({ maxPricePerGpuHour: 1.9 })).maxPricePerGpuHour, 1_900_000n);
    assert.equal(parseMatchRequest(requestInput({ maxPricePerGpuHour: "0.123456" })).maxPricePerGpuHour, 123_456n);
  });

  it("resolves models, aliases, MIG slices and classes to canonical names", () => {
    assert.deepEqual(parseMatchRequest(requestInput({ gpuType: "NVIDIA H100 80GB HBM3" })).gpuType.models, ["H100-80GB-SXM"]);
    assert.deepEqual(parseMatchRequest(requestInput({ gpuType: "A100/1G.10GB" })).gpuType.models, ["A100-80GB/1g.10gb"]);
    const class80 = parseMatchRequest(requestInput({ gpuType: "any 80GB" })).gpuType;
    assert.equal(class80.label, "any 80GB");
    assert.deepEqual([...class80.models].sort(), ["A100-80GB", "H100-80GB-PCIE", "H100-80GB-SXM", "H200-141GB"]);
    assert.deepEqual(parseMatchRequest(requestInput({ gpuType: "any 80 GB" })).gpuType.models, class80.models);
    assert.equal(parseMatchRequest(requestInput({ gpuType: "any" })).gpuType.models.length, 12);
    const list = parseMatchRequest(requestInput({ gpuType: ["A100", "H100", "a100"] })).gpuType;
    assert.deepEqual(list.models, ["A100-80GB", "H100-80GB-SXM"]);
    assert.equal(list.label, "A100-80GB or H100-80GB-SXM or A100-80GB");
  });

  it("refuses an unknown GPU type and lists the accepted names and classes", () => {
    assert.throws(
      () => parseMatchRequest(requestInput({ gpuType: "B300" })),
      (error: unknown) => {
        assert.ok(error instanceof InvalidInputError);
        assert.deepEqual(error.fields, ["gpuType"]);
        assert.match(error.message, /unknown GPU type "B300"/);
        assert.match(error.message, /A100-80GB/);
        assert.match(error.message, /H200-141GB/);
        assert.match(error.message, /any <N>GB/);
        return true;
      },
    );
    assert.deepEqual(fieldsOf(requestInput({ gpuType: "any 500GB" })), ["gpuType"]);
    assert.deepEqual(fieldsOf(requestInput({ gpuType: "A100/big" })), ["gpuType"]);
    assert.deepEqual(fieldsOf(requestInput({ gpuType: [] })), ["gpuType"]);
  });

  it("names every missing required field", () => {
    const fields = fieldsOf({});
    for (const field of ["gpuType", "gpuCount", "duration"]) assert.ok(fields.includes(field), `missing ${field} in ${fields.join(",")}`);
    try {
      parseMatchRequest({});
    } catch (error) {
      assert.match((error as Error).message, /gpuCount: is required/);
    }
    assert.deepEqual(fieldsOf({ gpuType: "A100", gpuCount: 1, duration: 60 }), ["maxPricePerGpuHour"]);
  });

  const bad: [string, Record<string, unknown>][] = [
    ["gpuCount", { gpuCount: 0 }],
    ["gpuCount", { gpuCount: -2 }],
    ["gpuCount", { gpuCount: 1.5 }],
    ["gpuCount", { gpuCount: 100_000 }],
    ["gpuCount", { gpuCount: "4" }],
    ["duration", { duration: 0 }],
    ["duration", { duration: -60 }],
    ["duration", { duration: 10 ** 9 }],
    ["duration", { duration: Number.NaN }],
    ["maxPricePerGpuHour", { maxPricePerGpuHour: "-1" }],
    ["maxPricePerGpuHour", { maxPricePerGpuHour: -1 }],
    ["maxPricePerGpuHour", { maxPricePerGpuHour: "0" }],
    ["maxPricePerGpuHour", { maxPricePerGpuHour: 0 }],
    ["maxPricePerGpuHour", { maxPricePerGpuHour: "0.0000001" }],
    ["maxPricePerGpuHour", { maxPricePerGpuHour: 1e-7 }],
    ["maxPricePerGpuHour", { maxPricePerGpuHour: "0.001" }], // below one base unit per second
    ["maxPricePerGpuHour", { maxPricePerGpuHour: "50000" }],
    ["maxPricePerGpuHour", { maxPricePerGpuHour: Number.POSITIVE_INFINITY }],
    ["maxPricePerGpuHour", { maxPricePerGpuHour: "two dollars" }],
    ["minVramMiB", { minVramMiB: 0 }],
    ["minVramMiB", { minVramMiB: 10 ** 9 }],
    ["minReputation", { minReputation: 1.5 }],
    ["minReputation", { minReputation: -0.1 }],
    ["region", { region: "" }],
    ["region", { region: [] }],
    ["region", { region: "x".repeat(40) }],
    ["mode", { mode: "spot" }],
    ["attestedOnly", { attestedOnly: "yes" }],
    ["colocation", { colocation: "rack" }],
    ["gpuTypes", { gpuTypes: "A100" }],
  ];
  for (const [field, override] of bad) {
    it(`refuses ${JSON.stringify(override)} naming ${field}`, () => {
      assert.deepEqual(fieldsOf(requestInput(override)), [field]);
    });
  }

  it("names an unknown key together with the accepted keys", () => {
    assert.throws(
      () => parseMatchRequest(requestInput({ maxPrice: "2" })),
      (error: unknown) => error instanceof InvalidInputError && /accepted keys here: gpuType, gpuCount/.test(error.message),
    );
  });

  it("requires a bid for interruptible requests and only for them", () => {
    assert.deepEqual(fieldsOf({ gpuType: "A100", gpuCount: 1, duration: 60, mode: "interruptible" }), ["bidPerGpuHour"]);
    assert.deepEqual(fieldsOf(requestInput({ bidPerGpuHour: "1" })), ["bidPerGpuHour"]);
    assert.deepEqual(fieldsOf(requestInput({ mode: "interruptible", bidPerGpuHour: "3", maxPricePerGpuHour: "2" })), ["maxPricePerGpuHour"]);
  });

  it("takes the bid as the interruptible cap and rounds it down to whole base units per second", () => {
    const request = parseMatchRequest({ gpuType: "H100", gpuCount: 2, duration: 600, mode: "interruptible", bidPerGpuHour: "0.80" });
    assert.equal(request.interruptible, true);
    assert.equal(request.bidPerGpuHour, 800_000n);
    assert.equal(request.bidPerUnitSecond, 222n); // 800_000 / 3600 = 222.2
    assert.equal(request.maxPricePerGpuHour, 800_000n);
    assert.equal(formatUsd(request.bidPerUnitSecond! * 3600n), "0.7992");
  });

  it("lower-cases and de-duplicates regions", () => {
    assert.deepEqual(parseMatchRequest(requestInput({ region: "EU-West" })).regions, ["eu-west"]);
    assert.deepEqual(parseMatchRequest(requestInput({ region: ["us-east", "US-EAST", "ap-south"] })).regions, ["us-east", "ap-south"]);
  });

  it("formats base units as USD for people", () => {
    assert.equal(formatUsd(1_900_000n), "1.90");
    assert.equal(formatUsd(1_234_567n), "1.234567");
    assert.equal(formatUsd(0n), "0.00");
    assert.equal(formatUsd(-500_000n), "-0.50");
  });

  it("tells which per-second prices show a rounding tail per hour, the one a provider's 2 USD/h gets (issue #40 item 7)", () => {
    // 2 USD/h is 555.6 base units per second: the provider offers 556, shown per hour as 2.0016.
    assert.equal(pricePerUnitSecond({ usdPerGpuHour: 2 }), 556n);
    assert.equal(formatUsd(556n * 3600n), "2.0016");
    assert.equal(showsPerSecondRounding(556n), true);
    assert.match(PER_SECOND_ROUNDING_NOTE, /2 USD\/GPU-h is offered as 556 per second, shown as 2\.0016 per hour/);
    // 3.24 USD/h and 3.60 USD/h are whole base units per second: nothing to explain.
    assert.equal(showsPerSecondRounding(900n), false);
    assert.equal(showsPerSecondRounding(1000n), false);
    // With 18 decimals a cent is 10^16 base units: 10^15 per second is 3.6 per hour (no tail), 10^15 + 1 has one.
    assert.equal(showsPerSecondRounding(10n ** 15n, 18), false);
    assert.equal(showsPerSecondRounding(10n ** 15n + 1n, 18), true);
  });
});
