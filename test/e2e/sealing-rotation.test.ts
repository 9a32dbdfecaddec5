/**
 * Issue #33 item 9 through a running provider node: its sealing key rotates while leases run. A
 * lease whose acceptance came before the rotation sends its spec, sealed to the old key, after it
 * and runs to its end; a new lease gets the new key (acceptance and published offer) and runs; the
 * old key stays past its expiry while that first lease lives and is overwritten and deleted once it
 * ends, while the newer lease still runs. Real devnet chain, libp2p over TCP, level, child
 * processes, the SDK's own sealing (sealSpec); only the key ring's clock is moved by the test.
 */
import assert from "node:assert/strict";
import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { RENTER_REQUEST_MAX_AGE_SECONDS } from "../../common/protocols/lease.js";
import { taskSpecSchema } from "../../common/protocols/task-spec.js";
import type { SealingKey } from "../../common/sealed.js";
import { sealSpec } from "../../sdk/actions/submitTask.js";
import type { BundleServer } from "../support/bundles.js";
import type { Devnet } from "../support/devnet.js";
import type { TestProvider } from "../support/provider.js";
import { TestRenter } from "../support/renter.js";
import { startMarket, type Market } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

const DAY = 86_400;

describe("sealing-key rotation on a running provider node (issue #33 item 9)", function () {
  this.timeout(120_000);
  let market: Market;
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let renter: TestRenter;
  /** Where the tasks write their secrets and the test their release marks (the market's scratch folder). */
  let probe: string;
  // The key ring's clock: the real one plus what the test has moved it by.
  const clock = { offsetMs: 0 };

  before(async () => {
    market = await startMarket({
      name: "rotation",
      provider: { provider: { sealing: { rotateSeconds: DAY } } },
      providerAgent: { sealingKeys: { now: () => Date.now() + clock.offsetMs, maintainIntervalMs: 50 } },
      // The renter is TestRenter on account 2, which funds itself.
      fund: 0n,
    });
    ({ devnet, bundles, provider, work: probe } = market);
    renter = await TestRenter.start(devnet, 2);
    market.defer(() => renter.close());
  });
  after(async () => {
    await market?.close();
  });

  const keysDir = () => path.join(provider.daemon.config.dataDir, "sealing-keys");
  const keyFiles = async () => (await readdir(keysDir())).sort();
  const machineId = () => provider.agent.machines[0]!.machineId;
  const published = () => provider.daemon.offers.publisher!.current(machineId())?.sealingKey;

  /** Reserves one unit and opens the lease; returns it with the sealing key of the acceptance. */
  async function rent(): Promise<{ leaseId: bigint; key: SealingKey }> {
    const reply = await renter.reserve(provider.peer, { machineId: machineId(), units: 1, duration: 120 });
    assert.ok(reply.accepted, reply.accepted ? "" : `${reply.reason}: ${reply.message}`);
    assert.ok(reply.sealingKey, "the acceptance carries the provider's sealing key");
    return { leaseId: await renter.open(reply, { machineId: machineId(), units: 1, duration: 120 }), key: reply.sealingKey };
  }

  /** What the SDK sends: a task whose secret is sealed to `key` for this lease; it writes the secret where the test reads it and runs until released. */
  async function sendSealedTask(leaseId: bigint, key: SealingKey, name: string, secret: string) {
    const bundle = await bundles.bundle({
      "run.sh": [`printf %s "$TOKEN" > "$PROBE/${name}.secret"`, `while [ ! -e "$PROBE/${name}.release" ]; do sleep 0.05; done`, "echo finished"].join("\n"),
    });
    const spec = taskSpecSchema.parse({ bundle, command: "sh run.sh", env: { PROBE: probe, TOKEN: { value: secret, secret: true } } });
    const sealed = await sealSpec(spec, key, provider.peer.address, devnet.deployment.chainId, leaseId);
    assert.ok("sealed" in (sealed.env.TOKEN as object), "the secret travels sealed");
    const answer = await renter.sendTask(provider.peer, leaseId, sealed);
    assert.equal(answer.state, "accepted");
    await waitFor(`task ${name} to see its secret`, async () => (await readFile(path.join(probe, `${name}.secret`), "utf8").catch(() => "")) === secret, { timeoutMs: 20_000 });
  }

  async function finish(leaseId: bigint, name: string): Promise<void> {
    await writeFile(path.join(probe, `${name}.release`), "");
    const status = await renter.waitStatus(provider.peer, leaseId, (s) => s.state === "succeeded" && s.completion !== null, `task ${name} to succeed`);
    assert.equal(status.exitCode, 0);
  }

  it("a lease from before a rotation runs to its end on the old key, new leases get the new key, and the old key is deleted after the last lease that used it", async () => {
    // Epoch 1: one key, announced with the offer and in acceptances.
    await waitFor("the offer with the first key", () => published());
    assert.deepEqual(await keyFiles(), ["1.json"]);
    const firstSeed = (JSON.parse(await readFile(path.join(keysDir(), "1.json"), "utf8")) as { seed: string }).seed;
    const a = await rent();
    assert.equal(a.key.publicKey, published()!.publicKey);

    // The epoch ends while lease A is open and has not sent its task yet.
    clock.offsetMs += DAY * 1000;
    await waitFor("the key to rotate", async () => (await keyFiles()).length === 2 && published()!.publicKey !== a.key.publicKey, { timeoutMs: 10_000 });
    assert.deepEqual(await keyFiles(), ["1.json", "2.json"]);
    const second = published()!;

    // A's renter seals to the key its acceptance gave (now the old one): the node still opens it.
    await sendSealedTask(a.leaseId, a.key, "a", "secret-of-A");
    assert.deepEqual(provider.agent.lease(a.leaseId)!.sealingKeyIds, [1]);

    // A new lease gets the new key in its acceptance, seals to it, runs.
    const b = await rent();
    assert.equal(b.key.publicKey, second.publicKey);
    assert.notEqual(b.key.publicKey, a.key.publicKey);
    await sendSealedTask(b.leaseId, b.key, "b", "secret-of-B");
    assert.deepEqual(provider.agent.lease(b.leaseId)!.sealingKeyIds, [2], "B used the new key only");

    // Past the old key's expiry (and the clocks' allowance): renters may no longer seal to it, but
    // A used it and lives, so it is kept.
    clock.offsetMs += (a.key.expiresAt - Math.floor((Date.now() + clock.offsetMs) / 1000) + RENTER_REQUEST_MAX_AGE_SECONDS + 5) * 1000;
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.deepEqual(await keyFiles(), ["1.json", "2.json"], "the key a live lease used stays");

    // A ends: its key goes, file and all, while B (on the new key) still runs.
    await finish(a.leaseId, "a");
    await waitFor("the old key to be deleted", async () => (await keyFiles()).length === 1, { timeoutMs: 10_000 });
    assert.deepEqual(await keyFiles(), ["2.json"]);
    assert.equal(provider.agent.lease(b.leaseId)!.phase, "running");
    await finish(b.leaseId, "b");
    assert.deepEqual(await keyFiles(), ["2.json"], "the current key stays");

    // The old seed is nowhere in the node's data dir any more (level, records, logs, key files).
    const leftovers: string[] = [];
    const scan = async (dir: string): Promise<void> => {
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const file = path.join(dir, entry.name);
        if (entry.isDirectory()) await scan(file);
        else if (entry.isFile() && (await stat(file)).size < 64 * 1024 * 1024 && (await readFile(file)).includes(firstSeed)) leftovers.push(file);
      }
    };
    await scan(provider.daemon.config.dataDir);
    assert.deepEqual(leftovers, []);
  });
});
