/**
 * `suanli wallet owed` and `suanli wallet withdraw` against a real devnet. The withdraw of a
 * non-zero amount is proven in test/sdk/withdraw-owed.test.ts (same action, blocklisting token).
 */
import assert from "node:assert/strict";
import { devnetAccount } from "../../common/devnet.js";
import { lastJson, runCli } from "../support/cli.js";
import { startDevnet, type Devnet } from "../support/devnet.js";

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
});
