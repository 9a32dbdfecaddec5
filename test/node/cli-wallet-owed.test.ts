/**
 * `suanli wallet owed` and `suanli wallet withdraw` against a real devnet. For an owed amount, the
 * devnet token's code is swapped for BlocklistToken's (the same storage layout plus a blocklist),
 * the renter is blocklisted, and its lease's refund lands in `owed`.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import type { Hex } from "viem";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { devnetAccount } from "../../common/devnet.js";
import { lastJson, runCli } from "../support/cli.js";
import { send, startDevnet, type Devnet } from "../support/devnet.js";
import { openDirectLease } from "../support/devnet-lease.js";

describe("suanli wallet owed / withdraw (CLI)", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let base: string[];

  before(async () => {
    devnet = await startDevnet();
    base = ["--rpc-url", devnet.rpcUrl, "--deployments", devnet.deploymentsDir];
  });
  after(async () => {
    await devnet.close();
  });

  it("prints what the market owes the wallet or an address, as JSON and for people", async () => {
    const json = await runCli(["wallet", "owed", "--devnet-account", "3", "--json", ...base]);
    assert.equal(json.code, 0, json.stderr);
    const shown = lastJson<{ address: string; owed: string; tokenSymbol: string }>(json.stdout);
    assert.equal(shown.address, devnetAccount(3).address);
    assert.equal(shown.owed, "0");

    const human = await runCli(["wallet", "owed", devnetAccount(4).address, ...base]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, new RegExp(`The market owes ${devnetAccount(4).address} nothing`));
  });

  it("refuses to withdraw when nothing is owed, without sending, and rejects a bad address", async () => {
    const nothing = await runCli(["wallet", "withdraw", "--devnet-account", "3", ...base]);
    assert.equal(nothing.code, 2);
    assert.match(nothing.stderr, /owes 0x[0-9a-fA-F]{40} nothing; no transaction was sent/);

    const badTo = await runCli(["wallet", "withdraw", "--to", "0x1234", "--devnet-account", "3", ...base]);
    assert.equal(badTo.code, 2);
    assert.match(badTo.stderr, /--to "0x1234" is not an address/);

    const badAddress = await runCli(["wallet", "owed", "nope", ...base]);
    assert.equal(badAddress.code, 2);
    assert.match(badAddress.stderr, /not an address/);
  });

  it("shows a refused refund as owed and withdraws it to another address", async () => {
    const token = devnet.deployment.contracts.token;
    const market = devnet.deployment.contracts.market!;
    const artifact = JSON.parse(await readFile(new URL("../../artifacts/contracts/test/BlocklistToken.sol/BlocklistToken.json", import.meta.url), "utf8")) as {
      abi: never;
      deployedBytecode: Hex;
    };
    await devnet.admin.publicClient.request({ method: "hardhat_setCode" as never, params: [token, artifact.deployedBytecode] as never });

    const provider = await devnet.wallet(5);
    const renter = await devnet.wallet(6);
    const { leaseId, deposit } = await openDirectLease(devnet, provider, renter, { peerId: "12D3KooWOwedProvider", units: 1, duration: 3600 });
    await send(devnet.admin as never, { address: token, abi: artifact.abi, functionName: "setBlocked", args: [renter.account.address, true] });
    await send(renter, { address: market, abi: leaseMarketAbi, functionName: "close", args: [leaseId] });

    const owed = await runCli(["wallet", "owed", "--devnet-account", "6", "--json", ...base]);
    assert.equal(owed.code, 0, owed.stderr);
    assert.equal(lastJson<{ owed: string }>(owed.stdout).owed, deposit.toString());
    const human = await runCli(["wallet", "owed", renter.account.address, ...base]);
    assert.match(human.stdout, /owes 0x[0-9a-fA-F]{40} 0\.36 /);

    const to = devnetAccount(7).address;
    const before = (await renter.publicClient.readContract({ address: token, abi: testTokenAbi, functionName: "balanceOf", args: [to] })) as bigint;
    const withdrawn = await runCli(["wallet", "withdraw", "--to", to, "--devnet-account", "6", "--json", ...base]);
    assert.equal(withdrawn.code, 0, withdrawn.stderr);
    const result = lastJson<{ amount: string; to: string; transaction: string }>(withdrawn.stdout);
    assert.deepEqual([result.amount, result.to], [deposit.toString(), to]);
    assert.equal(await renter.publicClient.readContract({ address: token, abi: testTokenAbi, functionName: "balanceOf", args: [to] }), before + deposit);
    const after = await runCli(["wallet", "owed", "--devnet-account", "6", "--json", ...base]);
    assert.equal(lastJson<{ owed: string }>(after.stdout).owed, "0");
  });
});
