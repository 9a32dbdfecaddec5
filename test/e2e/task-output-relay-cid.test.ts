import assert from "node:assert/strict";
import { outputCidOf } from "../../common/output-cid.js";
import type { SuanliClient } from "../../sdk/browser.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";

/**
 * The browser SDK's output download through a node's HTTP relay when the provider's data plane
 * committed the output by its UnixFS CID (docs/data.md "Outputs"): the SDK computes the CID of the
 * bytes it holds in memory (common/unixfs-cid.ts, ipfs-unixfs-importer with @helia/unixfs's
 * defaults: no libp2p in the browser bundle) and accepts them only when it is the CID the chain
 * holds. Before, such an output was OutputUnverifiableError in a browser.
 */
describe("a CID-committed output through a node's HTTP relay (browser SDK): verified against the CID", function () {
  this.timeout(180_000);
  let market: RenterMarket;
  let client: SuanliClient;
  let taskId: string;
  let cid: string;
  const realFetch = globalThis.fetch;

  before(async () => {
    market = await startRenterMarket({ name: "output-relay-cid", apiNode: true, renterVia: "browser", renter: 7, fund: 50_000_000n, provider: { data: { enabled: true } } });
    client = market.client as SuanliClient;
    const bundle = await market.bundles.bundle({
      "run.sh": [
        'mkdir -p "$SUANLI_OUTPUT_DIR/ckpt/epoch-1"',
        'echo "loss 0.12" > "$SUANLI_OUTPUT_DIR/metrics.txt"',
        // Over the importer's 1 MiB chunk: a file of several leaves under one node.
        'head -c 2500000 /dev/urandom > "$SUANLI_OUTPUT_DIR/ckpt/epoch-1/model.bin"',
        ': > "$SUANLI_OUTPUT_DIR/empty"',
      ].join("\n"),
    });
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 60,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "sh run.sh",
    });
    taskId = submitted.taskId;
    const receipt = await client.wait(taskId);
    assert.equal(receipt.state, "succeeded", "the relay answers the status of a data-plane provider's task (its outputCid and checkpoints fields)");
    cid = outputCidOf(receipt.completion!.outputDigest)!;
    assert.ok(cid, "the provider's data plane committed the output by its CID");
  });
  after(async () => {
    globalThis.fetch = realFetch;
    await market?.close();
  });

  it("downloads the files into memory, computes their CID and accepts them against the chain's", async () => {
    const result = await client.downloadOutput(taskId);
    assert.equal(result.verified, true);
    assert.equal(result.verifiedAgainst, "chain");
    assert.equal(result.outputCid, cid);
    assert.deepEqual(
      result.files.map((file) => [file.path, file.size]),
      [
        ["ckpt/epoch-1/model.bin", 2_500_000],
        ["empty", 0],
        ["metrics.txt", 10],
      ],
    );
    assert.equal(new TextDecoder().decode(result.files[2]!.data), "loss 0.12\n");
  });

  it("a byte flipped by the relay: refused (OutputDigestMismatchError naming the CID's digest), no files handed back", async () => {
    let flipped = false;
    globalThis.fetch = (async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
      const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
      const response = await realFetch(input, init);
      if (!/\/output\/read$/.test(url)) return response;
      const body = response.body!.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            const copy = chunk.slice();
            if (!flipped && copy.length > 0) {
              copy[0]! ^= 0xff;
              flipped = true;
            }
            controller.enqueue(copy);
          },
        }),
      );
      return new Response(body, { status: response.status, headers: response.headers });
    }) as typeof fetch;
    try {
      await assert.rejects(client.downloadOutput(taskId), (error: Error & { expected?: string }) => {
        assert.equal(error.name, "OutputDigestMismatchError");
        assert.equal(outputCidOf(error.expected as `0x${string}`), cid, "the digest it names is the output CID's");
        return true;
      });
    } finally {
      globalThis.fetch = realFetch;
    }
    assert.ok(flipped);
  });
});
