import assert from "node:assert/strict";
import { network } from "hardhat";

describe("TestToken", () => {
  it("has 6 decimals and a faucet capped per call", async () => {
    const { viem } = await network.create();
    const token = await viem.deployContract("TestToken");
    const [, user] = await viem.getWalletClients();
    assert.equal(await token.read.decimals(), 6);
    await token.write.faucet([user!.account.address, 5_000_000n]);
    assert.equal(await token.read.balanceOf([user!.account.address]), 5_000_000n);
    const max = await token.read.FAUCET_MAX();
    await assert.rejects(token.write.faucet([user!.account.address, max + 1n]), /FaucetAmountTooLarge/);
  });
});
