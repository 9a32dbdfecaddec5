/**
 * Renter-supplied bundle URLs are fetched under the provider's policy: no file:, no loopback,
 * link-local or private addresses unless allow-listed, every redirect checked again, and errors
 * that never tell the renter what a private service answered. Real HTTP servers on 127.0.0.x.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { spawn } from "node:child_process";
import { createServer, type Server } from "node:http";
import { createServer as createTcpServer } from "node:net";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { fetchBundle, UNREACHABLE } from "../../node/provider/runtime/bundle.js";
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

  it("treats every address of the host's own interfaces as the host: a bundle URL on the provider's public IPv4 or IPv6 address is refused (issue #33 item 10)", async () => {
    // A network namespace of the test's own (unprivileged: a user namespace maps us to root in
    // it) where a veth interface carries public addresses, as a provider's NIC does, and a
    // service listens on them; the fetches run there (test/node/fixtures/own-address-fetch.ts).
    const [v4, v6, v4Later] = ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "93.184.216.35"];
    const setup = [
      "ip link set lo up",
      "ip link add v0 type veth peer name v1",
      `ip addr add ${v4}/32 dev v0`,
      `ip -6 addr add ${v6}/128 dev v0 nodad`,
      "ip link set v0 up",
      "ip link set v1 up",
      'exec "$@"',
    ].join(" && ");
    const fixture = path.resolve("test/node/fixtures/own-address-fetch.ts");
    const child = spawn("unshare", ["--user", "--map-root-user", "--net", "sh", "-c", setup, "sh", process.execPath, "--import", "tsx", fixture, v4, v6, v4Later, "v0"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    assert.equal(code, 0, stderr);
    const results = JSON.parse(stdout.trim().split("\n").at(-1)!) as Record<string, { outcome: string; requests: number } | string | number>;
    const refusedBeforeAnyRequest = { outcome: "FetchRefusedError", requests: 0 };
    assert.equal(results.direct, 200, "the host service answers on the public address");
    assert.deepEqual(results.ipv4, refusedBeforeAnyRequest, "the host's public IPv4 address");
    assert.deepEqual(results.ipv6, refusedBeforeAnyRequest, "the host's public IPv6 address");
    assert.deepEqual(results.ipv4Mapped, refusedBeforeAnyRequest, "the IPv4 address written as IPv4-mapped IPv6");
    assert.equal(results.lookupError, "FetchRefusedError", "a name resolving to the host's address is refused in the connection's own lookup");
    assert.deepEqual(results.wideAllowList, refusedBeforeAnyRequest, "an allow-listed range around the host's address does not open it");
    assert.deepEqual(results.exactAllowList, { outcome: "fetched", requests: 1 }, "only an entry naming the address itself does");
    assert.equal(results.image, "FetchRefusedError", "a registry on the host's address is refused too");
    assert.deepEqual(results.later, refusedBeforeAnyRequest, "an address added while the node runs is the host's at once");
  });

  it("tells the renter the same for a closed port, an open port that is no web server, a 404, a 500, a silent server and an unknown host; a digest mismatch without the served digest", async () => {
    const allow = { allowNetworks: ["127.0.0.1/32"] };
    const closedPort = await new Promise<number>((resolve) => {
      const probe = createTcpServer().listen(0, "127.0.0.1", () => {
        const port = (probe.address() as AddressInfo).port;
        probe.close(() => resolve(port));
      });
    });
    // An SSH-like service: answers a banner, then hangs up.
    const banner = createTcpServer((socket) => socket.resume().end("SSH-2.0-OpenSSH_9.2p1 INTERNAL-SECRET-BANNER\r\n"));
    // A service that reads the request and never answers (reading, it sees the client hang up).
    const silent = createTcpServer((socket) => socket.resume());
    const web = createServer((req, res) => {
      if (req.url === "/missing") return void res.writeHead(404).end("INTERNAL-SECRET-404");
      if (req.url === "/other") return void res.writeHead(200).end("INTERNAL-SECRET-CONTENT");
      res.writeHead(500).end("INTERNAL-SECRET-ANSWER");
    });
    for (const server of [banner, silent, web]) await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const at = (server: { address(): unknown }, pathname: string) => `http://127.0.0.1:${(server.address() as AddressInfo).port}${pathname}`;
    try {
      const urls = [
        `http://127.0.0.1:${closedPort}/b.tgz`,
        at(banner, "/b.tgz"),
        at(web, "/missing"),
        at(web, "/broken"),
        at(silent, "/b.tgz"),
        "http://no-such-host.invalid/b.tgz",
      ];
      const seen = new Set<string>();
      for (const url of urls) {
        const error = await fetchBundle({ url, sha256, destFile: path.join(dir, `d-${Math.random()}`), maxBytes: 1 << 20, timeoutMs: 1_000, policy: allow }).then(
          () => assert.fail(`${url} was fetched`),
          (caught: Error & { shortMessage: string; details?: string }) => caught,
        );
        assert.equal(error.name, "BundleFetchError", url);
        assert.equal(error.shortMessage, `Cannot fetch bundle ${new URL(url).origin}${new URL(url).pathname}: ${UNREACHABLE}`, url);
        assert.doesNotMatch(error.message, /SECRET|ECONNREFUSED|ENOTFOUND|timed out|\b(404|500)\b|HTTP/, url);
        seen.add(error.message.replace(url, "<url>").replace(new URL(url).origin + new URL(url).pathname, "<url>"));
      }
      assert.equal(seen.size, 1, `one text for every failure:\n${[...seen].join("\n")}`);
      const served = createHash("sha256").update("INTERNAL-SECRET-CONTENT").digest("hex");
      await assert.rejects(
        fetchBundle({ url: at(web, "/other"), sha256, destFile: path.join(dir, `d-${Math.random()}`), maxBytes: 1 << 20, timeoutMs: 1_000, policy: allow }),
        (error: Error) => {
          assert.equal(error.name, "BundleDigestMismatchError");
          assert.ok(error.message.includes(sha256), "names the digest the task asked for");
          assert.ok(!error.message.includes(served) && !("actual" in error), "never the digest of what was served");
          return true;
        },
      );
    } finally {
      for (const server of [banner, silent, web]) {
        if ("closeAllConnections" in server) server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
    }
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
