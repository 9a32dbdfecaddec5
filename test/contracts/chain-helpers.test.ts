import assert from "node:assert/strict";
import { BaseError, ContractFunctionRevertedError, decodeErrorResult, getAddress, type Hex } from "viem";
import {
  END_REASONS,
  LEASE_STATUSES,
  computeCollateral,
  computeDeposit,
  computeFee,
  computePaymentFee,
  orderFaultSignatures,
  readLease,
  readMachine,
  readProvider,
  suanliErrorsAbi,
} from "../../common/chain/market.js";
import { leaseMarketAbi } from "../../common/abi.js";
import { PRICE, STAKE, connect, deploySuanli, makeOffer, openActive, sign, terms, type Connection } from "./support/suanli.js";

describe("common/chain/market helpers", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  async function suanliFixture() {
    return deploySuanli(connection);
  }

  it("computes deposit, collateral and fee the way the contract rounds", () => {
    assert.equal(computeDeposit(3, 7n, 11), 231n);
    assert.equal(computeCollateral(231n, 5_000), 115n);
    assert.equal(computeCollateral(231n, 0), 0n);
    assert.equal(computeFee(999n, 100), 9n);
    // Ten payments of 99 at 1 %: each alone rounds to 0, together they pay fee(990) = 9, as the contract does.
    let fees = 0n;
    for (let paid = 0n; paid < 990n; paid += 99n) fees += computePaymentFee(paid, paid + 99n, 100);
    assert.equal(fees, computeFee(990n, 100));
    assert.deepEqual([LEASE_STATUSES[2], END_REASONS[3]], ["Active", "Faulted"]);
  });

  it("orders fault signatures by signer and drops a signer's duplicates", () => {
    const low = "0x00000000000000000000000000000000000000aa";
    const high = "0x00000000000000000000000000000000000000bb";
    assert.deepEqual(
      orderFaultSignatures([
        { signer: high, signature: "0x02" },
        { signer: low, signature: "0x01" },
        { signer: high.toUpperCase().replace("0X", "0x") as Hex, signature: "0x03" },
      ]),
      ["0x01", "0x03"],
    );
  });

  it("reads typed leases, providers and machines, and decodes errors raised by the registry under the market", async () => {
    const s = await connection.networkHelpers.loadFixture(suanliFixture);
    const { leaseId, activatedAt } = await openActive(s);
    const lease = await readLease(s.publicClient, s.market.address, leaseId);
    assert.deepEqual(
      [lease.leaseId, lease.status, lease.endReason, lease.activatedAt, lease.provider],
      [leaseId, "Active", "None", activatedAt, getAddress(s.provider!.account.address)],
    );
    const machine = await readMachine(s.publicClient, s.registry.address, 1);
    assert.deepEqual([machine.onDemandUnits, machine.idleUnits, machine.interconnectName], [2, 6, "nvlink"]);
    const provider = await readProvider(s.publicClient, s.registry.address, s.provider!.account.address);
    assert.equal(provider.stake, STAKE);
    assert.equal(provider.locked, computeCollateral(computeDeposit(2, PRICE, 3600), 5_000));

    const offer = await makeOffer(s);
    const failure = await s.publicClient
      .simulateContract({
        address: s.market.address,
        abi: leaseMarketAbi,
        functionName: "openLease",
        args: [offer, await sign(s, offer), terms({ units: 7 })],
        account: s.renter!.account,
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    assert.ok(failure instanceof BaseError);
    const reverted = failure.walk((e) => e instanceof ContractFunctionRevertedError) as ContractFunctionRevertedError;
    assert.ok(reverted.raw, "the revert data is available");
    const decoded = decodeErrorResult({ abi: suanliErrorsAbi, data: reverted.raw });
    assert.equal(decoded.errorName, "InsufficientUnits");
    assert.deepEqual(decoded.args, [1, 6, 7]);
  });
});
