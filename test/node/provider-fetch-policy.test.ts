/**
 * Renter-supplied bundle URLs are fetched under the provider's policy: no file:, no loopback,
 * link-local or private addresses unless allow-listed, every redirect checked again, and errors
 * that never tell the renter what a private service answered. Real HTTP servers on 127.0.0.x.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { fetchBundle } from "../../node/provider/runtime/bundle.js";
import { checkImageReference, compileFetchPolicy } from "../../node/provider/runtime/fetch-policy.js";
import { checkAddress, parseCidr } from "../../node/provider/runtime/network-policy.js";
import { providerOptionsSchema } from "../../node/provider/options.js";

describe("provider fetch policy (bundle URLs)", function () {
  this.timeout(30_000);
  let dir: string;
  let internal: Server;
  let other: Server;
  let internalUrl: string;
  let otherUrl: string;
  const bundleBytes = Buffer.from("bundle-bytes");
  const sha256 = createHash("sha256").update(bundleBytes).digest("hex");
  let requestsToOther = 0;

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-fetch-"));
    // A "private service" on loopback: it answers with something a renter must never see.
    internal = createServer((req, res) => {
      if (req.url === "/bundle") return void res.writeHead(200, { "content-length": bundleBytes.length }).end(bundleBytes);
      if (req.url?.startsWith("/redirect?to=")) return void res.writeHead(302, { location: decodeURIComponent(req.url.slice("/redirect?to=".length)) }).end();
      if (req.url === "/loop") return void res.writeHead(302, { location: "/loop" }).end();
      res.writeHead(500).end("INTERNAL-SECRET-ANSWER");
    });
    await new Promise<void>((resolve) => internal.listen(0, "127.0.0.1", resolve));
    internalUrl = `http://127.0.0.1:${(internal.address() as AddressInfo).port}`;
    // A second service on another loopback address, not allow-listed.
    other = createServer((_req, res) => {
      requestsToOther++;
      res.end("OTHER-SECRET");
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.2", resolve));
    otherUrl = `http://127.0.0.2:${(other.address() as AddressInfo).port}`;
  });

  after(async () => {
    for (const server of [internal, other]) await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  });

  const fetchTo = (url: string, policy?: { allowFileUrls?: boolean; allowNetworks?: string[] }) =>
    fetchBundle({ url, sha256, destFile: path.join(dir, `dest-${Math.random()}`), maxBytes: 1 << 20, timeoutMs: 5_000, policy });

  /** The renter-facing error: named FetchRefusedError, says the policy refused, leaks nothing the service said. */
  const refused = (error: unknown) => {
    const err = error as Error;
    assert.equal(err.name, "FetchRefusedError", err.message);
    assert.match(err.message, /refused by the provider's policy/);
    assert.doesNotMatch(err.message, /SECRET|\b500\b/);
    return true;
  };

  it("the default config refuses file: URLs and private addresses", () => {
    const options = providerOptionsSchema.parse({});
    assert.equal(options.fetch.allowFileUrls, false);
    assert.deepEqual(options.fetch.allowNetworks, []);
    assert.throws(() => providerOptionsSchema.parse({ fetch: { allowNetworks: ["not-a-range"] } }), /CIDR/);
  });

  it("refuses file: URLs unless the operator enables them", async () => {
    const file = path.join(dir, "bundle.tar.gz");
    await writeFile(file, bundleBytes);
    await assert.rejects(fetchTo(pathToFileURL(file).href), refused);
    await assert.rejects(fetchTo("file:///etc/passwd"), refused);
    assert.deepEqual(await fetchTo(pathToFileURL(file).href, { allowFileUrls: true }), { bytes: bundleBytes.length });
  });

  it("refuses loopback, link-local and private addresses, by literal or by name, before any request", async () => {
    const port = new URL(internalUrl).port;
    for (const url of [
      `${internalUrl}/bundle`,
      `http://localhost:${port}/bundle`,
      `http://[::1]:${port}/x`,
      "http://169.254.169.254/latest/meta-data/",
      "http://10.0.0.1/x",
      "http://[::ffff:127.0.0.1]/x",
    ]) {
      await assert.rejects(fetchTo(url), refused, url);
    }
    const before = requestsToOther;
    await assert.rejects(fetchTo(`${otherUrl}/x`), refused);
    assert.equal(requestsToOther, before, "nothing was sent to the refused address");
  });

  it("fetches from an allow-listed range, and re-checks every redirect", async () => {
    const allow = { allowNetworks: ["127.0.0.1/32"] };
    assert.deepEqual(await fetchTo(`${internalUrl}/bundle`, allow), { bytes: bundleBytes.length });
    // Redirect within the allowed address: followed.
    assert.deepEqual(await fetchTo(`${internalUrl}/redirect?to=${encodeURIComponent("/bundle")}`, allow), { bytes: bundleBytes.length });
    // Redirect to an address outside the allow-list: refused, nothing sent there.
    const before = requestsToOther;
    await assert.rejects(fetchTo(`${internalUrl}/redirect?to=${encodeURIComponent(`${otherUrl}/x`)}`, allow), refused);
    await assert.rejects(fetchTo(`${internalUrl}/redirect?to=${encodeURIComponent("http://169.254.169.254/latest/meta-data/")}`, allow), refused);
    assert.equal(requestsToOther, before);
    // By name, the check runs inside the connection's own lookup: an allow-list of another
    // address refuses "localhost" on what it resolves to.
    await assert.rejects(fetchTo(`http://localhost:${new URL(otherUrl).port}/x`, { allowNetworks: ["127.0.0.2/32"] }), refused);
    // Redirect to a file: URL, even when file: URLs are enabled for direct use.
    await assert.rejects(fetchTo(`${internalUrl}/redirect?to=${encodeURIComponent("file:///etc/passwd")}`, { ...allow, allowFileUrls: true }), refused);
    // Endless redirects stop.
    await assert.rejects(fetchTo(`${internalUrl}/loop`, allow), (error: Error) => refused(error) && /redirects/.test(error.message));
  });

  it("classifies addresses with the unwrapped IPv4 of mapped IPv6 and honours allow-listed ranges", () => {
    for (const address of [
      "127.0.0.1",
      "10.1.2.3",
      "172.16.0.1",
      "192.168.0.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "::1",
      "fe80::1",
      "fd00::1",
      "::ffff:10.0.0.1",
      "224.0.0.1",
      "198.51.100.7",
    ]) {
      assert.equal(checkAddress(address).allowed, false, address);
    }
    for (const address of ["8.8.8.8", "1.1.1.1", "2606:4700::1111"]) assert.equal(checkAddress(address).allowed, true, address);
    assert.equal(checkAddress("10.20.1.1", [parseCidr("10.20.0.0/16")]).allowed, true);
    assert.equal(checkAddress("::ffff:10.20.1.1", [parseCidr("10.20.0.0/16")]).allowed, true);
    assert.equal(checkAddress("10.21.1.1", [parseCidr("10.20.0.0/16")]).allowed, false);
  });

  it("refuses container image references that name a host transport or a private registry", () => {
    const policy = compileFetchPolicy();
    for (const image of [
      "nvcr.io/nvidia/pytorch:24.03-py3",
      "ubuntu:24.04",
      "library/busybox",
      "ghcr.io/org/img@sha256:" + "a".repeat(64),
      "registry.example.com:5000/team/img:1",
    ]) {
      assert.doesNotThrow(() => checkImageReference(image, policy), image);
    }
    for (const image of [
      "oci-archive:/var/lib/suanli/x.tar",
      "docker-archive:/etc/shadow",
      "dir:/root",
      "containers-storage:busybox",
      "docker-daemon:img:latest",
      "docker://127.0.0.1:5000/x",
      "localhost:5000/img",
      "127.0.0.1:5000/img",
      "10.0.0.7/team/img",
      "[::1]:5000/img",
      "169.254.169.254/x",
    ]) {
      assert.throws(() => checkImageReference(image, policy), refused, image);
    }
    assert.doesNotThrow(() => checkImageReference("127.0.0.1:5000/img", compileFetchPolicy({ allowNetworks: ["127.0.0.1"] })));
  });
});
