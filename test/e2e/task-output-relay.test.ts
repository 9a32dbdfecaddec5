import assert from "node:assert/strict";
import path from "node:path";
import { OUTPUT_HEADERS } from "../../common/api/relay.js";
import { devnetAccount } from "../../common/devnet.js";
import { outputFilesDigest } from "../../common/output-bytes-digest.js";
import { digestOutputDir } from "../../common/output-digest.js";
import type { OutputManifest } from "../../common/protocols/task-io.js";
import { leaseRequestBodyHash, signLeaseRequest } from "../../common/protocols/lease.js";
import { suanliDomain } from "../../common/eip712.js";
import type { SuanliClient } from "../../sdk/browser.js";
import type { BundleServer } from "../support/bundles.js";
import { startTestDaemon } from "../support/daemons.js";
import type { Devnet } from "../support/devnet.js";
import type { TestProvider } from "../support/provider.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";

/**
 * The browser SDK's output download through a node's HTTP relay: a real API node relays the
 * output protocol from a real provider node; the browser entry (run from Node, with the devnet's
 * JSON-RPC endpoint as its injected-style wallet) verifies the digest against the signed report.
 */
describe("task outputs through a node's HTTP relay (browser SDK)", function () {
  this.timeout(180_000);
  let market: RenterMarket;
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let node: NonNullable<RenterMarket["apiNode"]>;
  let client: SuanliClient;
  let renter: RenterMarket["renter"];
  let taskId: string;
  let leaseId: bigint;
  const realFetch = globalThis.fetch;

  /** Runs `body` with every output read the client sends through `wrap` (and every listing through `wrapList`): a relay that rewrites what it relays. */
  async function withReads<T>(
    wrap: (response: Response, call: number) => Response,
    body: () => Promise<T>,
    wrapList: (response: Response) => Promise<Response> | Response = (response) => response,
  ): Promise<T> {
    let calls = 0;
    globalThis.fetch = (async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
      const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
      const response = await realFetch(input, init);
      if (/\/output\/list$/.test(url)) return wrapList(response);
      return /\/output\/read$/.test(url) ? wrap(response, calls++) : response;
    }) as typeof fetch;
    try {
      return await body();
    } finally {
      globalThis.fetch = realFetch;
    }
  }

  /** The listing with `change` applied to its manifest. */
  async function rewriteList(response: Response, change: (manifest: OutputManifest) => OutputManifest): Promise<Response> {
    const manifest = (await response.json()) as OutputManifest;
    return new Response(JSON.stringify(change(manifest)), { status: response.status, headers: { "content-type": "application/json" } });
  }

  /** A read answer with the relay headers of `manifest` (so that it matches a rewritten listing). */
  function withManifestHeaders(response: Response, manifest: OutputManifest, body: BodyInit | null = response.body): Response {
    const headers = new Headers(response.headers);
    headers.delete("content-length");
    headers.set(OUTPUT_HEADERS.kind, manifest.kind);
    headers.set(OUTPUT_HEADERS.totalBytes, String(manifest.totalBytes));
    headers.set(OUTPUT_HEADERS.files, String(manifest.files.length));
    headers.set(OUTPUT_HEADERS.manifestDigest, outputFilesDigest(manifest.files));
    return new Response(body, { status: response.status, headers });
  }

  /** The response with its body passed through `transform` (the headers kept). */
  function rewrite(response: Response, transform: TransformStream<Uint8Array, Uint8Array>): Response {
    return new Response(response.body!.pipeThrough(transform), { status: response.status, headers: response.headers });
  }

  before(async () => {
    // The browser SDK through the API node, the devnet's JSON-RPC as its injected-style wallet, already seeing the offer.
    market = await startRenterMarket({ name: "output-relay", apiNode: true, renterVia: "browser", renter: 7, fund: 50_000_000n });
    ({ devnet, bundles, provider, client, renter } = market);
    node = market.apiNode!;

    const bundle = await bundles.bundle({
      "run.sh": [
        'mkdir -p "$SUANLI_OUTPUT_DIR/ckpt/epoch-1"',
        'echo "loss 0.12" > "$SUANLI_OUTPUT_DIR/metrics.txt"',
        // Over the protocol's 2 MiB window: the relay acknowledges as the HTTP client reads.
        'head -c 3000000 /dev/urandom > "$SUANLI_OUTPUT_DIR/ckpt/epoch-1/model.bin"',
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
    leaseId = submitted.leaseId;
    const receipt = await client.wait(taskId);
    assert.equal(receipt.state, "succeeded");
  });
  after(async () => {
    globalThis.fetch = realFetch;
    await market?.close();
  });

  const keptDir = () => path.join(provider.daemon.config.dataDir, "outputs", `lease-${leaseId}`, "files");

  it("downloads every file into memory and verifies the digest against the signed report and the chain", async () => {
    const progress: number[] = [];
    const result = await client.downloadOutput(taskId, { onProgress: ({ bytes }) => progress.push(bytes) });
    assert.equal(result.verified, true);
    assert.equal(result.verifiedAgainst, "chain");
    assert.equal(result.snapshot, false);
    assert.deepEqual(
      result.files.map((file) => [file.path, file.size]),
      [
        ["ckpt/epoch-1/model.bin", 3_000_000],
        ["empty", 0],
        ["metrics.txt", 10],
      ],
    );
    assert.equal(new TextDecoder().decode(result.files[2]!.data), "loss 0.12\n");
    assert.equal(result.bytes, 3_000_010);
    assert.equal(result.transferred, 3_000_010);
    // The same digest as the provider's files and its on-chain report.
    assert.equal(result.digest, await digestOutputDir(keptDir()));
    const receipt = await client.wait(taskId);
    assert.equal(receipt.completion?.outputDigest, result.digest);
    assert.equal(progress.at(-1), 3_000_010);
  });

  it("resumes a read that broke mid-way from where it stopped, and still verifies", async () => {
    let cut = 0;
    const result = await withReads(
      (response, call) => {
        if (call > 0) return response;
        // The first read dies after 1 MB (a dropped connection).
        let passed = 0;
        return rewrite(
          response,
          new TransformStream({
            transform(chunk, controller) {
              if (passed + chunk.length > 1_000_000) {
                controller.enqueue(chunk.subarray(0, 1_000_000 - passed));
                cut = 1_000_000;
                controller.error(new TypeError("connection reset"));
                return;
              }
              passed += chunk.length;
              controller.enqueue(chunk);
            },
          }),
        );
      },
      () => client.downloadOutput(taskId),
    );
    assert.equal(cut, 1_000_000, "the first read was cut");
    assert.equal(result.verified, true);
    assert.equal(result.transferred, 3_000_010);
  });

  it("a copy altered on the way (a byte flipped by the relay) fails verification, naming both digests", async () => {
    const honest = (await client.downloadOutput(taskId)).digest;
    let flipped = false;
    await assert.rejects(
      withReads(
        (response) =>
          rewrite(
            response,
            new TransformStream({
              transform(chunk, controller) {
                const copy = chunk.slice();
                if (!flipped && copy.length > 0) {
                  copy[0]! ^= 0xff;
                  flipped = true;
                }
                controller.enqueue(copy);
              },
            }),
          ),
        () => client.downloadOutput(taskId),
      ),
      (error: Error & { expected?: string; actual?: string }) => {
        assert.equal(error.name, "OutputDigestMismatchError");
        assert.equal(error.expected, honest);
        assert.notEqual(error.actual, honest);
        assert.ok(error.message.includes(honest) && error.message.includes(error.actual!), error.message);
        return true;
      },
    );
    assert.ok(flipped);
  });

  it("a relay that calls the finished output a snapshot and flips a byte: the SDK verifies anyway (the task is over) and hands back nothing", async () => {
    const receipt = await client.wait(taskId);
    let flipped = false;
    const snapshotOf = (manifest: OutputManifest): OutputManifest => ({ ...manifest, kind: "snapshot", expiresAt: null });
    let listed: OutputManifest | undefined;
    await assert.rejects(
      withReads(
        (response) => {
          const flip = new TransformStream<Uint8Array, Uint8Array>({
            transform(chunk, controller) {
              const copy = chunk.slice();
              if (!flipped && copy.length > 0) {
                copy[0]! ^= 0xff;
                flipped = true;
              }
              controller.enqueue(copy);
            },
          });
          return withManifestHeaders(response, listed!, response.body!.pipeThrough(flip));
        },
        () => client.downloadOutput(taskId),
        (response) =>
          rewriteList(response, (manifest) => {
            listed = snapshotOf(manifest);
            return listed;
          }),
      ),
      (error: Error & { expected?: string }) => {
        assert.equal(error.name, "OutputDigestMismatchError", error.message);
        assert.equal(error.expected, receipt.completion!.outputDigest);
        return true;
      },
    );
    assert.ok(flipped);
  });

  it("a relay that lists sizes the bytes do not back: refused when they do not add up; never allocated by a claimed size", async () => {
    // Sizes that do not add up to totalBytes (5 GB listed as 10 bytes): refused before any read.
    await assert.rejects(
      withReads(
        (response) => response,
        () => client.downloadOutput(taskId),
        (response) => rewriteList(response, (manifest) => ({ ...manifest, files: [{ path: "model.bin", size: 5_000_000_000 }], totalBytes: 10 })),
      ),
      { name: "OutputDownloadError", message: /files hold 5000000000 bytes, it says 10/ },
    );

    // A 256 MiB file claimed (consistent, under maxBytes) while only the real 3 MB arrive: the
    // SDK's memory grows with what arrives, not by the claim (before: one 256 MiB buffer up front).
    const claimed = 256 * 1024 * 1024;
    let listed: OutputManifest | undefined;
    const baseline = process.memoryUsage().arrayBuffers;
    let peak = baseline;
    const sample = () => void (peak = Math.max(peak, process.memoryUsage().arrayBuffers));
    const sampler = setInterval(sample, 2);
    try {
      await assert.rejects(
        withReads(
          (response) => withManifestHeaders(response, listed!),
          () => client.downloadOutput(taskId, { onProgress: sample }),
          (response) =>
            rewriteList(response, (manifest) => {
              listed = { ...manifest, files: [{ path: manifest.files[0]!.path, size: claimed }], totalBytes: claimed };
              return listed;
            }),
        ),
        (error: Error) => error.name !== "AssertionError",
      );
    } finally {
      clearInterval(sampler);
    }
    sample();
    assert.ok(peak - baseline < 64 * 1024 * 1024, `array buffers grew by ${peak - baseline} bytes for a 256 MiB claim`);
  });

  it("refuses another wallet's signature, a widened request and an output over maxBytes", async () => {
    const url = `${node.api!.url}/v1/leases/${leaseId}/output/read`;
    const domain = suanliDomain(devnet.deployment.chainId, devnet.deployment.contracts.market as `0x${string}`);
    const stranger = devnetAccount(8);
    const sign = (account: typeof stranger, params: Record<string, unknown>) =>
      signLeaseRequest((p) => account.signTypedData(p), domain, { leaseId, provider: provider.peer.address, action: "output", body: params });
    const post = (body: unknown) =>
      realFetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v)),
      });

    const byStranger = await post({ auth: await sign(stranger, { op: "read", fromOffset: 0 }), params: { op: "read", fromOffset: 0 } });
    assert.equal(byStranger.status, 401);
    assert.equal(((await byStranger.json()) as { error: { name: string } }).error.name, "InvalidSignatureError");

    // The renter signed a read from model.bin's byte 2,000,000; the relay (or anyone) asking from 0 instead is refused by the provider.
    const narrow = { op: "read", fromPath: "ckpt/epoch-1/model.bin", fromOffset: 2_000_000 };
    const auth = await sign(renter, narrow);
    assert.equal(auth.request.bodyHash, leaseRequestBodyHash("output", narrow));
    const widened = await post({ auth, params: { ...narrow, fromOffset: 0 } });
    // The provider refuses it by name (issue #40 item 6: a refusal keeps its meaning, 403, not a bad gateway).
    assert.equal(widened.status, 403);
    assert.match(((await widened.json()) as { error: { message: string } }).error.message, /bodyHash|body hash/i);
    // The request as signed: exactly the bytes from the offset on.
    const asSigned = await post({ auth: await sign(renter, narrow), params: narrow });
    assert.equal(asSigned.status, 200);
    assert.equal(asSigned.headers.get("content-length"), String(1_000_010));
    const bytes = new Uint8Array(await asSigned.arrayBuffer());
    assert.equal(bytes.length, 1_000_010);
    assert.equal(new TextDecoder().decode(bytes.subarray(-10)), "loss 0.12\n");

    await assert.rejects(client.downloadOutput(taskId, { maxBytes: 1_000_000 }), { name: "OutputDownloadError", message: /3000010 bytes, over maxBytes \(1000000\)/ });
    await assert.rejects(client.downloadOutput(taskId, { dir: "/tmp/never" }), { name: "OutputDownloadError", message: /`dir` needs the Node SDK/ });
  });

  it("a node relays no output over its api.output.maxBytes (413 OutputTooLargeError)", async () => {
    const small = await startTestDaemon(devnet, { p2p: { bootstrap: [provider.peer.addr] }, api: { enabled: true, host: "127.0.0.1", port: 0, output: { maxBytes: 1_000_000 } } });
    try {
      const params = { op: "list" };
      const domain = suanliDomain(devnet.deployment.chainId, devnet.deployment.contracts.market as `0x${string}`);
      const auth = await signLeaseRequest((p) => renter.signTypedData(p), domain, { leaseId, provider: provider.peer.address, action: "output", body: params });
      const response = await realFetch(`${small.api!.url}/v1/leases/${leaseId}/output/list`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ auth, params }, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v)),
      });
      assert.equal(response.status, 413);
      const answer = (await response.json()) as { error: { name: string; message: string } };
      assert.equal(answer.error.name, "OutputTooLargeError");
      assert.match(answer.error.message, /3000010 bytes; this node relays at most 1000000/);
    } finally {
      await small.close();
    }
  });
});
