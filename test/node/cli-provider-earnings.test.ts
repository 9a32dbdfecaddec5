/**
 * `suanli provider earnings` against a real devnet (issue #40 item 9: a provider could not see what
 * it earned without Grafana). A provider wallet gets a lease opened on its offer, activates it, and
 * claims half an hour in; the command must show exactly what the chain paid, what is claimable or
 * held, per day and per lease, the fees and the collateral locked.
 */
import assert from "node:assert/strict";
import { parseEventLogs } from "viem";
import { leaseMarketAbi, providerRegistryAbi } from "../../common/abi.js";
import { utcDay } from "../../common/chain/earnings.js";
import { readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { lastJson, runCli } from "../support/cli.js";
import { send, startDevnet, type Devnet } from "../support/devnet.js";
import { openDirectLease } from "../support/devnet-lease.js";

type EarningsJson = {
  provider: string;
  claimed: string;
  fees: string;
  claimableNow: string;
  held: string;
  owed: string;
  collateralLocked: string;
  leases: { leaseId: string; status: string; units: number; accrued: string; paid: string; claimable: string; held: string; collateral: string }[];
  days: { day: string; claimed: string; fees: string; claims: number }[];
  tokenSymbol: string;
};

describe("suanli provider earnings (CLI)", function () {
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

  it("a provider with no lease yet sees zeros and says so; a bad address is a usage error", async () => {
    const json = await runCli(["provider", "earnings", "--devnet-account", "8", "--json", ...base]);
    assert.equal(json.code, 0, json.stderr);
    const shown = lastJson<EarningsJson>(json.stdout);
    assert.equal(shown.provider, devnetAccount(8).address);
    assert.deepEqual([shown.claimed, shown.claimableNow, shown.held, shown.owed, shown.leases.length, shown.days.length], ["0", "0", "0", "0", 0, 0]);
    const human = await runCli(["provider", "earnings", devnetAccount(8).address, ...base]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /No leases yet\./);
    const bad = await runCli(["provider", "earnings", "0x1234", ...base]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /"0x1234" is not an address/);
  });

  it("shows what the chain paid, what is claimable or held, per day and per lease, and the collateral locked", async () => {
    const market = devnet.deployment.contracts.market!;
    const provider = await devnet.wallet(5);
    const renter = await devnet.wallet(6);
    const { leaseId, deposit } = await openDirectLease(devnet, provider, renter, { peerId: "12D3KooWEarningsProvider", units: 2, duration: 3600 });
    await send(provider, { address: market, abi: leaseMarketAbi, functionName: "activate", args: [leaseId] });
    await devnet.admin.publicClient.request({ method: "evm_increaseTime" as never, params: [1800] as never });
    const claimHash = await send(provider, { address: market, abi: leaseMarketAbi, functionName: "claim", args: [leaseId] });
    const receipt = await provider.publicClient.getTransactionReceipt({ hash: claimHash });
    const [claimed] = parseEventLogs({ abi: leaseMarketAbi, eventName: "LeaseClaimed", logs: receipt.logs });
    const claimBlock = await provider.publicClient.getBlock({ blockNumber: receipt.blockNumber });
    // A claim pays what accrued until now: about 1,800 s of 2 units at 100.
    assert.ok(claimed && claimed.args.amount >= 2n * 100n * 1800n && claimed.args.amount <= 2n * 100n * 1810n, String(claimed?.args.amount));

    const json = await runCli(["provider", "earnings", "--devnet-account", "5", "--json", ...base]);
    assert.equal(json.code, 0, json.stderr);
    const shown = lastJson<EarningsJson>(json.stdout);
    const lease = await readLease(provider.publicClient, market, leaseId);
    const record = await provider.publicClient.readContract({
      address: devnet.deployment.contracts.registry!,
      abi: providerRegistryAbi,
      functionName: "getProvider",
      args: [provider.account.address],
    });
    assert.equal(shown.provider, provider.account.address);
    assert.equal(shown.claimed, claimed.args.amount.toString(), "received is the claim the chain paid (no fee on the devnet)");
    assert.equal(shown.fees, "0");
    assert.equal(shown.collateralLocked, record.locked.toString());
    assert.equal(shown.collateralLocked, (deposit / 2n).toString(), "half the deposit at 5,000 bps");
    assert.equal(shown.leases.length, 1);
    const row = shown.leases[0]!;
    assert.deepEqual([row.leaseId, row.status, row.units, row.paid], [leaseId.toString(), "Active", 2, lease.paid.toString()]);
    assert.equal(row.paid, claimed.args.amount.toString());
    // What is not paid yet is claimable now or held for the fault window: nothing is lost between them.
    assert.equal(BigInt(row.claimable) + BigInt(row.held), BigInt(row.accrued) - BigInt(row.paid));
    assert.equal(row.held, "0", "a claim pays what accrued until now: nothing is held");
    assert.equal(shown.claimableNow, row.claimable);
    assert.equal(shown.held, row.held);
    assert.deepEqual(shown.days, [{ day: utcDay(claimBlock.timestamp), claimed: claimed.args.amount.toString(), fees: "0", claims: 1 }]);

    const human = await runCli(["provider", "earnings", provider.account.address, ...base]);
    assert.equal(human.code, 0, human.stderr);
    const tokens = (units: bigint) => (Number(units) / 1e6).toString();
    assert.match(
      human.stdout,
      new RegExp(`received\\s+${tokens(claimed.args.amount).replace(".", "\\.")} ${shown.tokenSymbol} \\(after 0 ${shown.tokenSymbol} of protocol fees\\)`),
    );
    assert.match(human.stdout, new RegExp(`collateral\\s+0\\.36 ${shown.tokenSymbol} locked`));
    assert.match(
      human.stdout,
      new RegExp(`${utcDay(claimBlock.timestamp)}\\s+${tokens(claimed.args.amount).replace(".", "\\.")} ${shown.tokenSymbol}\\s+1 claim, fees 0 ${shown.tokenSymbol}`),
    );
    assert.match(human.stdout, new RegExp(`^${leaseId}\\s+Active\\s+2\\s`, "m"));
  });
});
