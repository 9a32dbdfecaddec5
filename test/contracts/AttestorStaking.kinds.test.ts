/**
 * Issue #34, findings 3 and 6, performed as attacks on the real contracts:
 * - 3: a lying quorum signs a false fault under a kind nobody can dispute. The market takes only the defined kinds
 *   (1 unresponsive, 2 capacity), and a capacity fault is disputed with its signer's own Attestation that the leased
 *   machine passed inside the fault window (disputeCapacityFault), as a liveness fault is with its ProbeReceipt.
 * - 6: a liar disputes its own attestation first to collect the disputer's share: none is paid any more, so it ends
 *   exactly where an honest disputer would have left it.
 */
import assert from "node:assert/strict";
import { getAddress, keccak256, toBytes, type Hex } from "viem";
import { signProbeReceipt } from "../../common/attest/liveness.js";
import { signAttestation, signFault } from "../../common/chain/sign.js";
import { FaultKind, type Attestation, type Fault } from "../../common/eip712.js";
import { machineCommitFixture } from "../support/machine-commit.js";
import { A100, balance, connect, faultSignatures, latest, openActive, type Connection, type Suanli } from "./support/suanli.js";
import { ANSWER_WINDOW, FAULT_WINDOW, MIN_STAKE, SLASH, assertBooks, everyone, stakedSuanli, type StakedSuanli } from "./support/staking.js";

type S = StakedSuanli;
type Wallet = S["provider"];

describe("AttestorStaking: every fault kind is disputable, and a liar gains nothing by disputing itself (issue #34, findings 3 and 6)", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  const fixture = () => stakedSuanli(connection);
  const load = () => connection.networkHelpers.loadFixture(fixture);

  let tags = 0;
  /** `signer`'s attestation that machine 1 of the provider passed a challenge (8 units unless given), issued at `issuedAt`. */
  async function passBy(s: S, signer: Wallet, issuedAt: number, overrides: Partial<Attestation> = {}) {
    const made = machineCommitFixture({ tag: `kinds-${++tags}`, provider: s.provider!.account.address, machineId: 1, model: A100, issuedAt });
    const attestation: Attestation = { ...made.attestation, ...overrides };
    return { attestation, signature: (await signAttestation(signer!, s.domain, attestation)).signature };
  }
  async function faultBy(s: S, signer: Wallet, fault: Fault) {
    return { fault, signature: await signFault(signer!, s.domain, fault) };
  }
  const disputeCapacity = (s: S, f: { fault: Fault; signature: Hex }, p: { attestation: Attestation; signature: Hex }, from: Wallet = s.provider) =>
    s.staking.write.disputeCapacityFault([f.fault, f.signature, p.attestation, p.signature], { account: from!.account });

  it("refuses every undefined fault kind with InvalidFaultKind naming it, and takes kinds 1 and 2", async () => {
    const s = await load();
    const { leaseId, activatedAt } = await openActive(s as Suanli);
    await connection.networkHelpers.time.increase(20);
    for (const kind of [0, 3, 7, 255]) {
      const fault = { leaseId, kind, observedAt: activatedAt + 5 };
      await connection.viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([fault, await faultSignatures(s as Suanli, fault)]), s.market, "InvalidFaultKind", [
        kind,
      ]);
    }
    for (const kind of [FaultKind.unresponsive, FaultKind.capacity]) {
      const { leaseId: id, activatedAt: at } = await openActive(s as Suanli);
      await connection.networkHelpers.time.increase(20);
      const fault = { leaseId: id, kind, observedAt: at + 5 };
      await connection.viem.assertions.emit(s.market.write.submitFault([fault, await faultSignatures(s as Suanli, fault)]), s.market, "FaultSubmitted");
      assert.equal((await s.market.read.getLease([id])).endReason, 3); // Faulted
    }
  });

  it("a lying quorum's false capacity fault lands, and each liar is slashed with its own attestation of the machine passing inside the window", async () => {
    const s = await load();
    const provider = getAddress(s.provider!.account.address);
    const sink = getAddress(s.treasury!.account.address);
    const { leaseId, activatedAt } = await openActive(s as Suanli);
    const observedAt = activatedAt + 5;
    // Both liars passed the leased machine 3 s after the second they say it failed their challenge.
    const passes = await Promise.all(s.attestors.slice(0, 2).map((w) => passBy(s, w, observedAt + 3)));
    const fault: Fault = { leaseId, kind: FaultKind.capacity, observedAt };
    await connection.networkHelpers.time.increase(20);
    await s.market.write.submitFault([fault, await faultSignatures(s as Suanli, fault)]);
    const providerOwedBefore = await s.staking.read.owed([provider]);
    for (const [i, liar] of s.attestors.slice(0, 2).entries()) {
      const attestor = getAddress(liar!.account.address);
      const f = await faultBy(s, liar, fault);
      // Its probe receipts would not do: a ProbeReceipt contradicts a liveness fault only.
      const receipt = { leaseId, challenge: keccak256(toBytes(`probe-kinds-${i}`)), receivedAtMs: BigInt(observedAt + 2) * 1000n };
      await connection.viem.assertions.revertWithCustomErrorWithArgs(
        s.staking.write.disputeFault([f.fault, f.signature, receipt, await signProbeReceipt(liar!, s.domain, receipt)], { account: s.provider!.account }),
        s.staking,
        "NotALivenessFault",
        [FaultKind.capacity],
      );
      const id = await s.staking.read.faultDisputeId([fault, attestor]);
      // Sent by anyone (here the liar itself, racing the provider): the share still goes to the provider.
      await connection.viem.assertions.emitWithArgs(disputeCapacity(s, f, passes[i]!, liar), s.staking, "AttestorSlashed", [
        id,
        attestor,
        SLASH,
        provider,
        SLASH / 2n,
        sink,
        SLASH / 2n,
      ]);
      assert.equal((await s.staking.read.stakeOf([attestor])).active, MIN_STAKE - SLASH);
      await connection.viem.assertions.revertWithCustomErrorWithArgs(disputeCapacity(s, f, passes[i]!), s.staking, "AlreadyDisputed", [id]);
    }
    assert.equal((await s.staking.read.owed([provider])) - providerOwedBefore, SLASH);
    await assertBooks(s, everyone(s), 0n);
  });

  it("takes a capacity fault's contradiction only from its signer, of the lease's machine and units, issued in (observedAt, observedAt + faultWindow]", async () => {
    const s = await load();
    const [liar, honest] = [s.attestors[0]!, s.attestors[1]!];
    await s.staking.write.stake([4n * MIN_STAKE], { account: liar.account });
    const attestor = getAddress(liar.account.address);
    const { leaseId, activatedAt } = await openActive(s as Suanli);
    const { assertions } = connection.viem;
    const faultAt = async (offset: number) => faultBy(s, liar, { leaseId, kind: FaultKind.capacity, observedAt: activatedAt + offset });

    const f = await faultAt(10);
    const at = f.fault.observedAt;
    for (const issuedAt of [at, at - 5, at + FAULT_WINDOW + 1]) {
      await assertions.revertWithCustomErrorWithArgs(disputeCapacity(s, f, await passBy(s, liar, issuedAt)), s.staking, "AttestationOutsideWindow", [
        issuedAt,
        BigInt(at + 1),
        BigInt(at + FAULT_WINDOW),
      ]);
    }
    const provider2 = getAddress(s.provider2!.account.address);
    for (const [overrides, args] of [
      [{ machineId: 2 }, [leaseId, getAddress(s.provider!.account.address), 2, 8]],
      [{ provider: provider2 }, [leaseId, provider2, 1, 8]],
      [{ units: 1 }, [leaseId, getAddress(s.provider!.account.address), 1, 1]], // the lease holds 2 units
    ] as const) {
      await assertions.revertWithCustomErrorWithArgs(disputeCapacity(s, f, await passBy(s, liar, at + 1, overrides)), s.staking, "AttestationNotOfLease", [...args]);
    }
    // Another attestor's pass contradicts nothing this one signed.
    await assertions.revertWithCustomErrorWithArgs(disputeCapacity(s, f, await passBy(s, honest, at + 1)), s.staking, "SignersDiffer", [
      attestor,
      getAddress(honest.account.address),
    ]);
    // A liveness fault goes to disputeFault.
    const liveness = await faultBy(s, liar, { leaseId, kind: FaultKind.unresponsive, observedAt: at });
    await assertions.revertWithCustomErrorWithArgs(disputeCapacity(s, liveness, await passBy(s, liar, at + 1)), s.staking, "NotACapacityFault", [1]);
    // The window's both ends, to the second; the pass need not be in force any more (expiry is not the question).
    await assertions.emit(disputeCapacity(s, f, await passBy(s, liar, at + 1, { expiry: at + 2 })), s.staking, "FaultDisputed");
    const g = await faultAt(20);
    await assertions.emitWithArgs(disputeCapacity(s, g, await passBy(s, liar, g.fault.observedAt + FAULT_WINDOW)), s.staking, "FaultDisputed", [
      attestor,
      leaseId,
      getAddress(s.provider!.account.address),
      g.fault.observedAt,
      BigInt(g.fault.observedAt + FAULT_WINDOW) * 1000n,
      SLASH,
    ]);
    await assertBooks(s, everyone(s), 0n);
  });

  it("a liar that disputes its own attestation first ends no better off than when the honest disputer does", async () => {
    /** What the liar (its stake plus everything it and its second address hold or are owed) is worth after the dispute. */
    async function liarAfter(selfDispute: boolean) {
      const s = await load();
      const liar = s.attestors[0]!;
      // The liar's accomplice address, funded like anyone (stakedSuanli approved the staking for it).
      const accomplice = s.other!;
      const worth = async () => {
        let sum = 0n;
        for (const w of [liar, accomplice]) {
          const a = w.account.address;
          const stake = await s.staking.read.stakeOf([a]);
          sum += (await balance(s as Suanli, a)) + stake.active + stake.unbonding + (await s.staking.read.owed([a]));
        }
        return sum;
      };
      const honestBefore = (await balance(s as Suanli, s.provider!.account.address)) + (await s.staking.read.owed([s.provider!.account.address]));
      const before = await worth();
      const made = machineCommitFixture({ tag: `forged-${++tags}`, provider: s.provider!.account.address, machineId: 1, model: A100, issuedAt: await latest(s as Suanli) });
      const signed = await signAttestation(liar, s.domain, made.attestation);
      const id = await s.staking.read.attestationDigest([made.attestation]);
      // The race: the liar's own dispute lands first; the honest provider's is then refused.
      if (selfDispute) await s.staking.write.disputeAttestation([made.attestation, signed.signature], { account: accomplice.account });
      const honest = s.staking.write.disputeAttestation([made.attestation, signed.signature], { account: s.provider!.account });
      if (selfDispute) await connection.viem.assertions.revertWithCustomErrorWithArgs(honest, s.staking, "AlreadyDisputed", [id]);
      else await honest;
      await connection.networkHelpers.time.increase(ANSWER_WINDOW + 1);
      await s.staking.write.resolveDispute([id]);
      assert.equal(await s.staking.read.owed([s.treasury!.account.address]), SLASH); // all of it to the sink
      const honestAfter = (await balance(s as Suanli, s.provider!.account.address)) + (await s.staking.read.owed([s.provider!.account.address]));
      assert.equal(honestAfter, honestBefore); // the honest disputer's fee came back, or it never paid one
      await assertBooks(s, everyone(s), 0n);
      return (await worth()) - before;
    }
    const honestlyDisputed = await liarAfter(false);
    const selfDisputed = await liarAfter(true);
    assert.equal(honestlyDisputed, -SLASH);
    assert.equal(selfDisputed, honestlyDisputed); // was -SLASH / 2 with the share paid to the first disputer
  });
});
