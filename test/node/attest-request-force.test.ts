/**
 * Issue #22, item 5: the attestor section as a user meets it. An attestor that cannot reach the
 * provider says so ("unreachable", at once) instead of a late commit after the challenge window;
 * `--force` no longer skips a failure's backoff (issue 35 item 3: forcing every minute bought a
 * cheat 1,440 tries a day) and runs at most once a minute; `attestor start` takes config flags.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { multiaddr } from "@multiformats/multiaddr";
import { requestChallenge } from "../../common/attest/request.js";
import { devnetAccount, devnetPrivateKey } from "../../common/devnet.js";
import { createHost } from "../../common/p2p/host.js";
import { addrOf, startAttestorDaemon, startProviderWithMachine, WrongRowsRunner, type TestDaemon } from "../support/attest.js";
import { runCli } from "../support/cli.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const A100 = { model: "A100-80GB", units: 1, vramMiB: 81_920 };

describe("attestor requests: unreachable providers, --force, config flags (issue #22 item 5)", function () {
  this.timeout(180_000);
  let devnet: Devnet;
  const nodes: TestDaemon[] = [];
  before(async () => {
    devnet = await startDevnet({ attestors: [devnetAccount(7).address] });
  });
  after(async () => {
    for (const node of nodes.reverse()) await node.close().catch(() => undefined);
    await devnet?.close();
  });

  it("an attestor without a way to the provider answers unreachable, naming the fix; a forced challenge does not skip a failure's backoff, and runs at most once a minute", async () => {
    const { provider, machineId } = await startProviderWithMachine(devnet, 1, { runner: new WrongRowsRunner(), machine: A100 }, nodes);

    // No bootstrap: the attestor never sees the provider's offer, so it knows no address.
    const lonely = await startAttestorDaemon(devnet, 7, { attest: { liveness: { enabled: false }, attestor: { scheduleIntervalMs: 3_600_000 } } });
    nodes.push(lonely.daemon);
    const host = await createHost({ listen: [], dht: { enabled: false }, gossip: { enabled: false }, connections: { min: 0 } });
    try {
      const unreachable = await requestChallenge(host, multiaddr(addrOf(lonely.daemon)), { chainId: devnet.deployment.chainId, machineId: machineId! }, { timeoutMs: 60_000 });
      assert.equal(unreachable.outcome, "error");
      assert.equal(unreachable.outcome === "error" && unreachable.reason, "unreachable");
      assert.match(unreachable.outcome === "error" ? unreachable.detail : "", /no address known for the provider's node .*p2p\.bootstrap/);
      await lonely.daemon.close();
      nodes.pop();

      // With a way to the provider: a real challenge, which this provider fails (wrong rows).
      const attestor = await startAttestorDaemon(devnet, 7, {
        p2p: { bootstrap: [addrOf(provider.daemon)] },
        attest: { liveness: { enabled: false }, attestor: { scheduleIntervalMs: 3_600_000 } },
      });
      nodes.push(attestor.daemon);
      const target = multiaddr(addrOf(attestor.daemon));
      await waitFor("the provider's offer in the attestor's book", () => attestor.daemon.offers.book.byMachine(machineId!).length > 0, { timeoutMs: 30_000 });
      const first = await requestChallenge(host, target, { chainId: devnet.deployment.chainId, machineId: machineId! }, { timeoutMs: 60_000 });
      assert.equal(first.outcome, "fail");
      assert.equal(first.outcome === "fail" && first.reason, "wrong_rows");

      // Within the backoff, a plain request gets the recorded failure back...
      const cached = await requestChallenge(host, target, { chainId: devnet.deployment.chainId, machineId: machineId! }, { timeoutMs: 60_000 });
      assert.equal(cached.outcome === "fail" && cached.cached, true);
      // ...a forced one is refused until the backoff ends (the first wait, 300 s by default), and runs nothing...
      const forced = await requestChallenge(host, target, { chainId: devnet.deployment.chainId, machineId: machineId!, force: true }, { timeoutMs: 60_000 });
      assert.equal(forced.outcome, "error");
      assert.equal(forced.outcome === "error" && forced.reason, "backoff");
      assert.match(forced.outcome === "error" ? forced.detail : "", /holds 1 failed challenge\(s\) in this attestor's history \(latest: wrong_rows\)/);
      const failedAt = (await attestor.attestor.results.latest(machineId!))!.finishedAtMs;
      assert.equal(forced.outcome === "error" && forced.retryAfter, Math.ceil((failedAt + 300_000) / 1000));
      const results = await attestor.attestor.results.history(machineId!);
      assert.equal(results.length, 1, "one challenge ran");
      // ...and a second forced one within a minute is refused with when to retry.
      const again = await requestChallenge(host, target, { chainId: devnet.deployment.chainId, machineId: machineId!, force: true }, { timeoutMs: 60_000 });
      assert.equal(again.outcome, "error");
      assert.equal(again.outcome === "error" && again.reason, "backoff");
      assert.ok(again.outcome === "error" && again.retryAfter !== null && again.retryAfter > Date.now() / 1000);
      // The CLI says so in one true line, exit 2 as the README's exit-code table has it for a
      // refused request (issue #40 item 5), not a second "has no attestation" line and exit 1.
      const cli = await runCli([
        "attestor",
        "challenge",
        "--machine",
        String(machineId),
        "--attestor",
        addrOf(attestor.daemon),
        "--force",
        "--rpc-url",
        devnet.rpcUrl,
        "--deployments",
        devnet.deploymentsDir,
      ]);
      assert.equal(cli.code, 2, cli.stderr);
      assert.equal(cli.stdout, "");
      const lines = cli.stderr
        .trim()
        .split("\n")
        .filter((line) => !line.startsWith("Asking "));
      assert.equal(lines.length, 1, cli.stderr);
      assert.match(lines[0]!, /^Error: Not challenged: machine \d+ had a forced challenge \d+ s ago; .*once a minute per machine; try again after \d{4}-/);
      assert.doesNotMatch(cli.stderr, /has no attestation/);
    } finally {
      await host.stop();
    }
  });

  it("attestor start takes config keys as flags (--p2p.bootstrap), like every node command", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-attestor-flags-"));
    try {
      const config = path.join(dir, "attestor.json");
      await writeFile(
        config,
        JSON.stringify({
          dataDir: path.join(dir, "node"),
          chain: { rpcUrl: devnet.rpcUrl, deploymentsDir: devnet.deploymentsDir, privateKey: devnetPrivateKey(7) },
          p2p: { listen: ["/ip4/127.0.0.1/tcp/0"] },
        }),
      );
      // The flag reaches the config: a malformed value is refused naming the key and the flag.
      const bad = await runCli(["attestor", "start", "--config", config, "--p2p.bootstrap", "not-a-multiaddr"]);
      assert.equal(bad.code, 2, bad.stderr);
      assert.match(bad.stderr, /p2p\.bootstrap/);
      assert.doesNotMatch(bad.stderr, /unknown option/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
