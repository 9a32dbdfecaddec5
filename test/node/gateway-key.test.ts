import assert from "node:assert/strict";
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { GATEWAY_KEY_FILE, loadGatewayKey } from "../../node/gateway/key.js";
import { endToEndHeaders } from "../../node/gateway/proxy.js";

describe("gateway key and headers", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-gateway-key-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("makes the key once, readable by its owner only, and loads the same one again", async () => {
    const first = await loadGatewayKey(dir);
    assert.equal((await stat(path.join(dir, GATEWAY_KEY_FILE))).mode & 0o777, 0o600);
    assert.equal((await loadGatewayKey(dir)).address, first.address);
  });

  it("refuses a key file that holds no key, naming it", async () => {
    await writeFile(path.join(dir, GATEWAY_KEY_FILE), "not a key\n");
    await assert.rejects(loadGatewayKey(dir), (error: Error) => error.message.includes(GATEWAY_KEY_FILE) && /not a private key/.test(error.message));
  });

  it("drops hop-by-hop headers, those Connection names, and the ones asked", () => {
    const kept = endToEndHeaders(
      {
        connection: "keep-alive, x-hop",
        "keep-alive": "timeout=5",
        "x-hop": "1",
        "transfer-encoding": "chunked",
        upgrade: "h2c",
        authorization: "Bearer t",
        accept: "text/html",
        te: "trailers",
      },
      ["authorization"],
    );
    assert.deepEqual(kept, { accept: "text/html" });
  });
});
