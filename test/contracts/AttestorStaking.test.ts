import assert from "node:assert/strict";
import { getAddress, hashTypedData, keccak256, toBytes, zeroAddress, type Hex } from "viem";
import { signAttestation } from "../../common/chain/sign.js";
import { signPermitFields } from "../../common/chain/tx.js";
import { disputeCommitArgs, signCommit, type CommitFields } from "../../common/attest/commit.js";
import { suanliTypes, type Attestation } from "../../common/eip712.js";
import { machineCommitFixture } from "../support/machine-commit.js";
import { A100, ATTESTOR_ROLE, balance, connect, faultSignatures, latest, openActive, type Connection, type Suanli } from "./support/suanli.js";
import { ANSWER_WINDOW, FEE, MIN_STAKE, PARAMS, SLASH, UNBONDING, assertBooks, everyone, stakedSuanli } from "./support/staking.js";

describe("AttestorStaking", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });

  const fixture = () => stakedSuanli(connection);
  const blocklistFixture = () => stakedSuanli(connection, "BlocklistToken");
  const load = () => connection.networkHelpers.loadFixture(fixture);
  type S = Awaited<ReturnType<typeof fixture>>;
  const at = (t: number) => connection.networkHelpers.time.setNextBlockTimestamp(t);

  /** An attestation of machine 1 (8 units) by attestor `i`, for a challenge the provider may or may not have committed to. */
  async function attest(s: S, i = 0, overrides: Partial<Attestation> = {}) {
    const now = await latest(s);
    const made = machineCommitFixture({ tag: `${now}-${i}`, provider: s.provider!.account.address, machineId: 1, model: A100, issuedAt: now });
    const attestation: Attestation = { ...made.attestation, ...overrides };
    commits.set(attestation.challengeId, made.commit);
    const signed = await signAttestation(s.attestors[i]!, s.domain, attestation);
    return { attestation, signature: signed.signature, id: await s.staking.read.attestationDigest([attestation]) };
  }
  /** The provider's commit behind each attestation made by `attest`, by challenge id. */
  const commits = new Map<Hex, CommitFields>();
  const fieldsOf = (attestation: Attestation) => commits.get(attestation.challengeId)!;
  /** The commit as answerDispute takes it (roots, devices, the devices' byte order). */
  const argsOf = (attestation: Attestation) => disputeCommitArgs(fieldsOf(attestation));
  /** The provider's signed commit for an attestation's challenge, roots and GPUs. */
  function commitFor(s: S, attestation: Attestation, signer = s.provider, fields = fieldsOf(attestation)) {
    return signCommit(signer!, s.domain, fields);
  }

  it("counts an attestor only while it holds the minimum stake: its fault signatures and isAttestor follow the stake", async () => {
    const s = await load();
    const { viem } = connection;
    const [a0, a1, a2] = s.attestors.map((w) => w!.account.address);
    assert.equal(await s.registry.read.attestorStaking(), getAddress(s.staking.address));
    assert.equal(await s.registry.read.isAttestor([a0!]), true);
    assert.equal(await s.registry.read.isAttestor([a2!]), false); // holds the role, no stake
    // The unstaked attestor's signature does not count towards a fault.
    const { leaseId, activatedAt } = await openActive(s);
    const fault = { leaseId, kind: 1, observedAt: activatedAt + 1 };
    await connection.networkHelpers.time.increaseTo(activatedAt + 2);
    const withUnstaked = await faultSignatures(s, fault, [s.attestors[0], s.attestors[2]]);
    await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([fault, withUnstaked]), s.market, "NotAttestor", [getAddress(a2!)]);
    // Staking below the minimum is not enough; reaching it is.
    await s.staking.write.stake([MIN_STAKE - 1n], { account: s.attestors[2]!.account });
    assert.equal(await s.registry.read.isAttestor([a2!]), false);
    await s.staking.write.stake([1n], { account: s.attestors[2]!.account });
    assert.equal(await s.registry.read.isAttestor([a2!]), true);
    // A staked non-attestor (no role) never counts.
    await s.staking.write.stake([MIN_STAKE], { account: s.other!.account });
    assert.equal(await s.registry.read.isAttestor([s.other!.account.address]), false);
    // Requesting to unstake stops counting at once.
    await s.staking.write.requestUnstake([1n], { account: s.attestors[1]!.account });
    assert.equal(await s.registry.read.isAttestor([a1!]), false);
    await viem.assertions.emit(s.market.write.submitFault([fault, await faultSignatures(s, fault, [s.attestors[0], s.attestors[2]])]), s.market, "FaultSubmitted");
    // Governance can detach the staking (the role alone counts again), and only governance.
    await viem.assertions.revertWithCustomError(s.registry.write.setAttestorStaking([zeroAddress], { account: s.other!.account }), s.registry, "AccessControlUnauthorizedAccount");
    await s.registry.write.setAttestorStaking([zeroAddress]);
    assert.equal(await s.registry.read.isAttestor([a1!]), true);
    assert.equal(await s.registry.read.hasRole([ATTESTOR_ROLE, a1!]), true);
  });

  it("stakes with a permit, also when a front-runner spent the permit first, and withdraws only after the delay", async () => {
    const s = await load();
    const { viem } = connection;
    const w = s.attestors[2]!;
    await s.token.write.approve([s.staking.address, 0n], { account: w.account });
    const deadline = BigInt((await latest(s)) + 3600);
    const nonce = await s.token.read.nonces([w.account.address]);
    const chainId = await s.publicClient.getChainId();
    const {
      v,
      r,
      s: sigS,
    } = await signPermitFields(w, {
      owner: w.account.address,
      token: s.token.address,
      tokenName: "Suanli Test USD",
      chainId,
      spender: s.staking.address,
      value: MIN_STAKE,
      nonce,
      deadline,
    });
    // The front-runner submits the permit itself: the stake still goes through on the allowance it set.
    await s.token.write.permit([w.account.address, s.staking.address, MIN_STAKE, deadline, v, r, sigS], { account: s.other!.account });
    await s.staking.write.stakeWithPermit([MIN_STAKE, deadline, v, r, sigS], { account: w.account });
    assert.equal((await s.staking.read.stakeOf([w.account.address])).active, MIN_STAKE);
    // Unbonding: not before the delay.
    await s.staking.write.requestUnstake([MIN_STAKE], { account: w.account });
    const unlockAt = (await s.staking.read.stakeOf([w.account.address])).unlockAt;
    await viem.assertions.revertWithCustomErrorWithArgs(s.staking.write.withdraw({ account: w.account }), s.staking, "StillUnbonding", [getAddress(w.account.address), unlockAt]);
    await viem.assertions.revertWithCustomErrorWithArgs(s.staking.write.requestUnstake([1n], { account: w.account }), s.staking, "InsufficientStake", [
      getAddress(w.account.address),
      0n,
      1n,
    ]);
    await connection.networkHelpers.time.increaseTo(unlockAt);
    const before = await balance(s as Suanli, w.account.address);
    await s.staking.write.withdraw({ account: w.account });
    assert.equal(await balance(s as Suanli, w.account.address), before + MIN_STAKE);
    await viem.assertions.revertWithCustomError(s.staking.write.withdraw({ account: w.account }), s.staking, "NothingToWithdraw");
    // Another account may fund an attestor's stake (the devnet deployer does), but never take it out.
    await s.staking.write.stakeFor([w.account.address, MIN_STAKE], { account: s.other!.account });
    assert.equal(await s.registry.read.isAttestor([w.account.address]), true);
    await viem.assertions.revertWithCustomError(s.staking.write.requestUnstake([1n], { account: s.other!.account }), s.staking, "InsufficientStake");
    await assertBooks(s, everyone(s), 0n);
  });

  it("slashes an attestor that cannot produce the provider's signed commit: the fee back to the disputer, the whole slash to the sink", async () => {
    const s = await load();
    const { viem } = connection;
    // A forged attestation: the provider never took part in this challenge.
    const { attestation, signature, id } = await attest(s, 0);
    const attestor = getAddress(s.attestors[0]!.account.address);
    const provider = getAddress(s.provider!.account.address);
    await at((await latest(s)) + 10);
    await viem.assertions.emitWithArgs(s.staking.write.disputeAttestation([attestation, signature], { account: s.provider!.account }), s.staking, "DisputeOpened", [
      id,
      attestor,
      provider,
      provider,
      1,
      attestation.challengeId,
      (await latest(s)) + 10 + ANSWER_WINDOW,
      FEE,
    ]);
    await assertBooks(s, everyone(s), FEE);
    // The attestor cannot answer with a commit signed by anyone but the provider (here: itself).
    const forged = await commitFor(s, attestation, s.attestors[0]);
    await viem.assertions.revertWithCustomErrorWithArgs(
      s.staking.write.answerDispute([attestation, argsOf(attestation), forged], { account: s.attestors[0]!.account }),
      s.staking,
      "NotProviderCommit",
      [attestor, provider],
    );
    // Nor can it withdraw in the meantime, even after unbonding (unstaking does not shelter the stake).
    await s.staking.write.requestUnstake([MIN_STAKE], { account: s.attestors[0]!.account });
    // Resolving early is refused; after the window anyone resolves.
    await viem.assertions.revertWithCustomError(s.staking.write.resolveDispute([id], { account: s.other!.account }), s.staking, "AnswerWindowOpen");
    await connection.networkHelpers.time.increase(UNBONDING);
    await viem.assertions.revertWithCustomErrorWithArgs(s.staking.write.withdraw({ account: s.attestors[0]!.account }), s.staking, "DisputesOpen", [attestor, 1]);
    // No share to the disputer (issue #34, finding 6): the attestor itself could have been it.
    await viem.assertions.emitWithArgs(s.staking.write.resolveDispute([id], { account: s.other!.account }), s.staking, "AttestorSlashed", [
      id,
      attestor,
      SLASH,
      provider,
      0n,
      getAddress(s.treasury!.account.address),
      SLASH,
    ]);
    assert.equal((await s.staking.read.stakeOf([attestor])).unbonding, MIN_STAKE - SLASH);
    assert.equal(await s.staking.read.owed([provider]), FEE);
    assert.equal(await s.staking.read.owed([s.treasury!.account.address]), SLASH);
    await viem.assertions.revertWithCustomError(s.staking.write.answerDispute([attestation, argsOf(attestation), await commitFor(s, attestation)]), s.staking, "DisputeNotOpen");
    await assertBooks(s, everyone(s), 0n);
    const before = await balance(s as Suanli, provider);
    await s.staking.write.claim([provider], { account: s.provider!.account });
    assert.equal(await balance(s as Suanli, provider), before + FEE);
    await s.staking.write.withdraw({ account: s.attestors[0]!.account });
    await assertBooks(s, everyone(s), 0n);
  });

  it("an honest attestor answers with the provider's signed commit and earns the fee, whoever sends the answer", async () => {
    const s = await load();
    const { viem } = connection;
    const { attestation, signature, id } = await attest(s, 1);
    const attestor = getAddress(s.attestors[1]!.account.address);
    // The provider took part (signed the commit), then disputes hoping the attestor will not answer.
    const commit = await commitFor(s, attestation);
    await s.staking.write.disputeAttestation([attestation, signature], { account: s.provider!.account });
    // A commit for another root, or other GPUs, is not an answer.
    await viem.assertions.revertWithCustomError(
      s.staking.write.answerDispute([{ ...attestation, root: keccak256(toBytes("other")) }, argsOf(attestation), commit], { account: s.attestors[1]!.account }),
      s.staking,
      "DisputeNotOpen",
    );
    // The provider's commit to other roots is no answer for this attestation's root.
    const fields = fieldsOf(attestation);
    const otherRoots = { ...fields, roots: [keccak256(toBytes("other")), ...fields.roots.slice(1)] };
    const otherRoot = await commitFor(s, attestation, s.provider, otherRoots);
    await viem.assertions.revertWithCustomError(
      s.staking.write.answerDispute([attestation, argsOf(attestation), otherRoot], { account: s.attestors[1]!.account }),
      s.staking,
      "NotProviderCommit",
    );
    await viem.assertions.revertWithCustomErrorWithArgs(
      s.staking.write.answerDispute([attestation, disputeCommitArgs(otherRoots), otherRoot], { account: s.attestors[1]!.account }),
      s.staking,
      "CommitMismatch",
      ["root"],
    );
    // Nor a commit of fewer units, other GPUs, or the right GPUs in an order that is not sorted.
    const fewer = { ...fields, roots: fields.roots.slice(1), devices: fields.devices.slice(1) };
    await viem.assertions.revertWithCustomErrorWithArgs(
      s.staking.write.answerDispute([attestation, disputeCommitArgs(fewer), await commitFor(s, attestation, s.provider, fewer)], { account: s.attestors[1]!.account }),
      s.staking,
      "CommitMismatch",
      ["units"],
    );
    const otherGpus = { ...fields, devices: fields.devices.map((d) => `${d}-x`) };
    await viem.assertions.revertWithCustomErrorWithArgs(
      s.staking.write.answerDispute([attestation, disputeCommitArgs(otherGpus), await commitFor(s, attestation, s.provider, otherGpus)], { account: s.attestors[1]!.account }),
      s.staking,
      "CommitMismatch",
      ["gpus"],
    );
    const unit = argsOf(attestation);
    await viem.assertions.revertWithCustomErrorWithArgs(
      s.staking.write.answerDispute([attestation, { ...unit, sortedOrder: unit.devices.map((_, u) => u) }, commit], { account: s.attestors[1]!.account }),
      s.staking,
      "DeviceOrderInvalid",
      [1n],
    );
    await viem.assertions.revertWithCustomErrorWithArgs(
      s.staking.write.answerDispute([attestation, { ...unit, sortedOrder: [...unit.sortedOrder.slice(0, 7), unit.sortedOrder[0]!] }, commit], { account: s.attestors[1]!.account }),
      s.staking,
      "DeviceOrderInvalid",
      [7n],
    );
    // A front-runner copying the answer from the mempool gains nothing: the fee is credited to the attestor.
    await viem.assertions.emitWithArgs(s.staking.write.answerDispute([attestation, argsOf(attestation), commit], { account: s.other!.account }), s.staking, "DisputeAnswered", [
      id,
      attestor,
      FEE,
    ]);
    assert.equal(await s.staking.read.owed([attestor]), FEE);
    assert.equal(await s.staking.read.owed([s.other!.account.address]), 0n);
    assert.equal((await s.staking.read.stakeOf([attestor])).active, MIN_STAKE);
    await viem.assertions.revertWithCustomError(s.staking.write.resolveDispute([id]), s.staking, "DisputeNotOpen");
    // One dispute per attestation.
    await viem.assertions.revertWithCustomErrorWithArgs(s.staking.write.disputeAttestation([attestation, signature], { account: s.other!.account }), s.staking, "AlreadyDisputed", [
      id,
    ]);
    await assertBooks(s, everyone(s), 0n);
  });

  it("refuses a held-back answer, a dispute of an expired attestation or of an unstaked signer, and a self-dispute recovers nothing", async () => {
    const s = await load();
    const { viem } = connection;
    const { attestation, signature, id } = await attest(s, 0);
    await s.staking.write.disputeAttestation([attestation, signature], { account: s.provider!.account });
    const answerBy = (await s.staking.read.getDispute([id])).answerBy;
    await at(answerBy + 1);
    await viem.assertions.revertWithCustomErrorWithArgs(
      s.staking.write.answerDispute([attestation, argsOf(attestation), await commitFor(s, attestation)], { account: s.attestors[0]!.account }),
      s.staking,
      "AnswerWindowClosed",
      [id, answerBy],
    );
    // Expired attestations no longer count anywhere, so they can no longer be disputed.
    const old = await attest(s, 1, { expiry: (await latest(s)) + 10 });
    await connection.networkHelpers.time.increase(20);
    await viem.assertions.revertWithCustomErrorWithArgs(s.staking.write.disputeAttestation([old.attestation, old.signature]), s.staking, "AttestationExpired", [
      old.attestation.expiry,
    ]);
    // The unstaked third attestor's attestations count nowhere and have nothing to slash.
    const unstaked = await attest(s, 2);
    await viem.assertions.revertWithCustomError(s.staking.write.disputeAttestation([unstaked.attestation, unstaked.signature]), s.staking, "NothingAtStake");
    // Self-dealing: the attestor disputes its own attestation to get out at once; it recovers nothing of the slash.
    const own = await attest(s, 1);
    const a1 = s.attestors[1]!;
    const before = await balance(s as Suanli, a1.account.address);
    await s.staking.write.disputeAttestation([own.attestation, own.signature], { account: a1.account });
    await connection.networkHelpers.time.increase(ANSWER_WINDOW + 1);
    await s.staking.write.resolveDispute([own.id]);
    await s.staking.write.claim([a1.account.address], { account: a1.account });
    assert.equal(await balance(s as Suanli, a1.account.address), before); // paid FEE, got FEE back and nothing more
    assert.equal((await s.staking.read.stakeOf([a1.account.address])).active, MIN_STAKE - SLASH); // lost SLASH from stake: net -SLASH
    assert.equal(await s.registry.read.isAttestor([a1.account.address]), false); // and stops counting
    await s.staking.write.resolveDispute([id]);
    await assertBooks(s, everyone(s), 0n);
  });

  it("keeps a payout for a receiver that the token refuses, claimable to another address; the slash still lands", async () => {
    const s = await connection.networkHelpers.loadFixture(blocklistFixture);
    const { viem } = connection;
    const token = await viem.getContractAt("BlocklistToken", s.token.address);
    const { attestation, signature, id } = await attest(s as unknown as S, 0);
    await s.staking.write.disputeAttestation([attestation, signature], { account: s.provider!.account });
    // The disputer and the sink are blocked: resolving never transfers, so it cannot be held up.
    await token.write.setBlocked([s.provider!.account.address, true]);
    await token.write.setBlocked([s.treasury!.account.address, true]);
    await connection.networkHelpers.time.increase(ANSWER_WINDOW + 1);
    await s.staking.write.resolveDispute([id]);
    await viem.assertions.revertWithCustomError(s.staking.write.claim([s.provider!.account.address], { account: s.provider!.account }), token, "AccountBlocked");
    const owed = await s.staking.read.owed([s.provider!.account.address]);
    assert.equal(owed, FEE);
    const to = s.renter!.account.address;
    const before = await balance(s as Suanli, to);
    await s.staking.write.claim([to], { account: s.provider!.account });
    assert.equal(await balance(s as Suanli, to), before + owed);
    await assertBooks(s as unknown as S, everyone(s as unknown as S), 0n);
  });

  it("disputes the attestation the attestor signed, confidential-computing identities (cc) included: the digest is EIP-712's, and another cc is another signer", async () => {
    const s = await load();
    const cc = keccak256(toBytes("GH100:48B02D92494BADF4"));
    const { attestation, signature, id } = await attest(s, 0, { cc });
    assert.equal(id, hashTypedData({ domain: s.domain, types: suanliTypes, primaryType: "Attestation", message: attestation }));
    // The same signature over an attestation claiming no CC verification (or another GPU) recovers some other key, with nothing at stake.
    for (const other of [`0x${"00".repeat(32)}` as Hex, keccak256(toBytes("GH100:0000000000000000"))]) {
      await assert.rejects(s.staking.write.disputeAttestation([{ ...attestation, cc: other }, signature], { account: s.provider!.account }), /NothingAtStake/);
    }
    await s.staking.write.disputeAttestation([attestation, signature], { account: s.provider!.account });
    assert.equal((await s.staking.read.getDispute([id])).attestor, getAddress(s.attestors[0]!.account.address));
  });

  it("lets only the registry's governance set parameters, each within its bounds", async () => {
    const s = await load();
    const { viem } = connection;
    const ok = PARAMS(s.treasury!.account.address);
    await viem.assertions.revertWithCustomErrorWithArgs(s.staking.write.setParams([ok], { account: s.other!.account }), s.staking, "NotGovernance", [
      getAddress(s.other!.account.address),
    ]);
    await viem.assertions.revertWithCustomErrorWithArgs(s.staking.write.setParams([{ ...ok, minStake: 0n }]), s.staking, "ParamOutOfRange", ["minStake", 0n, 1n, 2n ** 96n - 1n]);
    await viem.assertions.revertWithCustomErrorWithArgs(s.staking.write.setParams([{ ...ok, disputerShareBps: 5_001 }]), s.staking, "ParamOutOfRange", [
      "disputerShareBps",
      5_001n,
      0n,
      5_000n,
    ]);
    await viem.assertions.revertWithCustomErrorWithArgs(s.staking.write.setParams([{ ...ok, answerWindow: 60 }]), s.staking, "ParamOutOfRange", [
      "answerWindow",
      60n,
      600n,
      30n * 86_400n,
    ]);
    await viem.assertions.revertWithCustomErrorWithArgs(s.staking.write.setParams([{ ...ok, unbondingDelay: ANSWER_WINDOW - 1 }]), s.staking, "ParamOutOfRange", [
      "unbondingDelay",
      BigInt(ANSWER_WINDOW - 1),
      BigInt(ANSWER_WINDOW),
      90n * 86_400n,
    ]);
    await viem.assertions.revertWithCustomError(s.staking.write.setParams([{ ...ok, sink: zeroAddress }]), s.staking, "ZeroSink");
    // Raising the minimum stake drops attestors below it at once.
    await viem.assertions.emit(s.staking.write.setParams([{ ...ok, minStake: MIN_STAKE + 1n }]), s.staking, "ParamsChanged");
    assert.equal(await s.registry.read.isAttestor([s.attestors[0]!.account.address]), false);
  });
});
