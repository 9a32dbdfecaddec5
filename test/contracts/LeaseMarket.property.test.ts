/**
 * The adversarial invariant suite of the money rules (test/contracts/support/invariants.ts):
 * random sequences of every market, registry, token and governance operation by an attacker
 * (provider and renter, self-dealing allowed) and honest parties, each step checked against an
 * exact model, the promises of docs/contracts.md "Threat model" and liveness.
 *
 * Seed: SUANLI_PROPERTY_SEED (default DEFAULT_SEED); SUANLI_PROPERTY_SEQUENCE replays one
 * sequence; SUANLI_PROPERTY_SEQUENCES changes how many run (at least 1,000 in CI);
 * SUANLI_PROPERTY_JOBS over how many processes (default 2: CI has 2 cores).
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { network } from "hardhat";
import { DEFAULT_SEED, END_REASON_NAMES, KNOWN_OPEN_FINDINGS, describeFailure, runInvariants } from "./support/invariants.js";
import type { ShardCounts, ShardOptions, ShardReport } from "./support/invariants-shard.js";

const SEED = process.env.SUANLI_PROPERTY_SEED ? Number(process.env.SUANLI_PROPERTY_SEED) : DEFAULT_SEED;
const ONLY = process.env.SUANLI_PROPERTY_SEQUENCE ? Number(process.env.SUANLI_PROPERTY_SEQUENCE) : undefined;
const SEQUENCES = process.env.SUANLI_PROPERTY_SEQUENCES ? Number(process.env.SUANLI_PROPERTY_SEQUENCES) : 1_000;
const JOBS = process.env.SUANLI_PROPERTY_JOBS ? Number(process.env.SUANLI_PROPERTY_JOBS) : 2;
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const SHARD_SCRIPT = path.join(ROOT, "test/contracts/support/invariants-shard.ts");
const running = new Set<ChildProcess>();

/** Runs one shard in its own process (support/invariants-shard.ts) and returns its report. */
function runShard(options: ShardOptions): Promise<ShardReport> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", SHARD_SCRIPT, JSON.stringify(options)], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    running.add(child);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString("utf8")).slice(-4_000)));
    child.once("error", reject);
    child.once("close", (code, signal) => {
      running.delete(child);
      const last = stdout.trim().split("\n").at(-1) ?? "";
      if (code !== 0 || !last.startsWith("{")) return reject(new Error(`shard ${options.shard.index} exited with ${code ?? signal}:\n${stderr}`));
      resolve(JSON.parse(last) as ShardReport);
    });
  });
}

/** The shards' counts added up. */
function mergeResults(shards: ShardCounts[]): ShardCounts {
  const total: ShardCounts = { seed: SEED, sequences: 0, steps: 0, succeeded: 0, violations: 0, byKind: {}, endings: {} };
  for (const shard of shards) {
    total.sequences += shard.sequences;
    total.steps += shard.steps;
    total.succeeded += shard.succeeded;
    total.violations += shard.violations;
    for (const [k, v] of Object.entries(shard.byKind)) total.byKind[k] = (total.byKind[k] ?? 0) + v;
    for (const [k, v] of Object.entries(shard.endings)) total.endings[k] = (total.endings[k] ?? 0) + v;
  }
  return total;
}

describe("LeaseMarket invariants: exact model, attacker bound, liveness", function () {
  this.timeout(900_000);

  after(() => {
    for (const child of running) child.kill("SIGKILL");
  });

  it(`hold over ${SEQUENCES} random sequences (seed ${SEED})`, async () => {
    assert.ok(Number.isInteger(SEED) && SEED >= 0, "SUANLI_PROPERTY_SEED must be a non-negative integer");
    assert.ok(Number.isInteger(JOBS) && JOBS >= 1, "SUANLI_PROPERTY_JOBS must be a positive integer");
    // The sequences are dealt round-robin over JOBS chains: shard 0 here, the others each in a
    // process of its own (the EVM and the model run on the JavaScript thread, so only a second
    // process puts a second core to work). Every sequence starts from its own chain's snapshot of
    // the same world, so the shards together run exactly the sequences one chain would.
    const jobs = ONLY === undefined ? JOBS : 1;
    const common = {
      sequences: ONLY === undefined ? SEQUENCES : ONLY + 1,
      minSteps: 6,
      maxSteps: 20,
      seed: SEED,
      promises: !process.env.SUANLI_PROPERTY_NO_PROMISES,
      liveness: !process.env.SUANLI_PROPERTY_NO_LIVENESS,
      known: process.env.SUANLI_PROPERTY_KNOWN?.split(",") ?? KNOWN_OPEN_FINDINGS,
    };
    const others = Array.from({ length: jobs - 1 }, (_, i) => runShard({ ...common, shard: { index: i + 1, count: jobs } }));
    // Awaited below; until then a shard that fails while this one runs must not count as unhandled.
    for (const other of others) void other.catch(() => undefined);
    const here = await runInvariants(await network.create(), { ...common, only: ONLY, ...(jobs > 1 ? { shard: { index: 0, count: jobs } } : {}) });
    assert.equal(here.violations, 0, describeFailure(here));
    const reports = await Promise.all(others);
    for (const report of reports) assert.equal(report.violations, 0, report.failure);
    const result = mergeResults([here, ...reports]);
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
      // #34 finding 1: a held completion released by claim after its window, co-signed by its renter, faulted
      // inside it; a provider's preemption of its own renters' leases refused.
      "release",
      "cosign",
      "faultDuringHold",
      // #34: a fault observed in an Active lease's last window lands on it after a claim, close or preempting open
      // past its end held it (it used to release the collateral at once).
      "faultDuringExpiryHold",
      "selfPreemptionRefused",
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
      // AttestorStaking (support/invariants-staking.ts): both fault dispute paths, attestation disputes and their races.
      "disputeFault",
      "disputeCapacityFault",
      "disputeAttestation",
      "resolveDispute",
      "claimStaking",
      "attestorStake",
    ]) {
      assert.ok((result.byKind[kind] ?? 0) > 0, `no ${kind} ever succeeded`);
    }
    for (const reason of END_REASON_NAMES.slice(1)) assert.ok((result.endings[reason] ?? 0) > 0, `no lease ever ended as ${reason}`);
  });
});
