/**
 * The CLI checks its own flags before it reaches the chain or the network (issue #40 item 13):
 * every bad flag is reported at once, exit 2, and nothing connects. The "chain" here is a TCP
 * listener that counts connections: a command that passed its checks would reach it.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import type { AddressInfo } from "node:net";
import { runCli } from "../support/cli.js";

describe("suanli CLI: flags checked before connecting", function () {
  this.timeout(60_000);
  let server: Server;
  let connections = 0;
  let rpcUrl: string;

  before(async () => {
    server = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    rpcUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
  });
  beforeEach(() => (connections = 0));

  const task = ["--gpu", "A100", "--max-price", "2", "--bundle", "http://127.0.0.1:9/x.tar.gz", "--sha256", "ab".repeat(32)];

  it("reports every bad flag of submit at once, exit 2, without reaching the chain", async () => {
    const result = await runCli(["submit", ...task, "--rpc-url", rpcUrl, "--devnet-account", "5", "--duration", "ten", "--count", "x", "--env", "NOEQUALS", "--", "true"]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /3 problems with the command line/);
    assert.match(result.stderr, /--duration must be a number, got "ten"/);
    assert.match(result.stderr, /--count must be a number, got "x"/);
    assert.match(result.stderr, /--env takes NAME=VALUE, got "NOEQUALS"/);
    assert.equal(connections, 0, "nothing was reached");
  });

  it("--input CID:/data/name is checked with the task's other fields: a bad CID and a mount outside /data are named, exit 2, nothing reached", async () => {
    const result = await runCli(["submit", ...task, "--rpc-url", rpcUrl, "--devnet-account", "5", "--duration", "60", "--input", "not-a-cid:/etc/passwd", "--", "true"]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /inputs\.0\.cid: expected a CID/);
    assert.match(result.stderr, /inputs\.0\.mount: a mount is a path under \/data/);
    assert.equal(connections, 0, "nothing was reached");
  });

  it("checkpoints --pin-on that is not a node URL is a bad flag (exit 2) before anything is reached", async () => {
    const result = await runCli(["checkpoints", "some-task", "--rpc-url", rpcUrl, "--devnet-account", "5", "--pin-on", "127.0.0.1:8080"]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /--pin-on must be a node's HTTP API URL like http:\/\/127\.0\.0\.1:8080, got "127\.0\.0\.1:8080"/);
    assert.equal(connections, 0, "nothing was reached");
  });

  it("wait and submit --pin-checkpoints-on that is not a node URL is a bad flag (exit 2), reported with the others, before anything is reached", async () => {
    const waited = await runCli(["wait", "some-task", "--rpc-url", rpcUrl, "--devnet-account", "5", "--pin-checkpoints-on", "127.0.0.1:8080"]);
    assert.equal(waited.code, 2, waited.stderr);
    assert.match(waited.stderr, /--pin-checkpoints-on must be a node's HTTP API URL like http:\/\/127\.0\.0\.1:8080, got "127\.0\.0\.1:8080"/);
    const submitted = await runCli(["submit", ...task, "--rpc-url", rpcUrl, "--devnet-account", "5", "--duration", "ten", "--pin-checkpoints-on", "node", "--wait", "--", "true"]);
    assert.equal(submitted.code, 2, submitted.stderr);
    assert.match(submitted.stderr, /2 problems with the command line/);
    assert.match(submitted.stderr, /--pin-checkpoints-on must be a node's HTTP API URL/);
    assert.equal(connections, 0, "nothing was reached");
  });

  it("--rpc-url not-a-url is a bad flag (exit 2), reported with the others, not an unreachable chain", async () => {
    const result = await runCli([
      "submit",
      ...task,
      "--rpc-url",
      "not-a-url",
      "--bootstrap",
      "not/a/multiaddr",
      "--key",
      `0x${"1".repeat(64)}`,
      "--devnet-account",
      "2",
      "--duration",
      "-5",
      "--",
      "true",
    ]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /--rpc-url must be an http\(s\):\/\/ or ws\(s\):\/\/ URL .*got "not-a-url"/);
    assert.match(result.stderr, /--bootstrap "not\/a\/multiaddr" is not a multiaddr/);
    assert.match(result.stderr, /--devnet-account and --key both give a wallet: pass one of them/);
    assert.match(result.stderr, /duration/, "the SDK's own check of the task is part of the same report");
    assert.doesNotMatch(result.stderr, /ECONNREFUSED|fetch failed|HTTP request failed/);
  });

  it("a bad SUANLI_KEY is named as SUANLI_KEY, and its value is not echoed", async () => {
    for (const args of [
      ["status", "t-1", "--rpc-url", rpcUrl],
      ["wallet", "balance", "--rpc-url", rpcUrl],
    ]) {
      const result = await runCli(args, { env: { SUANLI_KEY: "nonsense-secret" } });
      assert.equal(result.code, 2, `${args.join(" ")}: ${result.stderr}`);
      assert.match(result.stderr, /SUANLI_KEY \(environment\) must be 0x followed by 64 hex digits/);
      assert.doesNotMatch(result.stderr, /nonsense-secret/);
    }
    assert.equal(connections, 0, "nothing was reached");
  });

  it("answers a bad --duration before any connection, in about the time the CLI takes to start", async () => {
    const started = Date.now();
    const result = await runCli(["submit", ...task, "--rpc-url", rpcUrl, "--devnet-account", "5", "--duration", "soon", "--", "true"]);
    assert.equal(result.code, 2, result.stderr);
    assert.equal(connections, 0);
    // The same start-up with a good command line goes on to the chain (the listener counts it):
    // the check above is what stopped the other one.
    const good = await runCli(["submit", ...task, "--rpc-url", rpcUrl, "--devnet-account", "5", "--duration", "600", "--", "true"]);
    assert.notEqual(good.code, 0);
    assert.ok(connections > 0, `a good command line reaches the chain; took ${Date.now() - started} ms`);
  });
});
