/**
 * withdrawOwed / getOwed against the real contracts on a hardhat EVM: a blocklisted renter's refund
 * waits in `owed`, the SDK pulls it to another address, and nothing owed is a typed error.
 */
import assert from "node:assert/strict";
import { getAddress } from "viem";
import { NothingOwedError, NoWalletError, TransactionError } from "../../sdk/errors.js";
import { getOwed, withdrawOwed } from "../../sdk/actions/withdrawOwed.js";
import { InvalidInputError } from "../../common/errors.js";
import { balance, connect, DEFAULT_PARAMS, deploySuanli, open, type Connection } from "../contracts/support/suanli.js";

describe("SDK withdrawOwed / owed", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });

  async function owedFixture() {
    const s = await deploySuanli(connection, DEFAULT_PARAMS, { token: "BlocklistToken" });
    const token = await connection.viem.getContractAt("BlocklistToken", s.token.address);
    const { leaseId } = await open(s, { terms: { units: 1 } });
    const lease = await s.market.read.getLease([leaseId]);
    await token.write.setBlocked([s.renter!.account.address, true]);
    // The renter closes an Open lease: the full deposit is refunded, but the token refuses the push.
    await s.market.write.close([leaseId], { account: s.renter!.account });
    return { s, token, deposit: lease.deposit };
  }

  it("reads what is owed, withdraws it to another address, and owes nothing after", async () => {
    const { s, token, deposit } = await connection.networkHelpers.loadFixture(owedFixture);
    const ctx = { publicClient: s.publicClient, walletClient: s.renter, account: s.renter!.account, market: s.market.address };
    assert.ok(deposit > 0n);
    assert.equal(await getOwed(ctx), deposit);
    assert.equal(await getOwed(ctx, s.renter!.account.address), deposit);
    assert.equal(await getOwed(ctx, s.other!.account.address), 0n);

    // To itself: the token refuses; the simulation fails, so nothing is sent and the amount stays owed.
    await assert.rejects(
      withdrawOwed(ctx),
      (error: unknown) => error instanceof TransactionError && error.step === "withdraw" && /AccountBlocked/.test(String((error.cause as Error).message)),
    );
    assert.equal(await getOwed(ctx), deposit);

    const before = await balance(s, s.other!.account.address);
    const result = await withdrawOwed(ctx, { to: s.other!.account.address });
    assert.equal(result.amount, deposit);
    assert.equal(result.to, getAddress(s.other!.account.address));
    assert.match(result.transaction, /^0x[0-9a-f]{64}$/);
    assert.ok(result.gasUsed > 0n);
    assert.equal(await balance(s, s.other!.account.address), before + deposit);
    assert.equal(await getOwed(ctx), 0n);
    assert.equal(await token.read.balanceOf([s.market.address]), 0n);

    const blockBefore = await s.publicClient.getBlockNumber();
    await assert.rejects(withdrawOwed(ctx, { to: s.other!.account.address }), (error: unknown) => error instanceof NothingOwedError && error.account === s.renter!.account.address);
    assert.equal(await s.publicClient.getBlockNumber(), blockBefore, "nothing was sent");
  });

  it("rejects a bad address and a missing wallet", async () => {
    const { s } = await connection.networkHelpers.loadFixture(owedFixture);
    const ctx = { publicClient: s.publicClient, walletClient: s.renter, account: s.renter!.account, market: s.market.address };
    await assert.rejects(withdrawOwed(ctx, { to: "0x1234" as `0x${string}` }), InvalidInputError);
    await assert.rejects(getOwed(ctx, "nope" as `0x${string}`), InvalidInputError);
    const readOnly = { publicClient: s.publicClient, walletClient: undefined, account: undefined, market: s.market.address };
    await assert.rejects(withdrawOwed(readOnly), NoWalletError);
    await assert.rejects(getOwed(readOnly), NoWalletError);
    assert.ok((await getOwed(readOnly, s.renter!.account.address)) > 0n);
  });
});
