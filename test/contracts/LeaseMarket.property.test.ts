/**
 * The adversarial invariant suite of the money rules (test/contracts/support/invariants.ts):
 * random sequences of every market, registry, token and governance operation by an attacker
 * (provider and renter, self-dealing allowed) and honest parties, each step checked against an
 * exact model, the promises of docs/contracts.md "Threat model" and liveness.
 *
 * Seed: SUANLI_PROPERTY_SEED (default DEFAULT_SEED); SUANLI_PROPERTY_SEQUENCE replays one
 * sequence; SUANLI_PROPERTY_SEQUENCES changes how many run (at least 1,000 in CI).
 */
import assert from "node:assert/strict";
import { network } from "hardhat";
import { DEFAULT_SEED, END_REASON_NAMES, KNOWN_OPEN_FINDINGS, describeFailure, runInvariants } from "./support/invariants.js";

const SEED = process.env.SUANLI_PROPERTY_SEED ? Number(process.env.SUANLI_PROPERTY_SEED) : DEFAULT_SEED;
const ONLY = process.env.SUANLI_PROPERTY_SEQUENCE ? Number(process.env.SUANLI_PROPERTY_SEQUENCE) : undefined;
const SEQUENCES = process.env.SUANLI_PROPERTY_SEQUENCES ? Number(process.env.SUANLI_PROPERTY_SEQUENCES) : 1_000;

describe("LeaseMarket invariants: exact model, attacker bound, liveness", function () {
  this.timeout(900_000);

  it(`hold over ${SEQUENCES} random sequences (seed ${SEED})`, async () => {
    assert.ok(Number.isInteger(SEED) && SEED >= 0, "SUANLI_PROPERTY_SEED must be a non-negative integer");
    const connection = await network.create();
    const result = await runInvariants(connection, {
      sequences: ONLY === undefined ? SEQUENCES : ONLY + 1,
      only: ONLY,
      minSteps: 6,
      maxSteps: 20,
      seed: SEED,
      promises: !process.env.SUANLI_PROPERTY_NO_PROMISES,
      liveness: !process.env.SUANLI_PROPERTY_NO_LIVENESS,
      known: process.env.SUANLI_PROPERTY_KNOWN?.split(",") ?? KNOWN_OPEN_FINDINGS,
    });
    assert.equal(result.violations, 0, describeFailure(result));
    if (ONLY !== undefined) return;
    assert.equal(result.sequences, SEQUENCES);
    const kinds = Object.entries(result.byKind)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ");
    const endings = Object.entries(result.endings)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ");
    console.log(`      seed ${SEED}: ${result.sequences} sequences, ${result.steps} steps, ${result.succeeded} succeeded (${kinds}); leases ended: ${endings}`);
    // The generator must reach every operation, and every way a lease ends, for the property to mean something.
    for (const kind of [
      "open",
      "activate",
      "claim",
      "claimMany",
      "close",
      "complete",
      "terminate",
      "cancel",
      "signFault",
      "submitHeld",
      "extend",
      "shrink",
      "settle",
      "stake",
      "unstake",
      "withdraw",
      "addMachine",
      "updateMachine",
      "removeMachine",
      "deregister",
      "register",
      "revokeNonce",
      "revokeNoncesBelow",
      "setParams",
      "setFaultQuorum",
      "setUnbondingDelay",
      "block",
      "withdrawOwed",
    ]) {
      assert.ok((result.byKind[kind] ?? 0) > 0, `no ${kind} ever succeeded`);
    }
    for (const reason of END_REASON_NAMES.slice(1)) assert.ok((result.endings[reason] ?? 0) > 0, `no lease ever ended as ${reason}`);
  });
});
