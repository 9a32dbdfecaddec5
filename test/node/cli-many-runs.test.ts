/**
 * Issue #40 item 12: a renter behind one address (polling `suanli status`, or several renters
 * behind one NAT) was locked out after about a dozen CLI runs: each run was a new gossip peer from
 * the same IP, gossipsub's IP-colocation penalty (weight -5 per peer over 10, squared, kept an hour)
 * pushed the address under the graylist threshold, the node's gater refused it, and the CLI said
 * "No live offers match" with exit 0.
 *
 * Now a CLI command is never a gossip peer (it pulls the book with offers-sync), and a refused
 * connection is reported as such with a non-zero exit. The node here does NOT whitelist
 * 127.0.0.1 for colocation, as a public node would not whitelist a renter's address.
 */
import assert from "node:assert/strict";
import { devnetPrivateKey } from "../../common/devnet.js";
import { peerGuardOf } from "../../common/p2p/host.js";
import { NetworkUnreachableError } from "../../sdk/errors.js";
import { startP2pFeed } from "../../sdk/internal/feed.js";
import { lastJson, runCli } from "../support/cli.js";
import { startTestDaemon } from "../support/daemons.js";
import { registerProvider, startDevnet, type Devnet } from "../support/devnet.js";

const ZERO32 = `0x${"0".repeat(64)}` as const;
const RUNS = 50;

describe("many short-lived CLI clients through one node from one address (issue #40 item 12)", function () {
  this.timeout(300_000);
  let devnet: Devnet;
  let node: Awaited<ReturnType<typeof startTestDaemon>>;
  let addr: string;

  before(async () => {
    devnet = await startDevnet();
    node = await startTestDaemon(
      devnet,
      { chain: { privateKey: devnetPrivateKey(1) }, p2p: { gossip: { heartbeatIntervalMs: 200, ipColocationWhitelist: [] } } },
      { publishesOffers: true },
    );
    const [machineId] = await registerProvider(devnet, await devnet.wallet(1), {
      peerId: node.p2p.host.peerId.toString(),
      stake: 1_000_000_000n,
      machines: [{ model: "H100-80GB-SXM", units: 8, vramMiB: 81_559, region: "us-east" }],
    });
    await node.offers.publisher!.set({
      machine: { machineId: machineId!, model: "H100-80GB-SXM", units: 8, vramMiB: 81_559, interconnect: "nvlink", region: "us-east", cluster: ZERO32 },
      terms: { pricePerUnitSecond: 900n, minDuration: 60, maxDuration: 86_400, collateralBps: 2_000, startWindow: 120 },
      capacity: { freeUnits: 8 },
    });
    addr = node.p2p.host.getMultiaddrs()[0]!.toString();
  });
  after(async () => {
    await node?.close();
    await devnet?.close();
  });

  it(`${RUNS} clients in a row, each set up as one CLI command is, all see the offer`, async () => {
    const registry = devnet.deployment.contracts.registry!;
    const market = devnet.deployment.contracts.market!;
    for (let run = 0; run < RUNS; run++) {
      // What `suanli offers` starts (node/cli/commands/renter.ts withClient → createClient with gossip: false).
      const feed = await startP2pFeed({
        chainId: devnet.deployment.chainId,
        market,
        registry,
        publicClient: devnet.admin.publicClient,
        bootstrap: [addr],
        gossip: false,
      });
      try {
        await feed.ready(10_000);
        assert.equal(feed.messages().length, 1, `run ${run + 1} of ${RUNS} sees the node's offer`);
      } finally {
        await feed.close();
      }
    }
    const guard = peerGuardOf(node.p2p.host)!;
    assert.equal(guard.refusesAddress("127.0.0.1"), false, "nothing is held against the renters' address");
  });

  it("the CLI itself: its runs list the offer (exit 0), and a refused address is an error with exit 1, not an empty book", async () => {
    const base = ["--rpc-url", devnet.rpcUrl, "--deployments", devnet.deploymentsDir, "--bootstrap", addr, "--json"];
    for (let run = 0; run < 3; run++) {
      const result = await runCli(["offers", ...base]);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(lastJson<{ offers: unknown[] }>(result.stdout).offers.length, 1);
    }
    // The node now refuses this address, as after a real offence (the gater's memory).
    peerGuardOf(node.p2p.host)!.penalize("some-peer", "127.0.0.1", -1_000);
    assert.equal(peerGuardOf(node.p2p.host)!.refusesAddress("127.0.0.1"), true, "the node does not whitelist 127.0.0.1");
    const refused = await runCli(["offers", ...base]);
    assert.equal(refused.code, 1, refused.stdout + refused.stderr);
    assert.match(refused.stderr, /No bootstrap node could be reached/);
    assert.ok(refused.stderr.includes(addr), `names the address it tried: ${refused.stderr}`);
  });

  it("an SDK client whose bootstrap node is not running gets NetworkUnreachableError naming it", async () => {
    const registry = devnet.deployment.contracts.registry!;
    const market = devnet.deployment.contracts.market!;
    const dead = `/ip4/127.0.0.1/tcp/1/p2p/${node.p2p.host.peerId.toString()}`;
    const feed = await startP2pFeed({ chainId: devnet.deployment.chainId, market, registry, publicClient: devnet.admin.publicClient, bootstrap: [dead], gossip: false });
    try {
      await assert.rejects(feed.ready(3_000), (error: unknown) => {
        assert.ok(error instanceof NetworkUnreachableError);
        assert.equal(error.attempts.length, 1);
        assert.equal(error.attempts[0]!.addr, dead);
        return true;
      });
    } finally {
      await feed.close();
    }
  });
});
