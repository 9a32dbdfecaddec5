/**
 * Task inputs on the renter's side (issue 36): submitTask({ inputs }) and `--input CID:/data/name`
 * are validated before anything is reserved or paid, and inputs that declare their size are
 * matched only against offers whose disk for the lease holds them, with the reason in words.
 * docs/data.md cites these tests.
 */
import assert from "node:assert/strict";
import { InvalidInputError } from "../../common/errors.js";
import { MatchingEngine } from "../../common/matching/index.js";
import { parseInputFlag } from "../../common/protocols/task-inputs.js";
import { parseSubmitParameters } from "../../sdk/actions/submitTask.js";
import { NOW, entry } from "../support/matching-fixtures.js";

const GiB = 1024 ** 3;
const CID = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy";
const base = { gpuType: "A100", gpuCount: 1, duration: 3600, maxPricePerGpuHour: "3.60", image: "busybox", command: "cat /data/set/x" };
const disk = (diskGiB: number) => ({ cpuCoresPerUnit: 4, memoryMiBPerUnit: 32 * 1024, diskMiBPerUnit: diskGiB * 1024 });

describe("SDK: task inputs", () => {
  it("passes inputs into the task spec, and refuses bad ones naming the field", () => {
    const { spec, request } = parseSubmitParameters({ ...base, inputs: [{ cid: CID, mount: "/data/set" }] });
    assert.deepEqual(spec.inputs, [{ cid: CID, mount: "/data/set" }]);
    assert.equal(request.diskMiB, 0, "no declared size: no disk asked");
    let error: unknown;
    try {
      parseSubmitParameters({
        ...base,
        inputs: [
          { cid: "not-a-cid", mount: "/etc/x" },
          { cid: CID, mount: "/data/set", bytes: -1 },
          { cid: CID, mount: "/data/set/inner" },
        ],
      });
    } catch (caught) {
      error = caught;
    }
    assert.ok(error instanceof InvalidInputError, String(error));
    assert.deepEqual([...error.fields].sort(), ["inputs.0.cid", "inputs.0.mount", "inputs.1.bytes", "inputs.1.mount", "inputs.2.mount"]);
    assert.match(error.message, /a mount is a path under \/data/);
  });

  it("the CLI's --input CID:/data/name[:bytes] becomes an input", () => {
    assert.deepEqual(parseInputFlag(`${CID}:/data/set`), { cid: CID, mount: "/data/set" });
    assert.deepEqual(parseInputFlag(`${CID}:/data/set:1024`), { cid: CID, mount: "/data/set", bytes: 1024 });
    const odd = parseInputFlag(`${CID}:/data/set:lots`);
    assert.throws(
      () => parseSubmitParameters({ ...base, inputs: [odd] }),
      (e: unknown) => e instanceof InvalidInputError && e.fields.includes("inputs.0.mount"),
    );
  });

  it("declared sizes above an offer's disk for the lease are refused at match time, with the reason", () => {
    const engine = new MatchingEngine({}, { now: () => NOW });
    engine.upsert(entry({ machineId: 1, price: 300, resources: disk(100) }));
    engine.upsert(entry({ machineId: 2, price: 400, resources: disk(200) }));
    const match = (bytes: number[]) =>
      engine.match(parseSubmitParameters({ ...base, inputs: bytes.map((size, i) => ({ cid: CID, mount: `/data/set${i}`, bytes: size })) }).request, { now: NOW });

    const fits = match([100 * GiB, 50 * GiB]);
    assert.ok(fits.ok, fits.ok ? "" : fits.explanation.message);
    assert.deepEqual(
      fits.candidates.map((c) => c.parts[0]!.entry.machineId),
      [2],
      "150 GiB of inputs: only the machine with 200 GiB of disk",
    );

    const tooBig = match([300 * GiB]);
    assert.ok(!tooBig.ok, "no offer holds 300 GiB");
    assert.match(tooBig.explanation.summary, /inputs declare 300 GiB/);
    const miss = tooBig.explanation.nearMisses.find((m) => m.constraint === "hostResources");
    assert.match(
      miss?.message ?? "",
      /come with at most 200 GiB disk per GPU; you asked for 300 GiB disk \(your task's inputs declare 300 GiB, which the lease's disk must hold\)/,
    );
  });
});
