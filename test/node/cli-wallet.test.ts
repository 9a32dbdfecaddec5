import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { devnetAccount } from "../../common/devnet.js";
import { connectChain } from "../../node/chain/clients.js";
import { deployContracts } from "../../node/chain/deploy.js";
import { startEmbeddedChain, type EmbeddedChain } from "../../node/chain/embedded.js";
import { writeDeployment } from "../../node/chain/manifest.js";
import { lastJson, runCli } from "../support/cli.js";

describe("suanli wallet (CLI)", function () {
  this.timeout(120_000);
  let chain: EmbeddedChain;
  let dir: string;
  let base: string[];

  before(async () => {
    chain = await startEmbeddedChain();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-cli-wallet-"));
    const clients = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0) });
    await writeDeployment(dir, await deployContracts({ publicClient: clients.publicClient, walletClient: clients.walletClient! }));
    base = ["--rpc-url", chain.rpcUrl, "--deployments", dir];
  });
  after(async () => {
    await chain.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("mints devnet tokens to a brand-new key (gas topped up) and shows the balance", async () => {
    const key = "0x" + "ab".repeat(32);
    const faucet = await runCli(["wallet", "faucet", "--amount", "250.5", "--json", ...base], { env: { SUANLI_KEY: key } });
    assert.equal(faucet.code, 0, faucet.stderr);
    const minted = lastJson<{ minted: string; balance: string; address: string }>(faucet.stdout);
    assert.equal(minted.minted, "250500000");
    assert.equal(minted.balance, "250500000");

    const balance = await runCli(["wallet", "balance", minted.address, "--json", ...base]);
    assert.equal(balance.code, 0, balance.stderr);
    const shown = lastJson<{ token: string; native: string }>(balance.stdout);
    assert.equal(shown.token, "250500000");
    assert.ok(BigInt(shown.native) > 0n, "the faucet left gas in the new wallet");
  });

  it("says how to pass a wallet when there is none, and rejects a bad address and amount", async () => {
    const none = await runCli(["wallet", "address", ...base]);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /No wallet/);
    assert.match(none.stderr, /--devnet-account/);

    const badAddress = await runCli(["wallet", "balance", "0x1234", ...base]);
    assert.equal(badAddress.code, 2);
    assert.match(badAddress.stderr, /not an address/);

    const badAmount = await runCli(["wallet", "faucet", "--amount", "lots", "--devnet-account", "2", ...base]);
    assert.equal(badAmount.code, 2);
    assert.match(badAmount.stderr, /--amount/);
  });

  it("prints the address of a devnet account", async () => {
    const result = await runCli(["wallet", "address", "--devnet-account", "4", "--json", ...base]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(lastJson<{ address: string }>(result.stdout).address, devnetAccount(4).address);
  });
});
