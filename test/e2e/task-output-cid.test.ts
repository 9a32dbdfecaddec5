/**
 * Outputs as a CID (issue 36, "Outputs"; docs/data.md): a real provider node with its data plane
 * on (devnet chain, libp2p on 127.0.0.1, Helia on level) pins a task's output by CID and signs
 * that CID's digest as the completion's outputDigest; the renter's SDK downloads it through
 * today's path and verifies it against the CID, and a third node (its own host, Helia and HTTP
 * API) fetches the CID over bitswap and getData verifies it. A server that alters bytes is refused.
 */
import assert from "node:assert/strict";
import { readdir, readFile, writeFile, lstat } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { outputCidOf, outputDigestOf } from "../../common/output-cid.js";
import { digestOutputDir } from "../../common/output-digest.js";
import { createApiServer, type ApiServer } from "../../node/api/server.js";
import { DataStore } from "../../node/data/store.js";
import { silentLogger } from "../../node/log/logger.js";
import { startNodeHost, type NodeHost } from "../../node/p2p/start.js";
import { DataIntegrityError, getData, OutputDigestMismatchError, type SuanliClient } from "../../sdk/index.js";
import { localCid } from "../../sdk/internal/data.js";
import { testDeployment } from "../support/api-fixture.js";
import type { BundleServer } from "../support/bundles.js";
import { InMemoryMarketSource } from "../support/memory-source.js";
import { loopbackP2pOptions } from "../support/nodes.js";
import type { TestProvider } from "../support/provider.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";

const ANSWER = "the answer is 42\n";

describe("task outputs as a CID: the completion signs the CID, any node serves it, the renter verifies it", function () {
  this.timeout(120_000);
  let work: string;
  let market: RenterMarket;
  let bundles: BundleServer;
  let provider: TestProvider;
  let client: SuanliClient;
  let third: { p2p: NodeHost; data: DataStore; api: ApiServer; url: string };
  let tamper: Server | undefined;
  let taskId: string;
  let leaseId: bigint;
  let cid: string;
  const keptDir = () => path.join(provider.daemon.config.dataDir, "outputs", `lease-${leaseId}`, "files");

  before(async () => {
    market = await startRenterMarket({ name: "output-cid", provider: { data: { enabled: true } } });
    ({ work, bundles, provider, client } = market);
    // The third node: a data node of its own (what `suanli node start` with data.enabled runs), with its HTTP API.
    const dir = path.join(work, "third");
    const p2p = await startNodeHost({ dataDir: dir, options: loopbackP2pOptions(), logger: silentLogger() });
    const data = await DataStore.open({ dataDir: dir, libp2p: p2p.host, options: { fetchTimeoutMs: 20_000 } });
    const api = await createApiServer({
      source: new InMemoryMarketSource(),
      deployment: testDeployment(),
      options: { enabled: true, port: 0, explorer: false, console: { enabled: false } },
      data: { store: data, staging: path.join(dir, "data", "staging") },
    });
    third = { p2p, data, api, url: await api.listen() };
  });
  after(async () => {
    await new Promise((resolve) => (tamper ? tamper.close(resolve) : resolve(undefined)));
    await third?.api.close();
    await third?.data.stop();
    await third?.p2p.stop();
    await market?.close();
  });

  it("the completion's digest is the output's CID: pinned on the provider, named by the receipt, rebuilt from the on-chain bytes32", async () => {
    const bundle = await bundles.bundle({
      "run.sh": [
        'mkdir -p "$SUANLI_OUTPUT_DIR/ckpt"',
        `printf '${ANSWER.trimEnd()}\\n' > "$SUANLI_OUTPUT_DIR/result.txt"`,
        'head -c 1500000 /dev/urandom > "$SUANLI_OUTPUT_DIR/ckpt/model.bin"',
        'ln -s /etc/passwd "$SUANLI_OUTPUT_DIR/link"',
        "echo done",
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
    assert.equal(receipt.completion?.verified, true, "the signed report equals the chain's");
    cid = outputCidOf(receipt.completion!.outputDigest);
    assert.equal(receipt.completion!.outputCid, cid, "the receipt names the CID the signed digest is");
    assert.equal(outputDigestOf(cid), receipt.completion!.outputDigest);
    // What the provider keeps (and serves) is exactly the CID's files: the link was left out.
    assert.deepEqual((await readdir(keptDir())).sort(), ["ckpt", "result.txt"]);
    assert.equal(await localCid(keptDir()), cid);
    assert.notEqual(await digestOutputDir(keptDir()), receipt.completion!.outputDigest, "not the older digest");
    const pinned = (await provider.daemon.data!.list()).find((entry) => entry.cid === cid);
    assert.equal(pinned?.pinned, true, "the provider pins the output");
  });

  it("today's download path still verifies, now against the CID", async () => {
    const dir = path.join(work, "download");
    const result = await client.downloadOutput(taskId, { dir });
    assert.equal(result.verified, true);
    assert.equal(result.verifiedAgainst, "chain");
    assert.equal(result.outputCid, cid);
    assert.equal(await readFile(path.join(dir, "result.txt"), "utf8"), ANSWER);
    assert.deepEqual((await readdir(dir)).sort(), ["ckpt", "result.txt"]);
  });

  it("a third node fetches the output CID from the provider over bitswap, and the renter's getData verifies it", async () => {
    const target = path.join(work, "from-third");
    const before = third.data.counters.fetchedBlocks;
    const got = await getData(cid, target, { nodeUrl: third.url, providers: [provider.peer.addr], timeoutMs: 20_000 });
    assert.equal(got.verified, true);
    assert.equal(got.cid, cid);
    assert.equal(got.kind, "folder");
    assert.ok(third.data.counters.fetchedBlocks > before, "the third node fetched the blocks");
    assert.equal(await readFile(path.join(target, "result.txt"), "utf8"), ANSWER);
    assert.deepEqual(await readFile(path.join(target, "ckpt", "model.bin")), await readFile(path.join(keptDir(), "ckpt", "model.bin")));
  });

  it("a server that alters the bytes is refused: DataIntegrityError, nothing left at the target", async () => {
    // Between the renter and the third node: the same answer with the result's bytes changed (same length).
    tamper = createServer((request, response) => {
      void (async () => {
        const upstream = await fetch(new URL(request.url!, third.url));
        const body = Buffer.from(await upstream.arrayBuffer());
        const at = body.indexOf("answer is 42");
        if (at >= 0) body.write("answer is 43", at);
        const headers: Record<string, string> = {};
        upstream.headers.forEach((value, name) => {
          if (name !== "content-length" && name !== "transfer-encoding") headers[name] = value;
        });
        response.writeHead(upstream.status, headers);
        response.end(body);
      })().catch((error: unknown) => response.destroy(error as Error));
    });
    await new Promise<void>((resolve) => tamper!.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(tamper.address() as AddressInfo).port}`;
    const target = path.join(work, "tampered");
    await assert.rejects(getData(cid, target, { nodeUrl: url }), (error: Error) => {
      assert.ok(error instanceof DataIntegrityError, `${error.name}: ${error.message}`);
      assert.equal((error as DataIntegrityError).expected, cid);
      return true;
    });
    await assert.rejects(lstat(target), { code: "ENOENT" });
  });

  it("a provider whose kept files were altered fails today's download against the CID, and nothing is left", async () => {
    await writeFile(path.join(keptDir(), "result.txt"), "the answer is 43\n");
    const dir = path.join(work, "altered");
    await assert.rejects(client.downloadOutput(taskId, { dir }), (error: Error) => error instanceof OutputDigestMismatchError);
    assert.deepEqual(await readdir(dir), [], "no file of a refused output is left");
  });
});
