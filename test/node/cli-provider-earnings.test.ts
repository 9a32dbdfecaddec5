/**
 * `suanli provider earnings` against a real devnet (issue #40 item 9: a provider could not see what
 * it earned without Grafana). A provider wallet gets a lease opened on its offer, activates it, and
 * claims half an hour in; the command must show exactly what the chain paid, what is claimable or
 * held, per day and per lease, the fees and the collateral locked. Then it completes the lease: the
 * last fault window of pay shows as held (issue #34) until the claim after the window pays it.
 */
import assert from "node:assert/strict";
import { parseEventLogs } from "viem";
import { leaseMarketAbi, providerRegistryAbi } from "../../common/abi.js";
import { utcDay } from "../../common/chain/earnings.js";
import { COMPLETION_HOLD_SECONDS, readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { lastJson, runCli } from "../support/cli.js";
import { advanceChain, send, startDevnet, type Devnet } from "../support/devnet.js";
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
    // A claim pays up to 10 minutes ago: about 1,200 s of 2 units at 100.
    assert.ok(claimed && claimed.args.amount >= 2n * 100n * 1200n && claimed.args.amount <= 2n * 100n * 1210n, String(claimed?.args.amount));

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
    assert.ok(BigInt(row.held) >= 2n * 100n * 600n, `the last 10 minutes are held: ${row.held}`);
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

    // The provider completes the lease: the renter is refunded at once, the provider's last fault window of pay (and
    // its collateral) stays held, shown as held and not claimable, until a claim after the window releases it.
    await send(provider, { address: market, abi: leaseMarketAbi, functionName: "complete", args: [leaseId, 0, `0x${"00".repeat(32)}`, 1n] });
    const completed = await readLease(provider.publicClient, market, leaseId);
    const total = completed.deposit;
    const window = 2n * 100n * BigInt(COMPLETION_HOLD_SECONDS);
    assert.deepEqual([completed.status, completed.endReason, completed.paid, completed.claimable], ["Settled", "Completed", total - window, 0n]);
    const heldJson = lastJson<EarningsJson>((await runCli(["provider", "earnings", "--devnet-account", "5", "--json", ...base])).stdout);
    assert.deepEqual([heldJson.leases[0]!.status, heldJson.leases[0]!.held, heldJson.leases[0]!.claimable], ["Settled", window.toString(), "0"]);
    assert.deepEqual([heldJson.held, heldJson.claimableNow], [window.toString(), "0"]);
    assert.equal(heldJson.claimed, (total - window).toString(), "received: the first claim and the completion's pay until stopAt - 600 s");

    // Past the window, the held pay is claimable, and the releasing claim pays it: nothing held, everything received.
    await advanceChain(devnet, COMPLETION_HOLD_SECONDS);
    const due = lastJson<EarningsJson>((await runCli(["provider", "earnings", "--devnet-account", "5", "--json", ...base])).stdout);
    assert.deepEqual([due.leases[0]!.held, due.leases[0]!.claimable], ["0", window.toString()]);
    await send(provider, { address: market, abi: leaseMarketAbi, functionName: "claim", args: [leaseId] });
    const released = lastJson<EarningsJson>((await runCli(["provider", "earnings", "--devnet-account", "5", "--json", ...base])).stdout);
    assert.deepEqual([released.held, released.claimableNow, released.claimed, released.collateralLocked], ["0", "0", total.toString(), "0"]);
    assert.deepEqual([released.leases[0]!.paid, released.leases[0]!.accrued], [total.toString(), total.toString()]);
  });
});
