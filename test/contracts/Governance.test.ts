/**
 * Issue #34 finding 8: every admin power behind OpenZeppelin's TimelockController, and MARKET_ROLE (the power to
 * reserve and release every provider's collateral) out of any admin's reach. docs/contracts.md, "Roles and the
 * timelock".
 */
import assert from "node:assert/strict";
import { concat, encodeFunctionData, type Abi, getAddress, keccak256, toBytes, toHex, zeroAddress, type Address, type Hex } from "viem";
import { attestorStakingAbi, leaseMarketAbi, providerRegistryAbi } from "../../common/abi.js";
import { ATTESTOR_ROLE, DEFAULT_PARAMS, MARKET_ROLE, balance, connect, openActive, type Connection } from "./support/suanli.js";
import { PARAMS, stakedSuanli } from "./support/staking.js";

const ADMIN = `0x${"00".repeat(32)}` as const;
const ZERO32 = ADMIN;
const PROPOSER_ROLE = keccak256(toBytes("PROPOSER_ROLE"));
const EXECUTOR_ROLE = keccak256(toBytes("EXECUTOR_ROLE"));
/** Two days: the test's delay (production uses 8 days, docs/contracts.md). */
const DELAY = 2 * 86_400;
/** TimelockController's expectedStates bitmap for "Ready" (1 << OperationState.Ready). */
const READY_BITMAP = toHex(1n << 2n, { size: 32 });

describe("Governance: the timelock and the market role", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });

  /** The staked Suanli with every admin power handed to a timelock (proposer, executor, guardian = a canceller only). */
  async function governedFixture() {
    const s = await stakedSuanli(connection);
    const wallets = await connection.viem.getWalletClients();
    const [proposer, executor, guardian, attacker, newcomer] = wallets.slice(10, 15);
    // The deployer is the timelock's admin only while it adds the guardian, then renounces (as node/chain/deploy.ts does).
    const timelock = await connection.viem.deployContract("TimelockController", [
      BigInt(DELAY),
      [proposer!.account.address],
      [executor!.account.address],
      s.governance!.account.address,
    ]);
    await timelock.write.grantRole([await timelock.read.CANCELLER_ROLE(), guardian!.account.address]);
    await timelock.write.renounceRole([ADMIN, s.governance!.account.address]);
    await s.registry.write.grantRole([ADMIN, timelock.address]);
    await s.registry.write.renounceRole([ADMIN, s.governance!.account.address]);
    return { ...s, timelock, proposer, executor, guardian, attacker, newcomer };
  }
  const loadGoverned = () => connection.networkHelpers.loadFixture(governedFixture);

  /** Every admin power of the three contracts, as [target, calldata, what it does]. */
  function adminCalls(s: Awaited<ReturnType<typeof governedFixture>>, victim: Address, stranger: Address): [Address, Hex, string][] {
    const registry = (functionName: string, args: readonly unknown[]): [Address, Hex, string] => [
      s.registry.address,
      encodeFunctionData({ abi: providerRegistryAbi as Abi, functionName, args }),
      `registry.${functionName}`,
    ];
    return [
      registry("setUnbondingDelay", [90 * 86_400]),
      registry("setFaultQuorum", [32]),
      registry("setFaultQuorumBps", [10_000]),
      registry("setAttestorStaking", [zeroAddress]),
      registry("grantRole", [ATTESTOR_ROLE, stranger]),
      registry("revokeRole", [ATTESTOR_ROLE, victim]),
      registry("grantRole", [ADMIN, stranger]),
      [
        s.market.address,
        encodeFunctionData({ abi: leaseMarketAbi, functionName: "setParams", args: [{ ...DEFAULT_PARAMS, protocolFeeBps: 1_000, treasury: stranger }] }),
        "market.setParams",
      ],
      [s.staking.address, encodeFunctionData({ abi: attestorStakingAbi, functionName: "setParams", args: [{ ...PARAMS(stranger), disputerShareBps: 0 }] }), "staking.setParams"],
    ];
  }

  it("refuses every admin power to the former admin, the proposer and a stranger: only the timelock holds it", async () => {
    const s = await loadGoverned();
    const victim = s.attestors[0]!.account.address;
    const calls = adminCalls(s, victim, s.attacker!.account.address);
    assert.equal(calls.length, 9);
    for (const caller of [s.governance!, s.proposer!, s.attacker!]) {
      for (const [to, data, what] of calls) {
        await assert.rejects(
          caller.sendTransaction({ to, data }),
          (error: Error) => /AccessControlUnauthorizedAccount|NotGovernance/.test(String(error)),
          `${what} by ${caller.account.address} should revert`,
        );
      }
    }
    // The one admin is the timelock; the timelock's own admin is itself.
    assert.equal(await s.registry.read.getRoleMemberCount([ADMIN]), 1n);
    assert.equal(await s.registry.read.getRoleMember([ADMIN, 0n]), getAddress(s.timelock.address));
    assert.equal(await s.timelock.read.hasRole([ADMIN, s.governance!.account.address]), false);
    assert.equal(await s.timelock.read.hasRole([ADMIN, s.timelock.address]), true);
    await connection.viem.assertions.revertWithCustomErrorWithArgs(s.timelock.write.updateDelay([0n], { account: s.proposer!.account }), s.timelock, "TimelockUnauthorizedCaller", [
      getAddress(s.proposer!.account.address),
    ]);
  });

  it("runs a proposal only once its delay has passed: before it the execution reverts, after it every admin power works", async () => {
    const s = await loadGoverned();
    const { viem, networkHelpers } = connection;
    const newcomer = s.newcomer!.account.address;
    const victim = s.attestors[0]!.account.address;
    const calls = adminCalls(s, victim, newcomer);
    const targets = calls.map(([to]) => to);
    const payloads = calls.map(([, data]) => data);
    const values = calls.map(() => 0n);
    const salt = keccak256(toBytes("every admin power"));
    const id = await s.timelock.read.hashOperationBatch([targets, values, payloads, ZERO32, salt]);

    // Only a proposer schedules, and not below the delay.
    await viem.assertions.revertWithCustomErrorWithArgs(
      s.timelock.write.scheduleBatch([targets, values, payloads, ZERO32, salt, BigInt(DELAY)], { account: s.attacker!.account }),
      s.timelock,
      "AccessControlUnauthorizedAccount",
      [getAddress(s.attacker!.account.address), PROPOSER_ROLE],
    );
    await viem.assertions.revertWithCustomErrorWithArgs(
      s.timelock.write.scheduleBatch([targets, values, payloads, ZERO32, salt, BigInt(DELAY - 1)], { account: s.proposer!.account }),
      s.timelock,
      "TimelockInsufficientDelay",
      [BigInt(DELAY - 1), BigInt(DELAY)],
    );
    await s.timelock.write.scheduleBatch([targets, values, payloads, ZERO32, salt, BigInt(DELAY)], { account: s.proposer!.account });
    const readyAt = await s.timelock.read.getTimestamp([id]);

    // At once, and one second before the delay is over: refused, nothing changed.
    const execute = (account = s.executor!.account) => s.timelock.write.executeBatch([targets, values, payloads, ZERO32, salt], { account });
    await viem.assertions.revertWithCustomErrorWithArgs(execute(), s.timelock, "TimelockUnexpectedOperationState", [id, READY_BITMAP]);
    await networkHelpers.time.setNextBlockTimestamp(readyAt - 1n);
    await viem.assertions.revertWithCustomErrorWithArgs(execute(), s.timelock, "TimelockUnexpectedOperationState", [id, READY_BITMAP]);
    assert.equal(await s.registry.read.hasRole([ATTESTOR_ROLE, newcomer]), false);
    assert.equal(await s.registry.read.faultQuorum(), 2);

    // Once ready, only an executor runs it; then every change is in force. (A refused execution sends nothing, so
    // the chain's clock is moved on by a mined block.)
    await networkHelpers.time.increaseTo(readyAt);
    await viem.assertions.revertWithCustomErrorWithArgs(execute(s.attacker!.account), s.timelock, "AccessControlUnauthorizedAccount", [
      getAddress(s.attacker!.account.address),
      EXECUTOR_ROLE,
    ]);
    await execute();
    assert.equal(await s.timelock.read.isOperationDone([id]), true);
    assert.equal(await s.registry.read.unbondingDelay(), 90 * 86_400);
    assert.equal(await s.registry.read.faultQuorumParams().then(([floor, bps]) => `${floor}/${bps}`), "32/10000");
    assert.equal(await s.registry.read.attestorStaking(), zeroAddress);
    assert.equal(await s.registry.read.hasRole([ATTESTOR_ROLE, newcomer]), true);
    assert.equal(await s.registry.read.hasRole([ATTESTOR_ROLE, victim]), false);
    assert.equal(await s.registry.read.hasRole([ADMIN, newcomer]), true);
    assert.equal((await s.market.read.params()).protocolFeeBps, 1_000);
    assert.equal((await s.staking.read.params()).disputerShareBps, 0);
    // A proposal runs once.
    await viem.assertions.revertWithCustomErrorWithArgs(execute(), s.timelock, "TimelockUnexpectedOperationState", [id, READY_BITMAP]);
  });

  it("lets a guardian cancel a hostile proposal during the delay, and nothing else", async () => {
    const s = await loadGoverned();
    const { viem, networkHelpers } = connection;
    // A stolen proposer key proposes to take the attestor set: revoke every attestor, grant the attacker.
    const attacker = s.attacker!.account.address;
    const targets = [s.registry.address, ...s.attestors.map(() => s.registry.address)];
    const payloads = [
      encodeFunctionData({ abi: providerRegistryAbi, functionName: "grantRole", args: [ATTESTOR_ROLE, attacker] }),
      ...s.attestors.map((a) => encodeFunctionData({ abi: providerRegistryAbi, functionName: "revokeRole", args: [ATTESTOR_ROLE, a!.account.address] })),
    ];
    const values = targets.map(() => 0n);
    const id = await s.timelock.read.hashOperationBatch([targets, values, payloads, ZERO32, ZERO32]);
    await s.timelock.write.scheduleBatch([targets, values, payloads, ZERO32, ZERO32, BigInt(DELAY)], { account: s.proposer!.account });
    // The guardian cannot propose (it only cancels).
    await viem.assertions.revertWithCustomErrorWithArgs(
      s.timelock.write.schedule([s.registry.address, 0n, payloads[0]!, ZERO32, toHex(1n, { size: 32 }), BigInt(DELAY)], { account: s.guardian!.account }),
      s.timelock,
      "AccessControlUnauthorizedAccount",
      [getAddress(s.guardian!.account.address), PROPOSER_ROLE],
    );
    await s.timelock.write.cancel([id], { account: s.guardian!.account });
    await networkHelpers.time.increase(DELAY + 1);
    await viem.assertions.revertWithCustomErrorWithArgs(
      s.timelock.write.executeBatch([targets, values, payloads, ZERO32, ZERO32], { account: s.executor!.account }),
      s.timelock,
      "TimelockUnexpectedOperationState",
      [id, READY_BITMAP],
    );
    assert.equal(await s.registry.read.hasRole([ATTESTOR_ROLE, attacker]), false);
    for (const a of s.attestors) assert.equal(await s.registry.read.hasRole([ATTESTOR_ROLE, a!.account.address]), true);
  });

  it("grants MARKET_ROLE once, to a market of this registry, never to an EOA, a delegated EOA or another contract, and never revokes it", async () => {
    const { viem, networkHelpers } = connection;
    const [governance, someone] = await viem.getWalletClients();
    const token = await viem.deployContract("TestToken");
    const registry = await viem.deployContract("ProviderRegistry", [token.address, governance!.account.address, 1, 1]);
    const extension = await viem.deployContract("LeaseMarketExtension", [registry.address]);
    const market = await viem.deployContract("LeaseMarket", [registry.address, extension.address, DEFAULT_PARAMS]);
    const refused = (account: Address, error: "MarketRoleNotAMarket" | "MarketRoleFixed", arg: Address) =>
      viem.assertions.revertWithCustomErrorWithArgs(registry.write.grantRole([MARKET_ROLE, account]), registry, error, [getAddress(arg)]);

    // An EOA; a contract without registry(); a market of another registry.
    await refused(someone!.account.address, "MarketRoleNotAMarket", someone!.account.address);
    await refused(token.address, "MarketRoleNotAMarket", token.address);
    const otherRegistry = await viem.deployContract("ProviderRegistry", [token.address, governance!.account.address, 1, 1]);
    const otherExtension = await viem.deployContract("LeaseMarketExtension", [otherRegistry.address]);
    const otherMarket = await viem.deployContract("LeaseMarket", [otherRegistry.address, otherExtension.address, DEFAULT_PARAMS]);
    await refused(otherMarket.address, "MarketRoleNotAMarket", otherMarket.address);
    // An EOA delegated to the market's code by EIP-7702 (its code is the designator 0xef0100 || market) would answer
    // registry() with this registry: refused all the same.
    const delegated = "0x7702770277027702770277027702770277027702" as const;
    await networkHelpers.setCode(delegated, concat(["0xef0100", market.address]));
    await refused(delegated, "MarketRoleNotAMarket", delegated);

    await registry.write.grantRole([MARKET_ROLE, market.address]);
    // A second market of the same registry, a revocation, the market renouncing: all refused.
    const secondMarket = await viem.deployContract("LeaseMarket", [registry.address, extension.address, DEFAULT_PARAMS]);
    await refused(secondMarket.address, "MarketRoleFixed", market.address);
    await viem.assertions.revertWithCustomErrorWithArgs(registry.write.revokeRole([MARKET_ROLE, market.address]), registry, "MarketRoleFixed", [getAddress(market.address)]);
    await networkHelpers.impersonateAccount(market.address);
    await networkHelpers.setBalance(market.address, 10n ** 18n);
    await viem.assertions.revertWithCustomErrorWithArgs(registry.write.renounceRole([MARKET_ROLE, market.address], { account: market.address }), registry, "MarketRoleFixed", [
      getAddress(market.address),
    ]);
    await networkHelpers.stopImpersonatingAccount(market.address);
    assert.equal(await registry.read.getRoleMemberCount([MARKET_ROLE]), 1n);
    assert.equal(await registry.read.getRoleMember([MARKET_ROLE, 0n]), getAddress(market.address));
  });

  it("a stolen proposer key cannot take provider stake or freeze the renters' deposits, even after the delay", async () => {
    const s = await loadGoverned();
    const { viem, networkHelpers } = connection;
    // Ten days: the lease outlives both proposals' delays.
    const { leaseId } = await openActive(s, { terms: { duration: 10 * 86_400 } });
    const provider = s.provider!.account.address;
    const stakeBefore = await s.registry.read.getProvider([provider]);
    // The attack before finding 8: make itself a "market" and release the provider's collateral to itself, and cut
    // the real market off so that no lease can end. Here it needs a contract answering registry() (a second market
    // stands in for the attacker's), the delay, and still fails.
    const rogue = await viem.deployContract("LeaseMarket", [s.registry.address, s.extension.address, DEFAULT_PARAMS]);
    for (const [payload, holder] of [
      [encodeFunctionData({ abi: providerRegistryAbi, functionName: "grantRole", args: [MARKET_ROLE, rogue.address] }), s.market.address],
      [encodeFunctionData({ abi: providerRegistryAbi, functionName: "revokeRole", args: [MARKET_ROLE, s.market.address] }), s.market.address],
    ] as const) {
      await s.timelock.write.schedule([s.registry.address, 0n, payload, ZERO32, ZERO32, BigInt(DELAY)], { account: s.proposer!.account });
      await networkHelpers.time.increase(DELAY);
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.timelock.write.execute([s.registry.address, 0n, payload, ZERO32, ZERO32], { account: s.executor!.account }),
        s.registry,
        "MarketRoleFixed",
        [getAddress(holder)],
      );
    }
    await viem.assertions.revertWithCustomErrorWithArgs(
      s.registry.write.release([provider, 1, 2, false, stakeBefore.locked, stakeBefore.locked, s.attacker!.account.address, 0n, 0], { account: s.attacker!.account }),
      s.registry,
      "AccessControlUnauthorizedAccount",
      [getAddress(s.attacker!.account.address), MARKET_ROLE],
    );
    // The lease still ends by the rules: the renter closes it and its refund arrives; the provider's stake is whole.
    const renterBefore = await balance(s, s.renter!.account.address);
    await s.market.write.close([leaseId], { account: s.renter!.account });
    assert.ok((await balance(s, s.renter!.account.address)) > renterBefore);
    const after = await s.registry.read.getProvider([provider]);
    assert.equal(after.stake, stakeBefore.stake);
    assert.equal(after.locked, 0n);
  });
});
