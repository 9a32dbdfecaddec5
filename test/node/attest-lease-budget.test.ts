/**
 * Issue 35, item 8, in the real path: the running provider agent (startProviderAgent, its lease
 * table and its offers' announced share) feeds the ChallengeResponder its machines' active leases,
 * so all challenges of a leased machine, whoever sends them and for whatever reason, share one
 * budget split over the on-chain attestor set. Before, the agent passed no leases and a leased
 * GPU answered every challenge an attestor sent (requests from anyone could take up to 65 % of
 * its time with three attestors).
 */
import assert from "node:assert/strict";
import { multiaddr } from "@multiformats/multiaddr";
import { getAddress, type Hex } from "viem";
import { signChallenge } from "../../common/attest/challenge.js";
import { MAX_COMMIT_MESSAGE_BYTES, type ChallengeMessage } from "../../common/attest/messages.js";
import { recoverRefusalSigner } from "../../common/attest/refusal.js";
import { attestAnswerSchema } from "../../common/attest/wire.js";
import { devnetAccount } from "../../common/devnet.js";
import { suanliDomain } from "../../common/eip712.js";
import { ATTEST_PROTOCOL } from "../../common/p2p/protocols.js";
import { request } from "../../common/p2p/reqresp.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { TestRenter } from "../support/renter.js";
import { waitFor } from "../support/wait.js";

describe("the provider agent enforces one check budget per lease (issue 35, item 8)", function () {
  this.timeout(90_000);
  let devnet: Devnet;
  let provider: TestProvider;
  let renter: TestRenter;
  let bundles: BundleServer;
  const attestorA = devnetAccount(7);
  const attestorB = devnetAccount(8);

  before(async () => {
    devnet = await startDevnet({ attestors: [attestorA.address, attestorB.address] });
    provider = await startTestProvider(devnet, 1);
    renter = await TestRenter.start(devnet, 2);
    bundles = await startBundleServer();
  });
  after(async () => {
    await renter?.close();
    await provider?.close();
    await bundles?.close();
    await devnet?.close();
  });

  let seed = 0;
  /** A small challenge of the agent's machine signed by `attestor`, sent over libp2p: the provider's answer. */
  async function challenge(attestor: typeof attestorA) {
    const machine = provider.agent.machines[0]!;
    const domain = suanliDomain(devnet.deployment.chainId, devnet.deployment.contracts.market!);
    const nowMs = Date.now();
    const message: ChallengeMessage = await signChallenge(attestor, domain, {
      attestor: attestor.address,
      provider: provider.peer.address,
      machineId: machine.machineId,
      model: machine.model,
      units: machine.units,
      vramMiB: machine.vramMiB,
      seed: `0x${(++seed).toString(16).padStart(64, "0")}` as Hex,
      rowsPerUnit: 64,
      cols: 64,
      rounds: 2,
      issuedAtMs: nowMs,
      deadlineAtMs: nowMs + 10_000,
      cutoffAtMs: nowMs + 40_000,
    });
    const answer = await request(renter.host, multiaddr(provider.peer.addr), ATTEST_PROTOCOL, message, {
      responseSchema: attestAnswerSchema,
      timeoutMs: 45_000,
      maxMessageBytes: MAX_COMMIT_MESSAGE_BYTES,
    });
    return { message, answer: answer as { type: string; reason?: string; message?: string; usage?: { attestorMs: number; limitMs: number }; signature?: Hex } };
  }

  it("a leased machine answers each attestor's first challenge and refuses the next one lease_budget, signed by the provider; before the lease nothing was refused", async () => {
    const machineId = provider.agent.machines[0]!.machineId;
    // No lease yet: the same attestor is answered twice in a row (only the slot share bounds it).
    for (let n = 0; n < 2; n++) {
      const { answer } = await challenge(attestorA);
      assert.equal(answer.type, "commit", `before the lease: ${answer.reason}: ${answer.message}`);
    }

    const reply = await renter.reserve(provider.peer, { machineId, units: 1, duration: 600 });
    assert.equal(reply.accepted, true, reply.accepted ? "" : `${reply.reason}: ${reply.message}`);
    if (!reply.accepted) return;
    const leaseId = await renter.open(reply, { machineId, units: 1, duration: 600 });
    // The renter's task runs (the node activates the lease as it starts it).
    const bundle = await bundles.bundle({ "run.sh": "sleep 120" });
    const sent = await renter.sendTask(provider.peer, leaseId, { bundle, command: ["sh", "run.sh"] });
    assert.equal(sent.state, "accepted");
    await waitFor("the agent to hold the lease active", () => provider.agent.lease(leaseId)?.chain.status === "Active", { timeoutMs: 30_000 });

    // Each attestor's first check of the lease is never refused.
    const first = await challenge(attestorA);
    assert.equal(first.answer.type, "commit", `${first.answer.reason}: ${first.answer.message}`);
    // A's second, seconds into the lease: its part of 1 % of the lease's time over two attestors is a few ms, and it used more.
    const second = await challenge(attestorA);
    assert.equal(second.answer.type, "refused");
    assert.equal(second.answer.reason, "lease_budget", second.answer.message);
    const usage = second.answer.usage!;
    assert.ok(usage.attestorMs > 0 && usage.attestorMs >= usage.limitMs, JSON.stringify(usage));
    assert.match(second.answer.message ?? "", new RegExp(`lease ${leaseId}; .* over 2 attestors`));
    // Signed by the provider's wallet, for exactly these numbers: the attestor records an error, never a failure.
    const signer = await recoverRefusalSigner(
      suanliDomain(devnet.deployment.chainId, devnet.deployment.contracts.market!),
      second.message.id,
      "lease_budget",
      usage,
      second.answer.signature!,
    );
    assert.equal(getAddress(signer!), getAddress(provider.peer.address));
    // Another attestor's first check of the lease is still answered.
    const other = await challenge(attestorB);
    assert.equal(other.answer.type, "commit", `${other.answer.reason}: ${other.answer.message}`);
  });
});
