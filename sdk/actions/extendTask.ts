import { readLease } from "../../common/chain/market.js";
import { MAX_OFFER_TIER, offerKey } from "../../common/offers/message.js";
import { parseInput } from "../../common/validation.js";
import { z } from "zod";
import { InsufficientBalanceError, TaskStateError } from "../errors.js";
import { extendLease, tokenBalances } from "../internal/chain.js";
import { requireWallet, type SuanliContext } from "../internal/context.js";
import { taskRecord } from "./getTaskStatus.js";

/**
 * What `client.extend` takes.
 *
 * @example
 * import { createClient, type ExtendTaskParameters } from "suanli/sdk";
 * const more: ExtendTaskParameters = { seconds: 30 * 60 };
 * await client.extend(taskId, more);
 */
export type ExtendTaskParameters = {
  /** Seconds to add to the lease: a whole number from 1 to 31,622,400 (366 days). */
  seconds: number;
};

/**
 * What `client.extend` returns: the lease extended, what it cost, and its new end.
 *
 * @example
 * import { createClient, type ExtendTaskReturnType } from "suanli/sdk";
 * const extended: ExtendTaskReturnType = await client.extend(taskId, { seconds: 600 });
 * console.log(`lease ${extended.leaseId} now ends at ${new Date(extended.newEnd * 1000).toISOString()}`, extended.extraDeposit, extended.gasUsed);
 */
export type ExtendTaskReturnType = {
  leaseId: bigint;
  /** Deposit added (units × price per unit-second × seconds), token base units. */
  extraDeposit: bigint;
  /** The lease's new end, unix seconds. */
  newEnd: number;
  /** Gas used by the renter's transactions (approve, extend). */
  gasUsed: bigint;
};

const extendSchema = z.strictObject({
  seconds: z.number({ error: "is required: seconds to add" }).int("expected whole seconds").min(1, "must be at least 1").max(366 * 86_400, "must be at most 366 days"),
});

/**
 * Adds time to a running task's lease (Active: the provider started it) at the lease's price. The provider's current public offer
 * for the machine is its consent (its max duration must cover the new total, its price must not
 * exceed the lease's); the extra deposit is pulled from the wallet.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const { newEnd, extraDeposit } = await client.extend(taskId, { seconds: 600 });
 */
export async function extendTask(ctx: SuanliContext, taskId: string, parameters: ExtendTaskParameters): Promise<ExtendTaskReturnType> {
  const { seconds } = parseInput(extendSchema, parameters, "extend parameters");
  const { walletClient, account } = requireWallet(ctx, "extending a task");
  const record = await taskRecord(ctx, taskId);
  const attempt = record.attempts[record.attempts.length - 1];
  const lease = await readLease(ctx.publicClient, ctx.market, attempt.leaseId);
  if (lease.status !== "Active") {
    throw new TaskStateError(`Lease ${attempt.leaseId} is ${lease.status}; only an active lease can be extended.`, {
      metaMessages: lease.status === "Open" ? ["Wait until the provider starts it, or cancel it and submit the task again with a longer duration."] : undefined,
    });
  }
  // The provider's offers for the machine (on-demand, then its reserved-term tiers): the first
  // whose duration range covers the lease's new total and whose price does not exceed the
  // lease's is its consent. An extension that crosses into a tier uses that tier's offer.
  // The offer feed fills in the background: wait for the first sync, then, when no known offer
  // qualifies (no bootstrap given, as with `suanli extend`, or the tier it needs not seen yet),
  // ask the provider itself.
  await ctx.feed.ready();
  const total = Number(lease.deposit / (BigInt(lease.units) * lease.pricePerUnitSecond)) + seconds;
  const consenting = () => {
    const offers = Array.from({ length: MAX_OFFER_TIER + 1 }, (_, tier) => ctx.feed.message(offerKey(attempt.provider, attempt.machineId, tier))).filter((m) => m !== undefined);
    const qualifying = offers.find(
      (m) =>
        total >= m.offer.minDuration &&
        total <= m.offer.maxDuration &&
        (lease.interruptible ? m.offer.minBidPerUnitSecond > 0n && m.offer.minBidPerUnitSecond <= lease.pricePerUnitSecond : m.offer.pricePerUnitSecond <= lease.pricePerUnitSecond),
    );
    return { qualifying, any: offers[0] };
  };
  let found = consenting();
  if (!found.qualifying) {
    ctx.progress(`Fetching the provider's current offers for machine ${attempt.machineId}...`);
    await ctx.feed.syncPeer(attempt.peerId, attempt.addrs).catch(() => undefined);
    found = consenting();
  }
  // Without a qualifying offer, the closest one goes to the chain, whose refusal says why.
  const message = found.qualifying ?? found.any;
  if (!message) {
    throw new TaskStateError(`The provider has no current offer for machine ${attempt.machineId}: it does not consent to an extension now.`, {
      metaMessages: ["Submit a new task instead, or try again when the provider re-announces its offer."],
    });
  }
  const extraDeposit = BigInt(lease.units) * lease.pricePerUnitSecond * BigInt(seconds);
  const { balance } = await tokenBalances(ctx, account.address);
  if (balance < extraDeposit) throw new InsufficientBalanceError(extraDeposit, balance, ctx.deployment.token.symbol, ctx.deployment.token.decimals);
  ctx.progress(`Extending lease ${attempt.leaseId} by ${seconds}s...`);
  const sent = await extendLease({ ...ctx, walletClient, account }, attempt.leaseId, seconds, extraDeposit, message.offer, message.signature);
  for (const tx of sent) attempt.gas.push({ step: tx.step, gasUsed: tx.gasUsed, transaction: tx.transaction });
  attempt.deposit += extraDeposit;
  await ctx.tasks.put(record);
  const after = await readLease(ctx.publicClient, ctx.market, attempt.leaseId);
  return { leaseId: attempt.leaseId, extraDeposit, newEnd: after.end, gasUsed: sent.reduce((g, tx) => g + tx.gasUsed, 0n) };
}
