/**
 * AttestorStaking replaced by governance (ProviderRegistry.setAttestorStaking): the signatures are in the market's
 * domain, not the staking's, so without a rule the same lie could be slashed once in every staking. A staking names
 * the one it replaces (its predecessor), and the registry attaches only the successor of the last one attached. Only
 * the registry's current staking takes new disputes, after checking its predecessors' records: one lie is slashed
 * once, from the stake that counts; a lie not yet disputed stays slashable in the current one; a retired staking (or
 * one not attached yet) takes no new dispute, so a dust stake there cannot be used to record a lie and block its slash
 * where the real stake is. The books balance in every staking.
 */
import assert from "node:assert/strict";
import { getAddress, keccak256, toBytes, zeroAddress, type Address, type Hex } from "viem";
import { signProbeReceipt } from "../../common/attest/liveness.js";
import { signAttestation, signFault } from "../../common/chain/sign.js";
import type { Attestation, Fault, ProbeReceipt } from "../../common/eip712.js";
import { machineCommitFixture } from "../support/machine-commit.js";
import { A100, balance, connect, latest, openActive, type Connection, type Suanli } from "./support/suanli.js";
import { ANSWER_WINDOW, FAULT_WINDOW, FEE, MIN_STAKE, PARAMS, SLASH, assertBooks, deployStaking, everyone, stakedSuanli, type StakedSuanli } from "./support/staking.js";

type S = StakedSuanli;
type Staking = S["staking"];
type Wallet = S["provider"];

describe("AttestorStaking replaced: one lie is slashed once across the lineage", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  const fixture = () => stakedSuanli(connection);
  const load = () => connection.networkHelpers.loadFixture(fixture);
  const ms = (seconds: number) => BigInt(seconds) * 1000n;
  /** `s` seen through another staking of the same market (for assertBooks). */
  const through = (s: S, staking: Staking): S => ({ ...s, staking });

  let probes = 0;
  async function falseFault(s: S, liar: Wallet, leaseId: bigint, observedAt: number, receivedAfterMs = 2_345n) {
    const fault: Fault = { leaseId, kind: 1, observedAt };
    const receipt: ProbeReceipt = { leaseId, challenge: keccak256(toBytes(`replacement-probe-${++probes}`)), receivedAtMs: ms(observedAt) + receivedAfterMs };
    return { fault, faultSignature: await signFault(liar!, s.domain, fault), receipt, receiptSignature: await signProbeReceipt(liar!, s.domain, receipt) };
  }
  type Lie = Awaited<ReturnType<typeof falseFault>>;
  const disputeFault = (staking: Staking, lie: Lie, from: Wallet) =>
    staking.write.disputeFault([lie.fault, lie.faultSignature, lie.receipt, lie.receiptSignature], { account: from!.account });

  let tags = 0;
  /** An attestation of machine 1 the provider never committed to (so its attestor cannot answer a dispute). */
  async function forged(s: S, attestor: Wallet) {
    const now = await latest(s);
    const { attestation } = machineCommitFixture({ tag: `replacement-${++tags}`, provider: s.provider!.account.address, machineId: 1, model: A100, issuedAt: now });
    const signed = await signAttestation(attestor!, s.domain, attestation);
    return { attestation, signature: signed.signature };
  }
  const disputeAttestation = (staking: Staking, a: { attestation: Attestation; signature: Hex }, from: Wallet) =>
    staking.write.disputeAttestation([a.attestation, a.signature], { account: from!.account });

  /** Deploys a staking replacing `predecessor`, attaches it and stakes the first two attestors' minimum in it. */
  async function replace(s: S, predecessor: Address) {
    const next = await deployStaking(connection, s as Suanli, predecessor);
    for (const w of s.attestors.slice(0, 2)) await next.write.stake([MIN_STAKE], { account: w!.account });
    return next;
  }

  /** What a refused dispute must leave untouched: the staking's balance, the liar's stake, every credit. */
  async function snapshot(s: S, staking: Staking, liar: Address) {
    const credits = await Promise.all(everyone(s).map((a) => staking.read.owed([a])));
    return { held: await balance(s as Suanli, staking.address), stake: await staking.read.stakeOf([liar]), credits };
  }

  it("refuses in the replacement a fault slashed in the old staking; another lie of the same attestor is slashed in it; the retired one takes no new dispute", async () => {
    const s = await load();
    const { viem } = connection;
    const a = s.staking;
    const liar = s.attestors[0]!;
    const attestor = getAddress(liar.account.address);
    const provider = getAddress(s.provider!.account.address);
    const { leaseId, activatedAt } = await openActive(s);

    const first = await falseFault(s, liar, leaseId, activatedAt + 5);
    await disputeFault(a, first, s.provider);
    const id = await a.read.faultDisputeId([first.fault, attestor]);
    assert.equal(await a.read.faultDisputed([id]), true);
    assert.equal(await a.read.owed([provider]), SLASH / 2n);

    const b = await replace(s, a.address);
    assert.equal(await b.read.predecessor(), getAddress(a.address));
    assert.equal(await a.read.predecessor(), zeroAddress);
    assert.equal(await s.registry.read.attestorStaking(), getAddress(b.address));
    // The id is the market domain's, so both stakings compute the same one.
    assert.equal(await b.read.faultDisputeId([first.fault, attestor]), id);
    assert.equal(await b.read.disputedIn([id]), getAddress(a.address));
    assert.equal(await b.read.faultDisputed([id]), false); // B's own record: it never slashed it

    const before = await snapshot(s, b, attestor);
    const providerBalance = await balance(s as Suanli, provider);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(b, first, s.provider), b, "DisputedInLineage", [id, getAddress(a.address)]);
    // Whoever sends it, and with another receipt that contradicts the same fault.
    const sameFaultOtherReceipt = { ...(await falseFault(s, liar, leaseId, activatedAt + 5, ms(FAULT_WINDOW))), fault: first.fault, faultSignature: first.faultSignature };
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(b, sameFaultOtherReceipt, s.other), b, "DisputedInLineage", [id, getAddress(a.address)]);
    assert.deepEqual(await snapshot(s, b, attestor), before);
    assert.deepEqual(before.stake, { active: MIN_STAKE, unbonding: 0n, unlockAt: 0, openDisputes: 0 });
    assert.equal(await balance(s as Suanli, provider), providerBalance);
    assert.equal(await a.read.owed([provider]), SLASH / 2n); // paid once

    // A lie not disputed in A is slashable in B, the registry's current staking.
    const second = await falseFault(s, liar, leaseId, activatedAt + 6);
    const secondId = await b.read.faultDisputeId([second.fault, attestor]);
    await viem.assertions.emitWithArgs(disputeFault(b, second, s.provider), b, "FaultDisputed", [attestor, leaseId, provider, activatedAt + 6, second.receipt.receivedAtMs, SLASH]);
    assert.equal((await b.read.stakeOf([attestor])).active, MIN_STAKE - SLASH);
    assert.equal(await b.read.owed([provider]), SLASH / 2n);
    assert.equal(await b.read.disputedIn([secondId]), getAddress(b.address));
    // The old staking, which still holds the liar's remaining stake, takes no new dispute: neither the lie B slashed...
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(a, second, s.provider), a, "NotCurrentStaking", [getAddress(b.address)]);
    // ...nor a lie that no staking saw. The dust-stake attack: anyone tops up the liar's old stake by 1 unit and the liar
    // disputes its own new lie in A, to have it recorded where almost nothing is at stake and refused in B. A refuses it,
    // and B slashes the lie from the stake that counts.
    const third = await falseFault(s, liar, leaseId, activatedAt + 7);
    await a.write.stakeFor([attestor, 1n], { account: s.other!.account });
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(a, third, liar), a, "NotCurrentStaking", [getAddress(b.address)]);
    await viem.assertions.emitWithArgs(disputeFault(b, third, s.other), b, "FaultDisputed", [
      attestor,
      leaseId,
      getAddress(s.other!.account.address),
      activatedAt + 7,
      third.receipt.receivedAtMs,
      MIN_STAKE - SLASH,
    ]);
    // What was left of its stake in B (the slash is capped by the stake).
    assert.equal((await b.read.stakeOf([attestor])).active, 0n);
    assert.equal((await a.read.stakeOf([attestor])).active, MIN_STAKE - SLASH + 1n);

    await assertBooks(s, everyone(s), 0n);
    await assertBooks(through(s, b), everyone(s), 0n);
  });

  it("refuses in the replacement an attestation disputed in the old staking, open or resolved; another attestation is disputable; open fees stay on the books", async () => {
    const s = await load();
    const { viem } = connection;
    const a = s.staking;
    const liar = s.attestors[0]!;
    const attestor = getAddress(liar.account.address);
    const provider = getAddress(s.provider!.account.address);
    const lie = await forged(s, liar);
    await disputeAttestation(a, lie, s.provider);
    const id = await a.read.attestationDigest([lie.attestation]);
    const b = await replace(s, a.address);
    assert.equal(await b.read.attestationDigest([lie.attestation]), id);

    // Open in A: refused in B (A's answer window decides it).
    let before = await snapshot(s, b, attestor);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeAttestation(b, lie, s.other), b, "DisputedInLineage", [id, getAddress(a.address)]);
    assert.deepEqual(await snapshot(s, b, attestor), before);
    await assertBooks(s, everyone(s), FEE);

    // Resolved (slashed) in A: still refused in B.
    await connection.networkHelpers.time.increase(ANSWER_WINDOW + 1);
    await a.write.resolveDispute([id]);
    assert.equal((await a.read.getDispute([id])).state, 3); // Slashed
    await assertBooks(s, everyone(s), 0n);
    before = await snapshot(s, b, attestor);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeAttestation(b, lie, s.provider), b, "DisputedInLineage", [id, getAddress(a.address)]);
    assert.deepEqual(await snapshot(s, b, attestor), before);
    assert.equal(await b.read.owed([provider]), 0n);

    // Another attestation by the same attestor: disputable in B; A, retired, takes no new dispute.
    const other = await forged(s, liar);
    await viem.assertions.emit(disputeAttestation(b, other, s.provider), b, "DisputeOpened");
    await assertBooks(through(s, b), everyone(s), FEE);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeAttestation(a, other, s.provider), a, "NotCurrentStaking", [getAddress(b.address)]);
    await assertBooks(s, everyone(s), 0n);
  });

  it("walks a chain of three: C refuses what A or B slashed, and neither A nor B takes a new dispute", async () => {
    const s = await load();
    const { viem } = connection;
    const a = s.staking;
    const liar = s.attestors[1]!;
    const attestor = getAddress(liar.account.address);
    const { leaseId, activatedAt } = await openActive(s);
    const inA = await falseFault(s, liar, leaseId, activatedAt + 1);
    await disputeFault(a, inA, s.provider);
    const lieA = await forged(s, liar);
    await disputeAttestation(a, lieA, s.provider);
    const b = await replace(s, a.address);
    const inB = await falseFault(s, liar, leaseId, activatedAt + 2);
    await disputeFault(b, inB, s.provider);
    const c = await replace(s, b.address);
    assert.equal(await c.read.predecessor(), getAddress(b.address));

    const idA = await c.read.faultDisputeId([inA.fault, attestor]);
    const idB = await c.read.faultDisputeId([inB.fault, attestor]);
    const attA = await c.read.attestationDigest([lieA.attestation]);
    assert.equal(await c.read.disputedIn([idA]), getAddress(a.address));
    assert.equal(await c.read.disputedIn([idB]), getAddress(b.address));
    const before = await snapshot(s, c, attestor);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(c, inA, s.provider), c, "DisputedInLineage", [idA, getAddress(a.address)]);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(c, inB, s.provider), c, "DisputedInLineage", [idB, getAddress(b.address)]);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeAttestation(c, lieA, s.provider), c, "DisputedInLineage", [attA, getAddress(a.address)]);
    assert.deepEqual(await snapshot(s, c, attestor), before);

    const inC = await falseFault(s, liar, leaseId, activatedAt + 3);
    await disputeFault(c, inC, s.provider);
    const idC = await c.read.faultDisputeId([inC.fault, attestor]);
    assert.equal(await c.read.disputedIn([idC]), getAddress(c.address));
    // A and B are retired: they take no new dispute, each naming C.
    for (const old of [a, b]) await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(old, inC, s.provider), old, "NotCurrentStaking", [getAddress(c.address)]);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(b, inA, s.provider), b, "NotCurrentStaking", [getAddress(c.address)]);

    for (const staking of [a, b, c]) await assertBooks(through(s, staking), everyone(s), staking === a ? FEE : 0n);
  });

  it("takes disputes only in the registry's current staking, and the registry attaches only the last one's successor: no rollback, no unrelated staking", async () => {
    const s = await load();
    const { viem } = connection;
    const a = s.staking;
    const liar = s.attestors[0]!;
    const { leaseId, activatedAt } = await openActive(s);
    const lie = await falseFault(s, liar, leaseId, activatedAt + 1);
    const attestation = await forged(s, liar);

    // A replacement deployed but not attached: the registry's current (A) does not lead to it.
    const pending = await connection.viem.deployContract("AttestorStaking", [s.registry.address, s.market.address, PARAMS(s.treasury!.account.address), a.address]);
    await s.token.write.approve([pending.address, 2n ** 256n - 1n], { account: liar.account });
    await pending.write.stake([MIN_STAKE], { account: liar.account });
    // Attestors stake in it before it is attached; it takes no dispute yet.
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(pending, lie, s.provider), pending, "NotCurrentStaking", [getAddress(a.address)]);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeAttestation(pending, attestation, s.provider), pending, "NotCurrentStaking", [getAddress(a.address)]);

    // An unrelated staking (no predecessor) cannot be attached: it would not see A's records.
    const fresh = await viem.deployContract("AttestorStaking", [s.registry.address, s.market.address, PARAMS(s.treasury!.account.address), zeroAddress]);
    await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.setAttestorStaking([fresh.address]), s.registry, "StakingNotSuccessor", [
      getAddress(fresh.address),
      zeroAddress,
      getAddress(a.address),
    ]);
    // None attached: nothing takes a dispute until governance attaches one again.
    await s.registry.write.setAttestorStaking([zeroAddress]);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(a, lie, s.provider), a, "NotCurrentStaking", [zeroAddress]);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeAttestation(a, attestation, s.provider), a, "NotCurrentStaking", [zeroAddress]);
    // The successor of the last one attached (A) may be attached, and takes the dispute; A may not come back.
    await s.registry.write.setAttestorStaking([pending.address]);
    await disputeFault(pending, lie, s.provider);
    const id = await a.read.faultDisputeId([lie.fault, getAddress(liar.account.address)]);
    assert.equal(await pending.read.disputedIn([id]), getAddress(pending.address));
    await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.setAttestorStaking([a.address]), s.registry, "StakingNotSuccessor", [
      getAddress(a.address),
      zeroAddress,
      getAddress(pending.address),
    ]);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(a, lie, s.provider), a, "NotCurrentStaking", [getAddress(pending.address)]);
    for (const staking of [a, pending, fresh]) await assertBooks(through(s, staking), everyone(s), 0n);
  });

  it("refuses a predecessor that is not a staking of the same registry and market, or whose fault window is smaller", async () => {
    const s = await load();
    const { viem } = connection;
    const params = PARAMS(s.treasury!.account.address);
    const deploy = (predecessor: Address, p = params) => viem.deployContract("AttestorStaking", [s.registry.address, s.market.address, p, predecessor]);
    // The contract has a view for each check: the custom error is read from its ABI.
    const artifact = s.staking;
    const nobody = s.other!.account.address;
    await viem.assertions.revertWithCustomErrorWithArgs(deploy(nobody), artifact, "PredecessorMismatch", [getAddress(nobody), "code"]);
    const otherMarket = await viem.deployContract("AttestorStaking", [s.registry.address, s.extension.address, params, zeroAddress]);
    await viem.assertions.revertWithCustomErrorWithArgs(deploy(otherMarket.address), artifact, "PredecessorMismatch", [getAddress(otherMarket.address), "market"]);
    const otherRegistry = await viem.deployContract("ProviderRegistry", [s.token.address, s.governance!.account.address, 3_600, 2]);
    const elsewhere = await viem.deployContract("AttestorStaking", [otherRegistry.address, s.market.address, params, zeroAddress]);
    await viem.assertions.revertWithCustomErrorWithArgs(deploy(elsewhere.address), artifact, "PredecessorMismatch", [getAddress(elsewhere.address), "registry"]);
    await viem.assertions.revertWithCustomErrorWithArgs(deploy(s.staking.address, { ...params, faultWindow: FAULT_WINDOW + 1 }), artifact, "ParamOutOfRange", [
      "faultWindow",
      BigInt(FAULT_WINDOW + 1),
      1n,
      BigInt(FAULT_WINDOW),
    ]);
    const lower = await deploy(s.staking.address, { ...params, faultWindow: FAULT_WINDOW - 10 });
    assert.equal(await lower.read.predecessor(), getAddress(s.staking.address));
    assert.equal(await lower.read.registry(), getAddress(s.registry.address));
    assert.equal(await lower.read.market(), getAddress(s.market.address));
  });

  it("keeps the fault-window history across a replacement: an old fault gets the predecessor's smaller window, and a lowering in the current one applies", async () => {
    const s = await load();
    const { viem } = connection;
    const a = s.staking;
    const params = PARAMS(s.treasury!.account.address);
    const liar = s.attestors[0]!;
    const { leaseId, activatedAt } = await openActive(s);
    // A's window: 30, lowered to 10 (at once), raised back to 30 (a day's notice).
    await a.write.setParams([{ ...params, faultWindow: 10 }]);
    await a.write.setParams([{ ...params, faultWindow: FAULT_WINDOW }]);
    const observedAt = activatedAt + 5;
    assert.equal(await a.read.faultWindowFor([observedAt]), 10);
    const b = await replace(s, a.address);
    // B was deployed with 30, but a fault observed under A's 10 keeps 10 in B.
    assert.equal(await b.read.faultWindowFor([observedAt]), 10);
    const late = await falseFault(s, liar, leaseId, observedAt, ms(20));
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(b, late, s.provider), b, "ReceiptOutsideWindow", [
      late.receipt.receivedAtMs,
      ms(observedAt + 1),
      ms(observedAt + 10),
    ]);
    // A fault observed a day after B's deployment gets B's own window.
    const deployedAt = await latest(s);
    assert.equal(await b.read.faultWindowFor([deployedAt + 86_400 + 1]), FAULT_WINDOW);
    // B lowers its window to 5: an attestor that waited 5 s is not slashed; A, retired, takes no dispute at all.
    await b.write.setParams([{ ...params, faultWindow: 5 }]);
    const afterLowering = await falseFault(s, liar, leaseId, observedAt + 1, ms(8));
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(b, afterLowering, s.provider), b, "ReceiptOutsideWindow", [
      afterLowering.receipt.receivedAtMs,
      ms(observedAt + 2),
      ms(observedAt + 1 + 5),
    ]);
    await viem.assertions.revertWithCustomErrorWithArgs(disputeFault(a, afterLowering, s.provider), a, "NotCurrentStaking", [getAddress(b.address)]);
    await disputeFault(b, await falseFault(s, liar, leaseId, observedAt + 2, ms(4)), s.provider);
    await assertBooks(s, everyone(s), 0n);
    await assertBooks(through(s, b), everyone(s), 0n);
  });
});
