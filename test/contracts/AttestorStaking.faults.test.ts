/**
 * AttestorStaking.disputeFault: a liveness fault contradicted by the same attestor's signed ProbeReceipt slashes it
 * at once. Every refusal is checked with its exact error and, where the rule decides, against the node's own rule
 * (common/attest/liveness.ts receiptContradictsFault) so that the two can never drift apart.
 */
import assert from "node:assert/strict";
import { encodeAbiParameters, encodeFunctionData, getAddress, hashTypedData, keccak256, parseEventLogs, toBytes, type Hex } from "viem";
import { receiptContradictsFault, recoverProbeReceiptSigner, signProbeReceipt } from "../../common/attest/liveness.js";
import { signFault } from "../../common/chain/sign.js";
import { suanliTypes, type Fault, type ProbeReceipt } from "../../common/eip712.js";
import { SECP256K1_N } from "../../common/signature.js";
import { MAX_FAULT_WINDOW_SECONDS } from "../../node/attest/faults/index.js";
import { balance, connect, latest, openActive, type Connection, type Suanli } from "./support/suanli.js";
import { FAULT_WINDOW, MIN_STAKE, PARAMS, SLASH, assertBooks, everyone, stakedSuanli, type StakedSuanli } from "./support/staking.js";

type S = StakedSuanli;
type Wallet = S["provider"];

function typeString(name: keyof typeof suanliTypes): string {
  return `${name}(${suanliTypes[name].map((field) => `${field.type} ${field.name}`).join(",")})`;
}

/** The same signature with s' = n - s and v flipped: ecrecover gives the same key, OpenZeppelin ECDSA refuses it. */
function malleate(signature: Hex): Hex {
  const s = BigInt(`0x${signature.slice(66, 130)}`);
  const v = parseInt(signature.slice(130), 16);
  return `${signature.slice(0, 66)}${(SECP256K1_N - s).toString(16).padStart(64, "0")}${(v === 27 ? 28 : 27).toString(16)}` as Hex;
}

describe("AttestorStaking: disputeFault (a liveness fault its attestor's own receipt contradicts)", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });

  const fixture = () => stakedSuanli(connection);
  const blocklistFixture = () => stakedSuanli(connection, "BlocklistToken");
  const load = () => connection.networkHelpers.loadFixture(fixture);

  let probes = 0;
  /** `signer`'s liveness fault (kind 1 unless given) of `leaseId` at `observedAt`. */
  async function faultBy(s: S, signer: Wallet, leaseId: bigint, observedAt: number, kind = 1) {
    const fault: Fault = { leaseId, kind, observedAt };
    return { fault, signature: await signFault(signer!, s.domain, fault) };
  }
  /** `signer`'s receipt of a heartbeat for a fresh probe of `leaseId`, received at `receivedAtMs`. */
  async function receiptBy(s: S, signer: Wallet, leaseId: bigint, receivedAtMs: bigint) {
    const receipt: ProbeReceipt = { leaseId, challenge: keccak256(toBytes(`probe-${++probes}`)), receivedAtMs };
    return { receipt, signature: await signProbeReceipt(signer!, s.domain, receipt) };
  }
  /** The dispute id computed off-chain, as a node would: keccak256(abi.encode(fault digest, signer)). */
  function faultId(s: S, fault: Fault, attestor: Hex): Hex {
    const digest = hashTypedData({ domain: s.domain, types: { Fault: suanliTypes.Fault }, primaryType: "Fault", message: fault });
    return keccak256(encodeAbiParameters([{ type: "bytes32" }, { type: "address" }], [digest, attestor]));
  }
  const dispute = (s: S, f: { fault: Fault; signature: Hex }, r: { receipt: ProbeReceipt; signature: Hex }, from: Wallet = s.provider) =>
    s.staking.write.disputeFault([f.fault, f.signature, r.receipt, r.signature], { account: from!.account });
  const ms = (seconds: number) => BigInt(seconds) * 1000n;

  it("states the Fault and ProbeReceipt types exactly as common/eip712.ts signs them", async () => {
    const s = await load();
    assert.equal(await s.staking.read.FAULT_TYPEHASH(), keccak256(toBytes(typeString("Fault"))));
    assert.equal(await s.staking.read.FAULT_TYPEHASH(), await s.market.read.FAULT_TYPEHASH());
    assert.equal(await s.staking.read.PROBE_RECEIPT_TYPEHASH(), keccak256(toBytes(typeString("ProbeReceipt"))));
    assert.equal((await s.staking.read.params()).faultWindow, FAULT_WINDOW);
  });

  it("slashes at once an attestor that signed a fault and a receipt inside its window: half to the disputer, the rest to the sink, the books balance", async () => {
    const s = await load();
    const liar = s.attestors[0]!;
    const attestor = getAddress(liar.account.address);
    const provider = getAddress(s.provider!.account.address);
    const sink = getAddress(s.treasury!.account.address);
    const { leaseId, activatedAt } = await openActive(s);
    const observedAt = activatedAt + 5;
    // It counted the provider's heartbeat 2.345 s after observedAt's second, yet signed that it heard nothing for the window.
    const f = await faultBy(s, liar, leaseId, observedAt);
    const r = await receiptBy(s, liar, leaseId, ms(observedAt + 2) + 345n);
    assert.equal(receiptContradictsFault(f.fault, r.receipt, FAULT_WINDOW), true);
    const id = faultId(s, f.fault, attestor);
    assert.equal(await s.staking.read.faultDisputeId([f.fault, attestor]), id);
    assert.equal(await s.staking.read.faultDisputed([id]), false);
    const providerBefore = await balance(s as Suanli, provider);

    const hash = await dispute(s, f, r);
    const { logs } = await s.publicClient.waitForTransactionReceipt({ hash });
    const events = parseEventLogs({ abi: s.staking.abi, logs }).filter((e) => e.eventName !== "AttestorStakeChanged");
    assert.deepEqual(
      events.map((e) => [e.eventName, e.args]),
      [
        ["AttestorSlashed", { id, attestor, amount: SLASH, disputer: provider, toDisputer: SLASH / 2n, sink, toSink: SLASH / 2n }],
        ["FaultDisputed", { attestor, leaseId, disputer: provider, observedAt, receivedAtMs: r.receipt.receivedAtMs, slashed: SLASH }],
      ],
    );
    assert.equal(await s.staking.read.faultDisputed([id]), true);
    assert.deepEqual(await s.staking.read.stakeOf([attestor]), { active: MIN_STAKE - SLASH, unbonding: 0n, unlockAt: 0, openDisputes: 0 });
    assert.equal(await s.staking.read.owed([provider]), SLASH / 2n);
    assert.equal(await s.staking.read.owed([sink]), SLASH / 2n);
    assert.equal(await s.registry.read.isAttestor([attestor]), false); // below minStake: its signatures stop counting
    assert.equal(await balance(s as Suanli, provider), providerBefore); // credited, not sent: nothing to refuse
    await assertBooks(s, everyone(s), 0n);

    // The same fault again, with another receipt that contradicts it, slashes nothing more.
    const again = await receiptBy(s, liar, leaseId, ms(observedAt + FAULT_WINDOW));
    await connection.viem.assertions.revertWithCustomErrorWithArgs(dispute(s, f, again), s.staking, "AlreadyDisputed", [id]);
    // Another false fault takes what is left (slashAmount is capped by the stake); then there is nothing at stake.
    const second = await faultBy(s, liar, leaseId, observedAt + 1);
    await connection.viem.assertions.emitWithArgs(dispute(s, second, again), s.staking, "FaultDisputed", [
      attestor,
      leaseId,
      provider,
      observedAt + 1,
      again.receipt.receivedAtMs,
      MIN_STAKE - SLASH,
    ]);
    assert.equal((await s.staking.read.stakeOf([attestor])).active, 0n);
    const third = await faultBy(s, liar, leaseId, observedAt + 2);
    await connection.viem.assertions.revertWithCustomErrorWithArgs(dispute(s, third, again), s.staking, "NothingAtStake", [attestor]);
    const paid = MIN_STAKE / 2n; // half of SLASH plus half of the remaining MIN_STAKE - SLASH
    assert.equal(await s.staking.read.owed([provider]), paid);
    await s.staking.write.claim([provider], { account: s.provider!.account });
    assert.equal(await balance(s as Suanli, provider), providerBefore + paid);
    await assertBooks(s, everyone(s), 0n);
  });

  it("takes a receipt from (observedAt + 1) s to observedAt + faultWindow s, to the millisecond, and nothing outside", async () => {
    const s = await load();
    const liar = s.attestors[1]!;
    await s.staking.write.stake([4n * MIN_STAKE], { account: liar.account }); // enough for both accepted cases
    const { leaseId, activatedAt } = await openActive(s);
    const cases = [
      { name: "a millisecond before observedAt's next second", offsetMs: 1000n - 1n, contradicts: false },
      { name: "at observedAt's next second", offsetMs: 1000n, contradicts: true },
      { name: "at the window's last millisecond", offsetMs: ms(FAULT_WINDOW), contradicts: true },
      { name: "a millisecond after the window", offsetMs: ms(FAULT_WINDOW) + 1n, contradicts: false },
      { name: "before observedAt", offsetMs: -5_000n, contradicts: false },
    ];
    for (const [i, c] of cases.entries()) {
      const observedAt = activatedAt + 10 * (i + 1); // one fault per case: each can be slashed once
      const f = await faultBy(s, liar, leaseId, observedAt);
      const r = await receiptBy(s, liar, leaseId, ms(observedAt) + c.offsetMs);
      assert.equal(receiptContradictsFault(f.fault, r.receipt, FAULT_WINDOW), c.contradicts, c.name);
      if (c.contradicts) {
        await connection.viem.assertions.emit(dispute(s, f, r), s.staking, "FaultDisputed");
      } else {
        await connection.viem.assertions.revertWithCustomErrorWithArgs(dispute(s, f, r), s.staking, "ReceiptOutsideWindow", [
          r.receipt.receivedAtMs,
          ms(observedAt + 1),
          ms(observedAt + FAULT_WINDOW),
        ]);
      }
    }
    assert.equal((await s.staking.read.stakeOf([liar.account.address])).active, 5n * MIN_STAKE - 2n * SLASH);
    await assertBooks(s, everyone(s), 0n);
  });

  it("refuses another lease, a capacity fault, a receipt or fault signed by someone else, an unstaked signer and malleable or compact signatures", async () => {
    const s = await load();
    const { viem } = connection;
    const [liar, honest, unstaked] = s.attestors;
    const { leaseId, activatedAt } = await openActive(s);
    const observedAt = activatedAt + 5;
    const inWindow = ms(observedAt + 3);
    const f = await faultBy(s, liar, leaseId, observedAt);
    const r = await receiptBy(s, liar, leaseId, inWindow);

    // A receipt of another lease says nothing about this one.
    const otherLease = await receiptBy(s, liar, leaseId + 1n, inWindow);
    assert.equal(receiptContradictsFault(f.fault, otherLease.receipt, FAULT_WINDOW), false);
    await viem.assertions.revertWithCustomErrorWithArgs(dispute(s, f, otherLease), s.staking, "LeaseMismatch", [leaseId, leaseId + 1n]);
    // A capacity fault (kind 2) rests on a transcript, not on silence: a receipt does not contradict it.
    const capacity = await faultBy(s, liar, leaseId, observedAt, 2);
    await viem.assertions.revertWithCustomErrorWithArgs(dispute(s, capacity, r), s.staking, "NotALivenessFault", [2]);
    // The provider forges a receipt in the attestor's name: it recovers to the provider, not to the fault's signer.
    const forged = await receiptBy(s, s.provider, leaseId, inWindow);
    await viem.assertions.revertWithCustomErrorWithArgs(dispute(s, f, forged), s.staking, "SignersDiffer", [
      getAddress(liar!.account.address),
      getAddress(s.provider!.account.address),
    ]);
    // One attestor's receipt is no evidence against another attestor's fault.
    const honestFault = await faultBy(s, honest, leaseId, observedAt);
    await viem.assertions.revertWithCustomErrorWithArgs(dispute(s, honestFault, r), s.staking, "SignersDiffer", [
      getAddress(honest!.account.address),
      getAddress(liar!.account.address),
    ]);
    // A signer with nothing staked has nothing to slash.
    const unstakedFault = await faultBy(s, unstaked, leaseId, observedAt);
    const unstakedReceipt = await receiptBy(s, unstaked, leaseId, inWindow);
    await viem.assertions.revertWithCustomErrorWithArgs(dispute(s, unstakedFault, unstakedReceipt), s.staking, "NothingAtStake", [getAddress(unstaked!.account.address)]);
    // High-s twins recover to the same key in ecrecover but are refused, as the market refuses them (and so does the node).
    assert.equal(await recoverProbeReceiptSigner(s.domain, r.receipt, malleate(r.signature)), undefined);
    await viem.assertions.revertWithCustomError(dispute(s, { ...f, signature: malleate(f.signature) }, r), s.staking, "InvalidFaultSignature");
    await viem.assertions.revertWithCustomError(dispute(s, f, { ...r, signature: malleate(r.signature) }), s.staking, "InvalidReceiptSignature");
    // So are 64-byte EIP-2098 compact signatures and garbage.
    await viem.assertions.revertWithCustomError(dispute(s, { ...f, signature: f.signature.slice(0, 130) as Hex }, r), s.staking, "InvalidFaultSignature");
    await viem.assertions.revertWithCustomError(dispute(s, f, { ...r, signature: "0x1234" }), s.staking, "InvalidReceiptSignature");
    // Nothing was slashed by any of these; the genuine pair still works.
    assert.equal((await s.staking.read.stakeOf([liar!.account.address])).active, MIN_STAKE);
    await viem.assertions.emit(dispute(s, f, r), s.staking, "FaultDisputed");
    await assertBooks(s, everyone(s), 0n);
  });

  it("pays the share to the lease's provider whoever sends the evidence: a front-runner's copy gains nothing and the original reverts", async () => {
    const s = await load();
    const liar = s.attestors[0]!;
    const { leaseId, activatedAt } = await openActive(s);
    const f = await faultBy(s, liar, leaseId, activatedAt + 5);
    const r = await receiptBy(s, liar, leaseId, ms(activatedAt + 9));
    const id = faultId(s, f.fault, getAddress(liar.account.address));
    const provider = getAddress(s.provider!.account.address);
    // `other` copied the provider's pending transaction from the mempool and got in first: the share is the provider's all the same.
    await connection.viem.assertions.emitWithArgs(dispute(s, f, r, s.other), s.staking, "AttestorSlashed", [
      id,
      getAddress(liar.account.address),
      SLASH,
      provider,
      SLASH / 2n,
      getAddress(s.treasury!.account.address),
      SLASH / 2n,
    ]);
    await connection.viem.assertions.revertWithCustomErrorWithArgs(dispute(s, f, r, s.provider), s.staking, "AlreadyDisputed", [id]);
    assert.equal(await s.staking.read.owed([s.other!.account.address]), 0n);
    assert.equal(await s.staking.read.owed([provider]), SLASH / 2n);
    assert.equal(await s.staking.read.owed([s.treasury!.account.address]), SLASH / 2n);
    await assertBooks(s, everyone(s), 0n);
  });

  it("gives a liar that disputes its own false fault nothing back: it loses the whole slash and the provider it wronged gets the share", async () => {
    const s = await load();
    const liar = s.attestors[0]!;
    const attestor = getAddress(liar.account.address);
    const provider = getAddress(s.provider!.account.address);
    const { leaseId, activatedAt } = await openActive(s);
    // The liar holds both halves of the evidence; it sends them itself right after its fault lands, before the provider's node.
    const f = await faultBy(s, liar, leaseId, activatedAt + 5);
    const r = await receiptBy(s, liar, leaseId, ms(activatedAt + 9));
    await connection.viem.assertions.emit(dispute(s, f, r, liar), s.staking, "FaultDisputed");
    assert.equal(await s.staking.read.owed([attestor]), 0n);
    assert.equal(await s.staking.read.owed([provider]), SLASH / 2n);
    assert.equal((await s.staking.read.stakeOf([attestor])).active, MIN_STAKE - SLASH);
    // A lie about a lease the market never opened wronged no provider: the whole slash goes to the sink.
    const sink = getAddress(s.treasury!.account.address);
    const sinkBefore = await s.staking.read.owed([sink]);
    const nowhere = leaseId + 1_000n;
    await connection.viem.assertions.emit(
      dispute(s, await faultBy(s, liar, nowhere, activatedAt + 5), await receiptBy(s, liar, nowhere, ms(activatedAt + 9)), liar),
      s.staking,
      "FaultDisputed",
    );
    assert.equal(await s.staking.read.owed([attestor]), 0n);
    assert.equal(await s.staking.read.owed([sink]), sinkBefore + MIN_STAKE - SLASH);
    await assertBooks(s, everyone(s), 0n);
  });

  it("still slashes an attestor that requested to unstake right after lying, until its unbonding delay ends", async () => {
    const s = await load();
    const { viem } = connection;
    const liar = s.attestors[0]!;
    const attestor = getAddress(liar.account.address);
    const { leaseId, activatedAt } = await openActive(s);
    const f = await faultBy(s, liar, leaseId, activatedAt + 5);
    const r = await receiptBy(s, liar, leaseId, ms(activatedAt + 7));
    await s.staking.write.requestUnstake([MIN_STAKE], { account: liar.account });
    const { unlockAt } = await s.staking.read.stakeOf([attestor]);
    await connection.networkHelpers.time.setNextBlockTimestamp(unlockAt - 1); // the last second before it could withdraw
    await viem.assertions.emitWithArgs(dispute(s, f, r), s.staking, "FaultDisputed", [
      attestor,
      leaseId,
      getAddress(s.provider!.account.address),
      f.fault.observedAt,
      r.receipt.receivedAtMs,
      SLASH,
    ]);
    assert.deepEqual(await s.staking.read.stakeOf([attestor]), { active: 0n, unbonding: MIN_STAKE - SLASH, unlockAt, openDisputes: 0 });
    const before = await balance(s as Suanli, attestor);
    await s.staking.write.withdraw({ account: liar.account });
    assert.equal(await balance(s as Suanli, attestor), before + MIN_STAKE - SLASH);
    // Once withdrawn, its other lies have nothing to slash (the bound: a provider has the unbonding delay to dispute).
    const later = await faultBy(s, liar, leaseId, activatedAt + 6);
    await viem.assertions.revertWithCustomErrorWithArgs(dispute(s, later, r), s.staking, "NothingAtStake", [attestor]);
    await assertBooks(s, everyone(s), 0n);
  });

  it("credits the share of a disputer the token refuses: the slash lands and the share is claimable to another address", async () => {
    const s = await connection.networkHelpers.loadFixture(blocklistFixture);
    const { viem } = connection;
    const token = await viem.getContractAt("BlocklistToken", s.token.address);
    const liar = s.attestors[1]!;
    const { leaseId, activatedAt } = await openActive(s as unknown as Suanli);
    const f = await faultBy(s, liar, leaseId, activatedAt + 5);
    const r = await receiptBy(s, liar, leaseId, ms(activatedAt + 20));
    await token.write.setBlocked([s.provider!.account.address, true]);
    await token.write.setBlocked([s.treasury!.account.address, true]);
    await viem.assertions.emit(dispute(s, f, r), s.staking, "FaultDisputed");
    assert.equal(await s.staking.read.owed([s.provider!.account.address]), SLASH / 2n);
    await viem.assertions.revertWithCustomError(s.staking.write.claim([s.provider!.account.address], { account: s.provider!.account }), token, "AccountBlocked");
    const to = s.renter!.account.address;
    const before = await balance(s as unknown as Suanli, to);
    await s.staking.write.claim([to], { account: s.provider!.account });
    assert.equal(await balance(s as unknown as Suanli, to), before + SLASH / 2n);
    assert.equal(await s.staking.read.owed([s.provider!.account.address]), 0n);
    await assertBooks(s, everyone(s), 0n);
  });

  it("bounds faultWindow to 1..86,400 s; a raise reaches only faults observed a day after it, a lowering applies at once", async () => {
    const s = await load();
    const { viem } = connection;
    const ok = PARAMS(s.treasury!.account.address);
    for (const faultWindow of [0, 86_401]) {
      await viem.assertions.revertWithCustomErrorWithArgs(s.staking.write.setParams([{ ...ok, faultWindow }]), s.staking, "ParamOutOfRange", [
        "faultWindow",
        BigInt(faultWindow),
        1n,
        86_400n,
      ]);
    }
    // The attestor node assumes this longest window when its read of the window is stale (node/attest/faults/liveness.ts).
    assert.equal(await s.staking.read.MAX_FAULT_WINDOW(), MAX_FAULT_WINDOW_SECONDS);
    const liar = s.attestors[0]!;
    const { leaseId, activatedAt } = await openActive(s);
    // An honest attestor waited the 30 s window and signed; the provider came back 45 s after observedAt and the attestor counted it.
    const before = activatedAt + 5;
    const f = await faultBy(s, liar, leaseId, before);
    const r = await receiptBy(s, liar, leaseId, ms(before + 45));
    await viem.assertions.revertWithCustomError(dispute(s, f, r), s.staking, "ReceiptOutsideWindow");
    // Governance raises the window to 60 s: that fault stays out of reach (an honest attestor cannot be slashed after the fact).
    await s.staking.write.setParams([{ ...ok, faultWindow: 60 }]);
    const raisedAt = await latest(s);
    assert.equal(await s.staking.read.faultWindowFor([before]), FAULT_WINDOW);
    await viem.assertions.revertWithCustomErrorWithArgs(dispute(s, f, r), s.staking, "ReceiptOutsideWindow", [r.receipt.receivedAtMs, ms(before + 1), ms(before + FAULT_WINDOW)]);
    // Faults observed from a day after the raise get 60 s.
    const from = raisedAt + 86_400;
    await connection.networkHelpers.time.increaseTo(from + 50);
    assert.equal(await s.staking.read.faultWindowFor([from - 1]), FAULT_WINDOW);
    assert.equal(await s.staking.read.faultWindowFor([from]), 60);
    const late = await faultBy(s, liar, leaseId, from);
    await viem.assertions.emit(dispute(s, late, await receiptBy(s, liar, leaseId, ms(from + 45))), s.staking, "FaultDisputed");
    // Lowering to 10 s applies to every fault at once (it only narrows what contradicts a fault).
    await s.staking.write.setParams([{ ...ok, faultWindow: 10 }]);
    assert.equal(await s.staking.read.faultWindowFor([before]), 10);
    assert.equal(await s.staking.read.faultWindowFor([from + 100]), 10);
    const lowered = await faultBy(s, liar, leaseId, from + 100);
    await viem.assertions.revertWithCustomError(dispute(s, lowered, await receiptBy(s, liar, leaseId, ms(from + 111))), s.staking, "ReceiptOutsideWindow");
    // Raising again from 10 to 86,400: faults observed before the new notice ends keep 10 s.
    await s.staking.write.setParams([{ ...ok, faultWindow: 86_400 }]);
    assert.equal(await s.staking.read.faultWindowFor([from + 100]), 10);
    assert.equal(await s.staking.read.faultWindowFor([(await latest(s)) + 86_400]), 86_400);
  });

  it("two raises within a day do not weaken the rule: a fault observed after the first raise took effect gets its window, not the one before", async () => {
    const s = await load();
    const ok = PARAMS(s.treasury!.account.address);
    const liar = s.attestors[0]!;
    // 30 s, raised to 60 s, and an hour later to 90 s.
    await s.staking.write.setParams([{ ...ok, faultWindow: 60 }]);
    const firstRaise = await latest(s);
    await connection.networkHelpers.time.increase(3_600);
    await s.staking.write.setParams([{ ...ok, faultWindow: 90 }]);
    const secondRaise = await latest(s);
    // From a day after the first raise until a day after the second, 60 s is the window (it was 30 s, the smallest ever set).
    const observedAt = firstRaise + 86_400 + 10;
    assert.ok(observedAt < secondRaise + 86_400);
    assert.equal(await s.staking.read.faultWindowFor([observedAt]), 60);
    assert.equal(await s.staking.read.faultWindowFor([firstRaise + 86_400 - 1]), FAULT_WINDOW);
    assert.equal(await s.staking.read.faultWindowFor([secondRaise + 86_400]), 90);
    // A liar that backdated its fault with a receipt 45 s after observedAt (inside 60, outside 30) is slashed.
    await connection.networkHelpers.time.increaseTo(observedAt + 100);
    const { leaseId } = await openActive(s);
    const fault = await faultBy(s, liar, leaseId, observedAt);
    await connection.viem.assertions.emit(dispute(s, fault, await receiptBy(s, liar, leaseId, ms(observedAt + 45))), s.staking, "FaultDisputed");
  });

  it("reads at most the 16 newest windows, then the smallest of the older ones: many changes never make a dispute run out of gas", async () => {
    const s = await load();
    const ok = PARAMS(s.treasury!.account.address);
    // Forty changes between 40 and 50 s: the oldest (30 s) and 40 s sit beyond the 16 newest for an old fault.
    for (let i = 0; i < 40; i++) await s.staking.write.setParams([{ ...ok, faultWindow: i % 2 === 0 ? 50 : 40 }]);
    const last = await latest(s);
    assert.equal(await s.staking.read.faultWindowFor([1]), FAULT_WINDOW);
    assert.equal(await s.staking.read.faultWindowFor([last + 86_400]), 40);
    const client = await connection.viem.getPublicClient();
    const gas = await client.estimateGas({ to: s.staking.address, data: encodeFunctionData({ abi: s.staking.abi, functionName: "faultWindowFor", args: [1] }) });
    assert.ok(gas < 100_000n, `faultWindowFor read ${gas} gas`);
  });
});
