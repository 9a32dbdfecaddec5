import assert from "node:assert/strict";
import { getAddress, zeroAddress } from "viem";
import {
  A100,
  ATTESTOR_ROLE,
  H100,
  MARKET_ROLE,
  STAKE,
  UNBONDING_DELAY,
  balance,
  computeCollateral,
  computeDeposit,
  connect,
  deploySuanli,
  faultSignatures,
  latest,
  openActive,
  PRICE,
  type Connection,
} from "./support/suanli.js";

const ZERO32 = `0x${"00".repeat(32)}` as const;

describe("ProviderRegistry", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  async function suanliFixture() {
    return deploySuanli(connection);
  }
  const load = () => connection.networkHelpers.loadFixture(suanliFixture);

  describe("registration and profile", () => {
    it("registers a provider with its peer id and metadata, once", async () => {
      const s = await load();
      const { viem } = connection;
      const fresh = s.other;
      await viem.assertions.emitWithArgs(s.registry.write.register(["12D3KooWFresh", "ipfs://meta"], { account: fresh!.account }), s.registry, "ProviderRegistered", [
        fresh!.account.address,
        "12D3KooWFresh",
        "ipfs://meta",
      ]);
      const view = await s.registry.read.getProvider([fresh!.account.address]);
      assert.equal(view.registered, true);
      assert.equal(view.peerId, "12D3KooWFresh");
      assert.equal(view.metadataURI, "ipfs://meta");
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.register(["12D3KooWFresh", ""], { account: fresh!.account }), s.registry, "AlreadyRegistered", [
        fresh!.account.address,
      ]);
    });

    it("rejects an empty or oversized peer id and an oversized metadata URI", async () => {
      const s = await load();
      const { viem } = connection;
      const as = { account: s.other!.account };
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.register(["", ""], as), s.registry, "InvalidPeerId", [0n, 128n]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.register(["p".repeat(129), ""], as), s.registry, "InvalidPeerId", [129n, 128n]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.register(["peer", "u".repeat(257)], as), s.registry, "InvalidMetadataURI", [257n, 256n]);
    });

    it("updates the profile of a registered provider only", async () => {
      const s = await load();
      const { viem } = connection;
      await viem.assertions.emitWithArgs(s.registry.write.updateProfile(["12D3KooWNew", "https://new"], { account: s.provider!.account }), s.registry, "ProfileUpdated", [
        s.provider!.account.address,
        "12D3KooWNew",
        "https://new",
      ]);
      assert.equal((await s.registry.read.getProvider([s.provider!.account.address])).peerId, "12D3KooWNew");
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.updateProfile(["x", ""], { account: s.other!.account }), s.registry, "NotRegistered", [
        s.other!.account.address,
      ]);
    });
  });

  describe("stake", () => {
    it("pulls stake from a registered provider and announces the new totals", async () => {
      const s = await load();
      const { viem } = connection;
      const p = s.provider!.account.address;
      await s.token.write.faucet([p, 500n]);
      const registryBefore = await balance(s, s.registry.address);
      await viem.assertions.emitWithArgs(s.registry.write.stake([500n], { account: s.provider!.account }), s.registry, "StakeChanged", [p, STAKE + 500n, STAKE + 500n, 0n, 0]);
      assert.equal(await balance(s, s.registry.address), registryBefore + 500n);
      assert.equal(await s.registry.read.freeStake([p]), STAKE + 500n);
    });

    it("refuses stake of zero and from unregistered accounts", async () => {
      const s = await load();
      const { viem } = connection;
      await viem.assertions.revertWithCustomError(s.registry.write.stake([0n], { account: s.provider!.account }), s.registry, "ZeroAmount");
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.stake([1n], { account: s.other!.account }), s.registry, "NotRegistered", [s.other!.account.address]);
    });

    it("keeps a provider's whole stake within 96 bits", async () => {
      const { viem } = connection;
      const [governance, provider] = await viem.getWalletClients();
      const token = await viem.deployContract("ReentrantToken");
      const registry = await viem.deployContract("ProviderRegistry", [token.address, governance!.account.address, UNBONDING_DELAY, 1]);
      const max = 2n ** 96n - 1n;
      await token.write.mint([provider!.account.address, max + 1n]);
      await token.write.approve([registry.address, max + 1n], { account: provider!.account });
      await registry.write.register(["peer", ""], { account: provider!.account });
      await registry.write.stake([max - 10n], { account: provider!.account });
      await registry.write.requestUnstake([5n], { account: provider!.account });
      await viem.assertions.revertWithCustomErrorWithArgs(registry.write.stake([11n], { account: provider!.account }), registry, "SafeCastOverflowedUintDowncast", [96, max + 1n]);
      await registry.write.stake([10n], { account: provider!.account });
      assert.equal((await registry.read.getProvider([provider!.account.address])).stake, max);
    });

    it("unbonds requested stake for the unbonding delay, then pays it out", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const p = s.provider!.account;
      const amount = 1_000n;
      await s.registry.write.requestUnstake([amount], { account: p });
      const unlockAt = (await latest(s)) + UNBONDING_DELAY;
      const view = await s.registry.read.getProvider([p.address]);
      assert.equal(view.unbonding, amount);
      assert.equal(view.unlockAt, unlockAt);
      assert.equal(view.free, STAKE - amount);
      assert.equal(view.stake, STAKE);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.withdraw({ account: p }), s.registry, "StillUnbonding", [p.address, unlockAt]);
      await networkHelpers.time.increaseTo(unlockAt);
      const before = await balance(s, p.address);
      await viem.assertions.emitWithArgs(s.registry.write.withdraw({ account: p }), s.registry, "StakeChanged", [p.address, STAKE - amount, STAKE - amount, 0n, 0]);
      assert.equal(await balance(s, p.address), before + amount);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.withdraw({ account: p }), s.registry, "NothingToWithdraw", [p.address]);
    });

    it("refuses to unstake zero or more than the free stake, and locked collateral cannot leave", async () => {
      const s = await load();
      const { viem } = connection;
      const p = s.provider!.account;
      await viem.assertions.revertWithCustomError(s.registry.write.requestUnstake([0n], { account: p }), s.registry, "ZeroAmount");
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.requestUnstake([STAKE + 1n], { account: p }), s.registry, "InsufficientFreeStake", [
        p.address,
        STAKE,
        STAKE + 1n,
      ]);
      await openActive(s);
      const collateral = computeCollateral(computeDeposit(2, PRICE, 3600), 5_000);
      const view = await s.registry.read.getProvider([p.address]);
      assert.equal(view.locked, collateral);
      assert.equal(view.free, STAKE - collateral);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.requestUnstake([STAKE], { account: p }), s.registry, "InsufficientFreeStake", [
        p.address,
        STAKE - collateral,
        STAKE,
      ]);
    });
  });

  describe("machines", () => {
    it("declares machines with global ids and announces them as idle capacity", async () => {
      const s = await load();
      const { viem } = connection;
      const p = s.provider!.account;
      const cluster = `0x${"ab".repeat(32)}` as const;
      await viem.assertions.emitWithArgs(s.registry.write.addMachine([H100, 4, 81_559, 2, "ap-south", cluster], { account: p }), s.registry, "MachineAdded", [
        3,
        p.address,
        H100,
        4,
        81_559,
        2,
        "ap-south",
        cluster,
      ]);
      const machine = await s.registry.read.getMachine([3]);
      assert.deepEqual(machine, {
        owner: getAddress(p.address),
        model: H100,
        units: 4,
        vramMiB: 81_559,
        interconnect: 2,
        region: "ap-south",
        cluster,
        onDemandUnits: 0,
        interruptibleUnits: 0,
      });
      assert.equal(await s.registry.read.lastMachineId(), 3);
      assert.equal((await s.registry.read.getProvider([p.address])).machineCount, 2);
      await viem.assertions.emitWithArgs(s.registry.write.addMachine([A100, 2, 1, 0, "x", ZERO32], { account: p }), s.registry, "CapacityChanged", [4, 0, 0, 2]);
    });

    it("rejects machines from unregistered accounts and with invalid fields", async () => {
      const s = await load();
      const { viem } = connection;
      const p = { account: s.provider!.account };
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.addMachine([A100, 1, 1, 0, "eu", ZERO32], { account: s.other!.account }), s.registry, "NotRegistered", [
        s.other!.account.address,
      ]);
      await viem.assertions.revertWithCustomError(s.registry.write.addMachine([ZERO32, 1, 1, 0, "eu", ZERO32], p), s.registry, "ZeroModel");
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.addMachine([A100, 0, 1, 0, "eu", ZERO32], p), s.registry, "InvalidUnitCount", [0]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.addMachine([A100, 1, 1, 3, "eu", ZERO32], p), s.registry, "InvalidInterconnect", [3]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.addMachine([A100, 1, 1, 0, "", ZERO32], p), s.registry, "InvalidRegion", [0n, 32n]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.addMachine([A100, 1, 1, 0, "r".repeat(33), ZERO32], p), s.registry, "InvalidRegion", [33n, 32n]);
    });

    it("updates and removes a machine only for its owner and only while no unit is leased", async () => {
      const s = await load();
      const { viem } = connection;
      const p = s.provider!.account;
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.registry.write.updateMachine([1, A100, 8, 1, 0, "eu", ZERO32], { account: s.provider2!.account }),
        s.registry,
        "NotMachineOwner",
        [1, s.provider2!.account.address],
      );
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.removeMachine([1], { account: s.provider2!.account }), s.registry, "NotMachineOwner", [
        1,
        s.provider2!.account.address,
      ]);
      const { leaseId } = await openActive(s);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.updateMachine([1, A100, 8, 1, 0, "eu", ZERO32], { account: p }), s.registry, "MachineLeased", [1, 2]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.removeMachine([1], { account: p }), s.registry, "MachineLeased", [1, 2]);
      await s.market.write.close([leaseId], { account: s.renter!.account });

      await viem.assertions.emitWithArgs(s.registry.write.updateMachine([1, H100, 6, 81_559, 2, "us-west", ZERO32], { account: p }), s.registry, "MachineUpdated", [
        1,
        p.address,
        H100,
        6,
        81_559,
        2,
        "us-west",
        ZERO32,
      ]);
      const updated = await s.registry.read.getMachine([1]);
      assert.equal(updated.units, 6);
      assert.equal(updated.region, "us-west");
      await viem.assertions.revertWithCustomError(s.registry.write.updateMachine([1, A100, 0, 1, 0, "eu", ZERO32], { account: p }), s.registry, "InvalidUnitCount");
      await viem.assertions.emitWithArgs(s.registry.write.removeMachine([1], { account: p }), s.registry, "MachineRemoved", [1, p.address]);
      assert.equal((await s.registry.read.getMachine([1])).owner, zeroAddress);
      assert.equal((await s.registry.read.getProvider([p.address])).machineCount, 0);
    });
  });

  describe("deregistration", () => {
    it("needs every machine removed, then unbonds the whole stake", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const p = s.provider!.account;
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.deregister({ account: p }), s.registry, "ProviderHasMachines", [p.address, 1]);
      await s.registry.write.removeMachine([1], { account: p });
      await viem.assertions.emitWithArgs(s.registry.write.deregister({ account: p }), s.registry, "ProviderDeregistered", [p.address]);
      const view = await s.registry.read.getProvider([p.address]);
      assert.equal(view.registered, false);
      assert.equal(view.free, 0n);
      assert.equal(view.unbonding, STAKE);
      assert.equal(view.unlockAt, (await latest(s)) + UNBONDING_DELAY);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.deregister({ account: p }), s.registry, "NotRegistered", [p.address]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.addMachine([A100, 1, 1, 0, "eu", ZERO32], { account: p }), s.registry, "NotRegistered", [p.address]);
      await networkHelpers.time.increase(UNBONDING_DELAY);
      const before = await balance(s, p.address);
      await s.registry.write.withdraw({ account: p });
      assert.equal(await balance(s, p.address), before + STAKE);
    });
  });

  describe("offer nonces", () => {
    it("revokes single nonces and every nonce below a rising floor", async () => {
      const s = await load();
      const { viem } = connection;
      const p = s.provider!.account;
      assert.equal(await s.registry.read.isNonceUsable([p.address, 7n]), true);
      await viem.assertions.emitWithArgs(s.registry.write.revokeNonce([7n], { account: p }), s.registry, "OfferNonceRevoked", [p.address, 7n]);
      assert.equal(await s.registry.read.isNonceUsable([p.address, 7n]), false);
      assert.equal(await s.registry.read.isNonceUsable([p.address, 8n]), true);
      await viem.assertions.emitWithArgs(s.registry.write.revokeNoncesBelow([100n], { account: p }), s.registry, "OfferNonceFloorRaised", [p.address, 100n]);
      assert.equal(await s.registry.read.isNonceUsable([p.address, 99n]), false);
      assert.equal(await s.registry.read.isNonceUsable([p.address, 100n]), true);
      assert.equal((await s.registry.read.getProvider([p.address])).nonceFloor, 100n);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.revokeNoncesBelow([100n], { account: p }), s.registry, "NonceFloorNotRaised", [100n, 100n]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.revokeNoncesBelow([50n], { account: p }), s.registry, "NonceFloorNotRaised", [100n, 50n]);
    });
  });

  describe("governance and roles", () => {
    it("lets only governance set the unbonding delay and the fault quorum, within bounds", async () => {
      const s = await load();
      const { viem } = connection;
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.setUnbondingDelay([10], { account: s.other!.account }), s.registry, "AccessControlUnauthorizedAccount", [
        s.other!.account.address,
        ZERO32,
      ]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.setUnbondingDelay([90 * 86_400 + 1]), s.registry, "UnbondingDelayTooLong", [
        90 * 86_400 + 1,
        90 * 86_400,
      ]);
      await viem.assertions.emitWithArgs(s.registry.write.setUnbondingDelay([7 * 86_400]), s.registry, "UnbondingDelayChanged", [7 * 86_400]);
      assert.equal(await s.registry.read.unbondingDelay(), 7 * 86_400);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.setFaultQuorum([0]), s.registry, "InvalidFaultQuorum", [0, 32]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.setFaultQuorum([3], { account: s.other!.account }), s.registry, "AccessControlUnauthorizedAccount", [
        s.other!.account.address,
        ZERO32,
      ]);
      await viem.assertions.emitWithArgs(s.registry.write.setFaultQuorum([3]), s.registry, "FaultQuorumChanged", [3]);
      assert.equal(await s.registry.read.faultQuorum(), 3);
    });

    it("manages the attestor set through ATTESTOR_ROLE", async () => {
      const s = await load();
      const attestor = s.attestors[0]!.account.address;
      assert.equal(await s.registry.read.isAttestor([attestor]), true);
      assert.equal(await s.registry.read.isAttestor([s.other!.account.address]), false);
      await s.registry.write.revokeRole([ATTESTOR_ROLE, attestor]);
      assert.equal(await s.registry.read.isAttestor([attestor]), false);
    });

    it("sets the fault quorum as a share of the attestor set: granting and revoking attestors moves it, and the market enforces it", async () => {
      const s = await load();
      const { viem } = connection;
      // Floor 2 (the fixture's), three attestors: without a share the floor applies.
      assert.deepEqual(await s.registry.read.faultQuorumParams(), [2, 0]);
      assert.equal(await s.registry.read.attestorCount(), 3n);
      await viem.assertions.emitWithArgs(s.registry.write.setFaultQuorumBps([6_666]), s.registry, "FaultQuorumBpsChanged", [6_666]);
      assert.equal(await s.registry.read.faultQuorum(), 2); // ceil(3 x 0.6666) = 2 (6,667 would give 3: 2.0001 rounds up)
      const wallets = await viem.getWalletClients();
      const extra = wallets.slice(10, 13).map((w) => w.account.address);
      await s.registry.write.grantRole([ATTESTOR_ROLE, extra[0]!]);
      assert.equal(await s.registry.read.faultQuorum(), 3); // ceil(2.6664) = 3
      await s.registry.write.grantRole([ATTESTOR_ROLE, extra[1]!]);
      await s.registry.write.grantRole([ATTESTOR_ROLE, extra[2]!]);
      assert.equal(await s.registry.read.faultQuorum(), 4); // ceil(3.9996) = 4
      for (const account of extra) await s.registry.write.revokeRole([ATTESTOR_ROLE, account]);
      await s.registry.write.revokeRole([ATTESTOR_ROLE, s.attestors[2]!.account.address]);
      assert.equal(await s.registry.read.faultQuorum(), 2); // ceil(1.3332) = 2
      await s.registry.write.setFaultQuorum([1]);
      await s.registry.write.revokeRole([ATTESTOR_ROLE, s.attestors[1]!.account.address]);
      assert.equal(await s.registry.read.faultQuorum(), 1);

      // The market reads the moving quorum: with a fourth attestor two signatures no longer end a lease.
      await s.registry.write.grantRole([ATTESTOR_ROLE, s.attestors[1]!.account.address]);
      await s.registry.write.grantRole([ATTESTOR_ROLE, s.attestors[2]!.account.address]);
      await s.registry.write.grantRole([ATTESTOR_ROLE, extra[0]!]);
      assert.equal(await s.registry.read.faultQuorum(), 3);
      const { leaseId, activatedAt } = await openActive(s);
      const fault = { leaseId, kind: 1, observedAt: activatedAt + 1 };
      await connection.networkHelpers.time.increaseTo(activatedAt + 2);
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.submitFault([fault, await faultSignatures(s, fault, s.attestors.slice(0, 2))]),
        s.market,
        "FaultQuorumNotMet",
        [2n, 3n],
      );
      await viem.assertions.emit(s.market.write.submitFault([fault, await faultSignatures(s, fault, s.attestors)]), s.market, "FaultSubmitted");
    });

    it("bounds the fault quorum's share: 0 or a third to all, set by governance only, and never above the signatures a fault carries", async () => {
      const s = await load();
      const { viem } = connection;
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.setFaultQuorumBps([3_333]), s.registry, "InvalidFaultQuorumBps", [3_333, 3_334, 10_000]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.setFaultQuorumBps([10_001]), s.registry, "InvalidFaultQuorumBps", [10_001, 3_334, 10_000]);
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.registry.write.setFaultQuorumBps([5_000], { account: s.other!.account }),
        s.registry,
        "AccessControlUnauthorizedAccount",
        [s.other!.account.address, ZERO32],
      );
      await s.registry.write.setFaultQuorumBps([10_000]);
      assert.equal(await s.registry.read.faultQuorum(), 3);
      // 40 attestors at 100 %: capped at the 32 signatures a fault may carry, so faults stay possible.
      const { privateKeyToAccount } = await import("viem/accounts");
      for (let i = 1; i <= 37; i++) await s.registry.write.grantRole([ATTESTOR_ROLE, privateKeyToAccount(`0x${i.toString(16).padStart(64, "0")}`).address]);
      assert.equal(await s.registry.read.attestorCount(), 40n);
      assert.equal(await s.registry.read.faultQuorum(), 32);
      await s.registry.write.setFaultQuorumBps([0]);
      assert.equal(await s.registry.read.faultQuorum(), 2);
    });

    it("accepts the market hooks from MARKET_ROLE only", async () => {
      const s = await load();
      const { viem } = connection;
      const p = s.provider!.account.address;
      const as = { account: s.other!.account };
      const expectUnauthorized = (promise: Promise<unknown>) =>
        viem.assertions.revertWithCustomErrorWithArgs(promise as Promise<`0x${string}`>, s.registry, "AccessControlUnauthorizedAccount", [s.other!.account.address, MARKET_ROLE]);
      await expectUnauthorized(s.registry.write.reserve([p, 1, A100, 1, false, 0n, 1n, false], as));
      await expectUnauthorized(s.registry.write.release([p, 1, 1, false, 0n, 0n, zeroAddress, 0n, 0], as));
      await expectUnauthorized(s.registry.write.lockMore([p, 1n, 1n, false], as));
      await expectUnauthorized(s.registry.write.unlockPart([p, 1, 1, false, 0n, 0n], as));
    });
  });

  describe("reputation", () => {
    it("counts completed leases, faults and unit-seconds delivered", async () => {
      const s = await load();
      const { networkHelpers } = connection;
      const p = s.provider!.account;
      // A 100 s lease completed at its end counts once its collateral's fault window is over and the
      // provider's claim releases it; an early completion would count only co-signed (issue #34 finding 1).
      const { leaseId } = await openActive(s, { terms: { duration: 100 } });
      await networkHelpers.time.increase(99);
      await s.market.write.complete([leaseId, 0, ZERO32, 200n], { account: p });
      assert.equal((await s.registry.read.getProvider([p.address])).leasesCompleted, 0n);
      await networkHelpers.time.increase(600);
      await s.market.write.claim([leaseId], { account: p });
      let view = await s.registry.read.getProvider([p.address]);
      assert.equal(view.leasesCompleted, 1n);
      assert.equal(view.faults, 0n);
      assert.equal(view.unitSecondsDelivered, 2n * 100n);

      const second = await openActive(s);
      await networkHelpers.time.increase(10);
      await s.market.write.terminate([second.leaseId], { account: p });
      view = await s.registry.read.getProvider([p.address]);
      assert.equal(view.leasesCompleted, 1n);
      assert.equal(view.faults, 1n);
      assert.equal(view.unitSecondsDelivered, 200n + 2n * 11n);
    });
  });
});
