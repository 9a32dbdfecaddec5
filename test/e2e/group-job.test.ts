import assert from "node:assert/strict";
import { testTokenAbi } from "../../common/abi.js";
import { readLease } from "../../common/chain/market.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

describe("group jobs: one task over two machines of a cluster", function () {
  this.timeout(120_000);
  let market: RenterMarket;

  before(async () => {
    // Two machines of one GPU each, declared on one cluster (a fabric interconnect).
    market = await startRenterMarket({
      name: "group-job",
      provider: {
        provider: {
          inventory: {
            source: "declared",
            declared: [
              { model: "A100-80GB", count: 1, region: "eu-west", interconnect: "fabric", cluster: "rack-1" },
              { model: "A100-80GB", count: 1, region: "eu-west", interconnect: "fabric", cluster: "rack-1" },
            ],
          },
          groupJobs: { masterAddress: "10.0.0.1", masterPort: 29_511 },
        },
      },
      freeUnits: 1,
      offers: 2,
    });
  });
  after(async () => market?.close());

  it("tracks both leases, gives each machine its rank and the master's address, and cancel refunds both", async () => {
    const { devnet, bundles, client, renter } = market;
    const bundle = await bundles.bundle({ "run.sh": 'echo "rank=$SUANLI_RANK world=$SUANLI_WORLD_SIZE master=$SUANLI_MASTER_ADDR:$SUANLI_MASTER_PORT"; sleep 60' });
    const balance = () =>
      devnet.admin.publicClient.readContract({ address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "balanceOf", args: [renter.address] });
    const before = await balance();
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
    });
    const group = submitted.attempt.group;
    assert.ok(group, "the task record keeps the group");
    assert.equal(group.length, 2);
    assert.notEqual(group[0]!.leaseId, group[1]!.leaseId);
    assert.notEqual(group[0]!.machineId, group[1]!.machineId);
    const stored = (await client.tasks()).find((task) => task.taskId === submitted.taskId)!;
    assert.deepEqual(
      stored.attempts[0]!.group?.map((member) => member.leaseId),
      group.map((member) => member.leaseId),
    );

    for (const rank of [0, 1]) {
      await waitFor(`rank ${rank} running`, async () => (await client.exec(submitted.taskId, "true", { rank }).catch(() => undefined))?.exitCode === 0, { timeoutMs: 30_000 });
      const env = await client.exec(submitted.taskId, 'echo "$SUANLI_RANK $SUANLI_WORLD_SIZE $SUANLI_MASTER_ADDR $SUANLI_MASTER_PORT"', { rank });
      assert.equal(env.stdout.trim(), `${rank} 2 10.0.0.1 29511`, `rank ${rank}'s variables`);
    }

    const receipt = await client.cancel(submitted.taskId);
    assert.equal(receipt.leases.length, 2, "the receipt covers both machines");
    assert.deepEqual(receipt.leases.map((lease) => lease.leaseId).sort(), group.map((member) => member.leaseId).sort());
    for (const lease of receipt.leases) {
      assert.ok(lease.refunded > 0n, `lease ${lease.leaseId} refunded`);
      assert.equal(lease.cost + lease.refunded, lease.deposit);
      const onChain = await readLease(devnet.admin.publicClient, devnet.deployment.contracts.market!, lease.leaseId);
      assert.ok(onChain.status === "Ended" || onChain.status === "Settled", `lease ${lease.leaseId} is ${onChain.status}`);
    }
    assert.equal(await balance(), before - receipt.totalCost, "the renter paid exactly the two leases' cost");
  });
});
