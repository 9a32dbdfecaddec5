/**
 * Issue #34, finding 3: an attestor that signed a capacity fault of a machine gives no pass of that machine during the
 * fault window after it. AttestorStaking.disputeCapacityFault slashes a capacity fault whose signer passed the leased
 * machine in (observedAt, observedAt + W], so a pass then (to a requested challenge, say) would make its own true
 * fault slashable. fault-records.ts capacityPassHeldUntil says until when; the Attestor refuses to sign before then.
 */
import assert from "node:assert/strict";
import type { Address, Hex } from "viem";
import { challengeProfileSchema } from "../../../common/attest/params.js";
import { unitSubChallenges } from "../../../common/attest/units.js";
import { FaultKind } from "../../../common/eip712.js";
import { Attestor, type AttestorChallenge, type ChallengeFailure, type ChallengeOutcome, ChallengeResponder } from "../../../node/attest/challenge/index.js";
import { capacityPassHeldUntil, type FaultRecord } from "../../../node/attest/faults/fault-records.js";
import { CpuRunner } from "../../../node/attest/runner/index.js";
import { attestorAccount, domain, isAttestor, otherAttestorAccount, providerAccount, strangerAccount } from "./helpers.js";

const machine = { machineId: 7, model: "H100-80GB-SXM", units: 1, vramMiB: 81_559 };
const SIG = `0x${"11".repeat(65)}` as Hex;

function record(overrides: { kind?: number; observedAt?: number; machineId?: number | null; provider?: Address; signers?: Address[] } = {}): FaultRecord {
  const { machineId = machine.machineId } = overrides;
  return {
    leaseId: 1n,
    provider: overrides.provider ?? providerAccount.address,
    ...(machineId === null ? {} : { machineId }),
    fault: { leaseId: 1n, kind: overrides.kind ?? FaultKind.capacity, observedAt: overrides.observedAt ?? 1_000 },
    signatures: (overrides.signers ?? [attestorAccount.address]).map((signer) => ({ signer, signature: SIG })),
    role: "cosigner",
    status: "abandoned",
    createdAtMs: 0,
    updatedAtMs: 0,
    lastAskedAtMs: 0,
    minObservedAt: 0,
    submittedTx: null,
    landedBy: null,
    note: null,
  };
}

describe("attestor: no pass of a machine in the fault window after a capacity fault of it that it signed (issue #34, finding 3)", function () {
  this.timeout(60_000);
  let runner: CpuRunner;
  before(async () => {
    runner = new CpuRunner({ workers: 1 });
    await runner.computeCommit({ id: `0x${"01".repeat(32)}`, rowsPerUnit: 4, cols: 16, rounds: 1, units: unitSubChallenges(`0x${"01".repeat(32)}`, `0x${"02".repeat(32)}`, 1) });
  });
  after(async () => {
    await runner.close();
  });

  it("holds passes until observedAt + W for the machine of a capacity fault it signed, whatever the fault's status, and only then", () => {
    const self = attestorAccount.address;
    const held = (records: FaultRecord[]) => capacityPassHeldUntil(records, self, providerAccount.address, machine.machineId, 30);
    assert.equal(held([record()]), 1_030);
    // The latest of several; a legacy record without its machine holds every machine of its provider.
    assert.equal(held([record(), record({ observedAt: 1_500 })]), 1_530);
    assert.equal(held([record({ machineId: null, observedAt: 2_000 })]), 2_030);
    // Not this attestor's signature, another machine, another provider, a liveness fault: no hold.
    assert.equal(held([record({ signers: [otherAttestorAccount.address] })]), undefined);
    assert.equal(held([record({ machineId: 8 })]), undefined);
    assert.equal(held([record({ provider: strangerAccount.address })]), undefined);
    assert.equal(held([record({ kind: FaultKind.unresponsive })]), undefined);
    assert.equal(held([]), undefined);
  });

  async function run(passHeldUntil: (provider: Address, machineId: number) => number | undefined): Promise<{ challenge: AttestorChallenge; outcome: Promise<ChallengeOutcome> }> {
    const attestor = new Attestor({
      account: attestorAccount,
      domain,
      profile: challengeProfileSchema.parse({ preset: "cpu-devnet" }),
      recompute: runner.recompute,
      passHeldUntil,
    });
    const responder = new ChallengeResponder({
      provider: providerAccount.address,
      signer: providerAccount,
      machine: (id) => (id === machine.machineId ? machine : undefined),
      runner,
      domain,
      isAttestor,
    });
    const challenge = await attestor.startChallenge({ provider: providerAccount.address, ...machine });
    const next = challenge.onCommit(await responder.respond(JSON.parse(JSON.stringify(challenge.message))), Date.now());
    assert.equal(next.outcome, "open");
    const rows = await responder.open((next as { request: Parameters<ChallengeResponder["open"]>[0] }).request);
    return { challenge, outcome: challenge.onOpen(rows, Date.now()) };
  }

  it("refuses to sign a pass inside the hold (PassWithheldError, no verdict) and signs one after it", async () => {
    const now = Math.floor(Date.now() / 1000);
    const asked: [Address, number][] = [];
    const inside = await run((provider, machineId) => {
      asked.push([provider, machineId]);
      return now + 60;
    });
    await assert.rejects(inside.outcome, { name: "PassWithheldError" });
    assert.deepEqual(asked, [[providerAccount.address, machine.machineId]]);
    assert.equal(inside.challenge.state, "done");
    assert.equal(inside.challenge.outcome, undefined);
    // The hold is over (its last second has passed): the machine passes as ever.
    const after = await run(() => now - 1);
    const outcome = await after.outcome;
    assert.equal(outcome.outcome, "pass", JSON.stringify((outcome as ChallengeFailure).detail));
  });
});
