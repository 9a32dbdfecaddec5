import type { Command } from "commander";
import { formatUnits, getAddress, isAddress } from "viem";
import { readProviderEarnings, type ProviderEarnings } from "../../../common/chain/earnings.js";
import { contractAddress } from "../../../common/deployment.js";
import { cliContext, withChainFlags, type ChainFlags } from "../context.js";
import { CliError, emit, ExitCode } from "../output.js";

/** The human rendering of `suanli provider earnings`. */
export function earningsText(earnings: ProviderEarnings, token: { symbol: string; decimals: number }): string {
  const t = (amount: bigint) => `${formatUnits(amount, token.decimals)} ${token.symbol}`;
  const lines = [
    `Earnings of ${earnings.provider} (leases and claims since block ${earnings.fromBlock})`,
    `  received    ${t(earnings.claimed)} (after ${t(earnings.fees)} of protocol fees)`,
    `  claimable   ${t(earnings.claimableNow)} now (the node claims on its own; a claim pays each lease up to 10 minutes ago)`,
    `  held        ${t(earnings.held)} (the last 10 minutes of each lease's pay, held for the fault window)`,
    `  owed        ${t(earnings.owed)}${earnings.owed > 0n ? " (payments the token refused: npx suanli wallet withdraw)" : ""}`,
    `  collateral  ${t(earnings.collateralLocked)} locked by open leases`,
  ];
  if (earnings.days.length > 0) {
    lines.push("Received per day (UTC):");
    for (const day of earnings.days) lines.push(`  ${day.day}  ${t(day.claimed).padStart(18)}  ${day.claims} claim${day.claims === 1 ? "" : "s"}, fees ${t(day.fees)}`);
  }
  if (earnings.leases.length === 0) {
    lines.push("No leases yet.");
  } else {
    lines.push(
      `${"LEASE".padEnd(7)} ${"STATUS".padEnd(21)} ${"UNITS".padStart(5)} ${"ACCRUED".padStart(14)} ${"PAID".padStart(14)} ${"CLAIMABLE".padStart(14)} ${"HELD".padStart(14)}`,
    );
    for (const lease of earnings.leases) {
      const status = lease.endReason === "None" ? lease.status : `${lease.status} ${lease.endReason}`;
      const n = (amount: bigint) => formatUnits(amount, token.decimals).padStart(14);
      lines.push(
        `${String(lease.leaseId).padEnd(7)} ${status.padEnd(21)} ${String(lease.units).padStart(5)} ${n(lease.accrued)} ${n(lease.paid)} ${n(lease.claimable)} ${n(lease.held)}`,
      );
    }
    lines.push(`Amounts in ${token.symbol}, before fees except "received".`);
  }
  return lines.join("\n");
}

export function registerProviderEarnings(provider: Command): void {
  withChainFlags(
    provider
      .command("earnings")
      .description("what your provider wallet (or ADDRESS) earned: received, claimable now, held, owed, per day and per lease, fees, collateral locked")
      .argument("[address]"),
  ).action(async (address: string | undefined, flags: ChainFlags) => {
    if (address !== undefined && !isAddress(address)) {
      throw new CliError(`"${address}" is not an address (expected 0x followed by 40 hex digits)`, ExitCode.usage);
    }
    const ctx = await cliContext(flags, { needWallet: address === undefined });
    const who = address ? getAddress(address) : ctx.account!.address;
    const earnings = await readProviderEarnings(
      ctx.publicClient,
      { market: contractAddress(ctx.deployment, "market"), registry: contractAddress(ctx.deployment, "registry") },
      who,
      ctx.deployment.deploymentBlock,
    );
    const token = ctx.deployment.token;
    emit(Boolean(flags.json), { ...earnings, tokenSymbol: token.symbol, tokenDecimals: token.decimals }, () => earningsText(earnings, token));
  });
}
