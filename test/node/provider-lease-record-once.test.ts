import assert from "node:assert/strict";
import type { RenterAuth } from "../../common/protocols/lease.js";
import type { ChainEvent } from "../../node/chain/follower.js";
import type { LogContext } from "../../node/log/logger.js";
import type { LeaseRecord } from "../../node/provider/agent/records.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { TestRenter } from "../support/renter.js";

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * A lease the node has no record of is recorded by whichever comes first: its LeaseOpened event
 * or its renter's first request. Both await (the chain read, the write) between seeing no record
 * and writing one; issue #20's loaded CI run had both record the lease ("Lease opened" twice).
 * This test holds the event's path inside its chain read while the renter's request arrives,
 * the interleaving the load made, and checks the lease is recorded and logged once.
 */
describe("provider agent: a lease recorded once when its event and its renter's request race", function () {
  this.timeout(60_000);
  let devnet: Devnet;
  let provider: TestProvider;
  let renter: TestRenter;

  before(async () => {
    devnet = await startDevnet();
    provider = await startTestProvider(devnet, 1);
    renter = await TestRenter.start(devnet, 2);
  });
  after(async () => {
    await renter?.close();
    await provider?.close();
    await devnet?.close();
  });

  it("the LeaseOpened event held between its check and its write while the renter's status request records the lease: one record, one 'Lease opened'", async () => {
    const leases = provider.agent.leases;
    const { records, verifier, logger } = leases.ctx;

    // The event's path for a lease not yet recorded stops in its chain read until released.
    const eventReading = deferred<bigint>();
    const release = deferred<void>();
    let holding = true;
    const readChain = leases.readChain.bind(leases);
    leases.readChain = async (id) => {
      if (holding && !records.get(id)) {
        eventReading.resolve(id);
        await release.promise;
      }
      return readChain(id);
    };
    const eventDone = deferred<void>();
    const onChainEvent = leases.onChainEvent.bind(leases);
    leases.onChainEvent = async (event: ChainEvent, delivery?: { backfill: boolean }) => {
      try {
        await onChainEvent(event, delivery);
      } finally {
        if (event.eventName === "LeaseOpened") eventDone.resolve();
      }
    };
    // The renter's request, once its signer and nonce are checked, goes on to record the lease.
    const requestChecked = deferred<void>();
    const consume = verifier.consume.bind(verifier);
    verifier.consume = (auth: RenterAuth) => {
      consume(auth);
      requestChecked.resolve();
    };
    const opened: LogContext[] = [];
    const info = logger.info.bind(logger);
    logger.info = (message: string, context?: LogContext) => {
      if (message === "Lease opened" && context) opened.push(context);
      info(message, context);
    };
    // Writes of a whole new record (not `update`'s changes to the one there).
    const created: bigint[] = [];
    let updating = false;
    const update = records.update.bind(records);
    records.update = (id: bigint, change: (record: LeaseRecord) => void) => {
      updating = true;
      try {
        return update(id, change);
      } finally {
        updating = false;
      }
    };
    const put = records.put.bind(records);
    records.put = (record: LeaseRecord) => {
      if (!updating) created.push(record.leaseId);
      return put(record);
    };
    try {
      const machineId = provider.agent.machines[0]!.machineId;
      const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 60 });
      assert.equal(await eventReading.promise, leaseId, "the follower's LeaseOpened is between its check and its write");

      const status = renter.status(provider.peer, leaseId);
      await requestChecked.promise;
      // The request's recording step has begun (or waits for the lease's lock) before the event goes on.
      await new Promise((resolve) => setImmediate(resolve));
      holding = false;
      release.resolve();
      assert.equal((await status).state, "waiting_spec");
      await eventDone.promise;

      assert.deepEqual(
        opened.filter((c) => c.leaseId === leaseId).map((c) => c.renter),
        [renter.address],
        "the node logged 'Lease opened' once",
      );
      assert.deepEqual(created, [leaseId], "one new record written for the lease (the later path did not overwrite it)");
      assert.equal(records.get(leaseId)?.phase, "waiting_spec");
    } finally {
      holding = false;
      release.resolve();
      // The instance's own methods again (the prototype's; the logger's class's).
      Reflect.deleteProperty(leases, "readChain");
      Reflect.deleteProperty(leases, "onChainEvent");
      Reflect.deleteProperty(verifier, "consume");
      Reflect.deleteProperty(logger, "info");
      Reflect.deleteProperty(records, "put");
      Reflect.deleteProperty(records, "update");
    }
  });
});
