import assert from "node:assert/strict";
import { custom, decodeFunctionData, http, parseTransaction, type Hex } from "viem";
import { leaseMarketAbi } from "../../common/abi.js";
import { readLease } from "../../common/chain/market.js";
import { GroupExtendError, type SuanliClient } from "../../sdk/index.js";
import type { BundleServer } from "../support/bundles.js";
import { send, type Devnet } from "../support/devnet.js";
import type { TestProvider } from "../support/provider.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

/** Two machines of one GPU on one cluster, with a rendezvous address for group jobs. */
const clusterOf = (cluster: string, masterAddress: string) => ({
  provider: {
    inventory: {
      source: "declared",
      declared: [
        { model: "A100-80GB", count: 1, region: "eu-west", interconnect: "fabric", cluster },
        { model: "A100-80GB", count: 1, region: "eu-west", interconnect: "fabric", cluster },
      ],
    },
    groupJobs: { masterAddress, masterPort: 29_511 },
  },
});

/**
 * Group tasks over real provider nodes on a devnet: `extend` acts on every lease of the group
 * (checked against the chain before anything is sent; a failure part-way says what was extended
 * and extends the rest on request), and `autoMigrate` moves the whole group when one machine's
 * lease is lost.
 */
describe("group jobs: extend every lease, migrate together", function () {
  this.timeout(240_000);
  let started: RenterMarket;
  let devnet: Devnet;
  let bundles: BundleServer;
  /** Each provider node with its devnet account. */
  let providers: { index: number; node: TestProvider }[] = [];
  let client: SuanliClient;
  /** A lease whose extend transaction the renter's RPC drops (a failure after the pre-flight check). */
  let dropExtendOf: bigint | undefined;

  /** The renter's wallet transport: the devnet's RPC, except that it drops the extend transaction of lease `dropExtendOf`. */
  const droppingTransport = (rpcUrl: string) => {
    const rpc = http(rpcUrl)({});
    return custom({
      async request({ method, params }: { method: string; params?: unknown }) {
        if (method === "eth_sendRawTransaction" && dropExtendOf !== undefined) {
          const tx = parseTransaction((params as Hex[])[0]!);
          const call = tx.data
            ? (() => {
                try {
                  return decodeFunctionData({ abi: leaseMarketAbi, data: tx.data! });
                } catch {
                  return undefined;
                }
              })()
            : undefined;
          if (call?.functionName === "extend" && (call.args as readonly unknown[])[0] === dropExtendOf) throw new Error("the RPC dropped the transaction");
        }
        return rpc.request({ method, params } as never);
      },
    });
  };

  before(async () => {
    // Two providers of two one-GPU machines each (four offers), each provider on a cluster of its own.
    started = await startRenterMarket({
      name: "group-extend-migrate",
      providers: [clusterOf("rack-1", "10.0.0.1"), clusterOf("rack-2", "10.0.0.2")],
      fund: 1_000_000_000n,
      clientOptions: (chain) => ({ walletTransport: droppingTransport(chain.rpcUrl) }),
      freeUnits: 1,
      offers: 4,
      offerTimeoutMs: 30_000,
    });
    ({ devnet, bundles, client } = started);
    providers = started.providers.map((node, i) => ({ index: i + 1, node }));
  });
  after(async () => started?.close());

  const market = () => devnet.deployment.contracts.market!;
  const lease = (id: bigint) => readLease(devnet.admin.publicClient, market(), id);
  async function submitGroup(script: string, autoMigrate = false) {
    const bundle = await bundles.bundle({ "run.sh": script });
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 2,
      colocation: "cluster",
      duration: 120,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "sh run.sh",
      autoMigrate,
    });
    const group = submitted.attempt.group!;
    assert.equal(group.length, 2);
    for (const member of group) await waitFor(`lease ${member.leaseId} active`, async () => (await lease(member.leaseId)).status === "Active", { timeoutMs: 30_000 });
    return { taskId: submitted.taskId, group };
  }

  it("extends every lease of the group; a refusal extends none; a failure part-way names what was extended and the rest can follow", async () => {
    const { taskId, group } = await submitGroup("sleep 90");
    const ids = group.map((member) => member.leaseId);
    const deposits = group.map((member) => member.deposit);
    const ends = async () => Promise.all(ids.map(async (id) => (await lease(id)).end));
    const start = await ends();

    const extended = await client.extend(taskId, { seconds: 60 });
    assert.deepEqual(
      extended.leases?.map((l) => l.leaseId),
      ids,
    );
    assert.deepEqual(
      await ends(),
      start.map((end) => end + 60),
      "both leases end 60 s later",
    );
    assert.equal(extended.newEnd, Math.min(...start) + 60);
    assert.equal(
      extended.extraDeposit,
      extended.leases!.reduce((sum, l) => sum + l.extraDeposit, 0n),
    );

    // Past the providers' maximum duration (7 days): the chain refuses in the pre-flight, nothing is extended.
    await assert.rejects(client.extend(taskId, { seconds: 8 * 86_400 }), { name: "TransactionError", message: new RegExp(`extend lease ${ids[0]}`) });
    assert.deepEqual(
      await ends(),
      start.map((end) => end + 60),
      "a refused group extension extends no lease",
    );

    // The second lease's transaction is lost after the pre-flight: the first stays extended (the chain cannot undo it).
    dropExtendOf = ids[1];
    let failure: GroupExtendError | undefined;
    try {
      await client.extend(taskId, { seconds: 30 });
    } catch (error) {
      failure = error as GroupExtendError;
    } finally {
      dropExtendOf = undefined;
    }
    assert.ok(failure instanceof GroupExtendError, `expected GroupExtendError, got ${String(failure)}`);
    assert.deepEqual(
      failure.extended.map((l) => l.leaseId),
      [ids[0]],
    );
    assert.equal(failure.failed.leaseId, ids[1]);
    assert.deepEqual(failure.notTried, []);
    assert.deepEqual(await ends(), [start[0]! + 90, start[1]! + 60]);
    // The rest, on request: the group's ends line up again.
    const rest = await client.extend(taskId, { seconds: 30, only: [failure.failed.leaseId, ...failure.notTried] });
    assert.deepEqual(
      rest.leases?.map((l) => l.leaseId),
      [ids[1]],
    );
    assert.deepEqual(
      await ends(),
      start.map((end) => end + 90),
    );
    await assert.rejects(client.extend(taskId, { seconds: 30, only: [999_999n] }), { name: "InvalidInputError", message: /not leases of task/ });

    // Cancel refunds both leases, their extensions included.
    const receipt = await client.cancel(taskId);
    assert.equal(receipt.leases.length, 2);
    for (const l of receipt.leases) {
      assert.ok(l.refunded > 0n, `lease ${l.leaseId} refunded`);
      const rank = ids.indexOf(l.leaseId);
      assert.equal(l.deposit, deposits[rank]! + 90n * 100n, `lease ${l.leaseId}: the deposit with its 90 s of extensions at 100 per second`);
      assert.equal(l.cost + l.refunded, l.deposit, `lease ${l.leaseId}: cost + refund = the deposit with its extensions`);
    }
  });

  it("autoMigrate: one machine's lease terminated by its provider moves the whole group to another cluster, the rest refunded", async () => {
    const { taskId, group } = await submitGroup('sleep 8; echo "rank=$SUANLI_RANK of $SUANLI_WORLD_SIZE at $SUANLI_MASTER_ADDR"', true);
    const first = providers.find((p) => p.node.peer.address.toLowerCase() === group[0]!.provider.toLowerCase())!;
    // The provider pulls rank 1's machine once it runs. (Sent while its node was activating the lease,
    // the terminate's gas was estimated for an Open lease and ran out on the Active one: FailedCall.)
    await waitFor("rank 1's lease to be Active", async () => (await lease(group[1]!.leaseId)).status === "Active", { timeoutMs: 30_000 });
    await send(await devnet.wallet(first.index), { address: market(), abi: leaseMarketAbi, functionName: "terminate", args: [group[1]!.leaseId] });
    assert.equal((await lease(group[1]!.leaseId)).endReason, "Terminated");

    const receipt = await client.wait(taskId);
    assert.equal(receipt.state, "succeeded");
    const record = (await client.tasks()).find((task) => task.taskId === taskId)!;
    assert.equal(record.attempts.length, 2, "the group migrated once");
    assert.equal(record.attempts[0]!.migratedBecause, "Terminated");
    const moved = record.attempts[1]!.group!;
    assert.equal(moved.length, 2, "the whole group moved");
    for (const member of moved) assert.notEqual(member.provider.toLowerCase(), first.node.peer.address.toLowerCase(), "to the other provider's cluster");
    // The old group: rank 1 terminated (refunded by the provider's transaction), rank 0 cancelled and refunded.
    assert.equal(receipt.leases.length, 4);
    const old = await lease(group[0]!.leaseId);
    assert.ok(old.status === "Ended" || old.status === "Settled", `the old rank 0 is ${old.status}`);
    for (const member of group) {
      const l = receipt.leases.find((x) => x.leaseId === member.leaseId)!;
      assert.ok(l.refunded > 0n, `old lease ${member.leaseId} refunded`);
    }
    for (const member of moved) assert.ok(["Ended", "Settled"].includes((await lease(member.leaseId)).status));
  });
});
