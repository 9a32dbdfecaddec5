import { readLease } from "../../common/chain/market.js";
import { MAX_OFFER_TIER, offerKey } from "../../common/offers/message.js";
import { parseInput } from "../../common/validation.js";
import { z } from "zod";
import type { Hex } from "viem";
import type { LeaseView } from "../../common/chain/market.js";
import type { Offer } from "../../common/eip712.js";
import { SuanliError } from "../../common/errors.js";
import { GroupExtendError, InsufficientBalanceError, InvalidInputError, TaskStateError } from "../errors.js";
import { extendLease, prepareExtensions, tokenBalances } from "../internal/chain.js";
import type { TaskAttempt } from "../types.js";
import { requireWallet, type SuanliContext } from "../internal/context.js";
import { taskRecord } from "./getTaskStatus.js";
import { currentAttempt } from "../internal/store.js";

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
  /**
   * A group task: extend only these of its leases (by lease id), e.g. the rest after a
   * GroupExtendError. Default: every lease of the group.
   */
  only?: bigint[];
};

/**
 * What `client.extend` returns: the lease extended, what it cost, and its new end. For a group
 * task, `leases` has each lease; `extraDeposit` and `gasUsed` are their sums and `newEnd` the
 * earliest new end (when the group stops).
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
  /** A group task: every lease extended, by rank. */
  leases?: { leaseId: bigint; rank: number; extraDeposit: bigint; newEnd: number }[];
};

const extendSchema = z.strictObject({
  seconds: z
    .number({ error: "is required: seconds to add" })
    .int("expected whole seconds")
    .min(1, "must be at least 1")
    .max(366 * 86_400, "must be at most 366 days"),
  only: z.array(z.bigint()).min(1).max(64).optional(),
});

type Plan = { member: TaskAttempt; rank: number; lease: LeaseView; extraDeposit: bigint; offer: Offer; signature: Hex };

/**
 * Adds time to a running task's lease (Active: the provider started it) at the lease's price. The provider's current public offer
 * for the machine is its consent (its max duration must cover the new total, its price must not
 * exceed the lease's); the extra deposit is pulled from the wallet.
 *
 * A group task (several machines) is extended on every lease, all or nothing as far as the chain
 * allows: every lease must be Active and have a consenting offer, the wallet must hold all the
 * extra deposits, and every extension is simulated against the chain, before the first is sent
 * (a refusal there extends nothing). The leases are then extended one by one; one failing after
 * that check throws GroupExtendError naming those extended and the rest.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const { newEnd, extraDeposit } = await client.extend(taskId, { seconds: 600 });
 */
export async function extendTask(ctx: SuanliContext, taskId: string, parameters: ExtendTaskParameters): Promise<ExtendTaskReturnType> {
  const { seconds, only } = parseInput(extendSchema, parameters, "extend parameters");
  const { walletClient, account } = requireWallet(ctx, "extending a task");
  const record = await taskRecord(ctx, taskId);
  const attempt = currentAttempt(record);
  const group = attempt.group && attempt.group.length > 1 ? attempt.group : undefined;
  let members = (group ?? [attempt]).map((member, rank) => ({ member: rank === 0 ? attempt : member, rank }));
  if (only) {
    const unknown = only.filter((id) => !members.some(({ member }) => member.leaseId === id));
    if (unknown.length) {
      throw new InvalidInputError("extend parameters", [
        { path: "only", message: `lease(s) ${unknown.join(", ")} are not leases of task ${taskId} (${members.map(({ member }) => member.leaseId).join(", ")})` },
      ]);
    }
    members = members.filter(({ member }) => only.includes(member.leaseId));
  }
  await ctx.feed.ready();
  const plans: Plan[] = [];
  for (const { member, rank } of members) {
    const lease = await readLease(ctx.publicClient, ctx.market, member.leaseId);
    if (lease.status !== "Active") {
      throw new TaskStateError(
        group
          ? `Lease ${member.leaseId} (rank ${rank}) of the group is ${lease.status}; a group is extended only when every lease is active. Nothing was extended.`
          : `Lease ${member.leaseId} is ${lease.status}; only an active lease can be extended.`,
        {
          metaMessages: lease.status === "Open" ? ["Wait until the provider starts it, or cancel it and submit the task again with a longer duration."] : undefined,
        },
      );
    }
    const message = await consentingOffer(ctx, member, lease, seconds, group !== undefined);
    plans.push({ member, rank, lease, extraDeposit: BigInt(lease.units) * lease.pricePerUnitSecond * BigInt(seconds), offer: message.offer, signature: message.signature });
  }
  const first = plans[0];
  if (!first) throw new InvalidInputError("extend parameters", [{ path: "only", message: `names no lease of task ${taskId}` }]);
  const total = plans.reduce((sum, plan) => sum + plan.extraDeposit, 0n);
  const { balance } = await tokenBalances(ctx, account.address);
  if (balance < total) throw new InsufficientBalanceError(total, balance, ctx.deployment.token.symbol, ctx.deployment.token.decimals);
  const chain = { ...ctx, walletClient, account };

  if (!group) {
    const plan = first;
    ctx.progress(`Extending lease ${attempt.leaseId} by ${seconds}s...`);
    const sent = await extendLease(chain, attempt.leaseId, seconds, plan.extraDeposit, plan.offer, plan.signature);
    for (const tx of sent) attempt.gas.push({ step: tx.step, gasUsed: tx.gasUsed, transaction: tx.transaction });
    attempt.deposit += plan.extraDeposit;
    await ctx.tasks.put(record);
    const after = await readLease(ctx.publicClient, ctx.market, attempt.leaseId);
    return { leaseId: attempt.leaseId, extraDeposit: plan.extraDeposit, newEnd: after.end, gasUsed: sent.reduce((g, tx) => g + tx.gasUsed, 0n) };
  }

  ctx.progress(`Checking the extension of ${plans.length} lease(s) of the group against the chain...`);
  const approval = await prepareExtensions(
    chain,
    plans.map((plan) => ({ leaseId: plan.member.leaseId, seconds, offer: plan.offer, signature: plan.signature })),
    total,
  );
  let gasUsed = 0n;
  if (approval) {
    first.member.gas.push({ step: approval.step, gasUsed: approval.gasUsed, transaction: approval.transaction });
    gasUsed += approval.gasUsed;
    await ctx.tasks.put(record);
  }
  const done: NonNullable<ExtendTaskReturnType["leases"]> = [];
  for (const [index, plan] of plans.entries()) {
    ctx.progress(`Extending lease ${plan.member.leaseId} (rank ${plan.rank}) by ${seconds}s...`);
    let sent;
    try {
      sent = await extendLease(chain, plan.member.leaseId, seconds, plan.extraDeposit, plan.offer, plan.signature);
    } catch (error) {
      throw new GroupExtendError(
        done.map(({ leaseId, newEnd, extraDeposit }) => ({ leaseId, newEnd, extraDeposit })),
        { leaseId: plan.member.leaseId, reason: error instanceof SuanliError ? error.shortMessage : String(error) },
        plans.slice(index + 1).map((rest) => rest.member.leaseId),
        error,
      );
    }
    for (const tx of sent) plan.member.gas.push({ step: tx.step, gasUsed: tx.gasUsed, transaction: tx.transaction });
    plan.member.deposit += plan.extraDeposit;
    // Rank 0 is both the attempt and the group's first entry in the record.
    // (group has at least two entries: see its definition.)
    if (plan.rank === 0) group[0]!.deposit = plan.member.deposit;
    await ctx.tasks.put(record);
    gasUsed += sent.reduce((g, tx) => g + tx.gasUsed, 0n);
    const after = await readLease(ctx.publicClient, ctx.market, plan.member.leaseId);
    done.push({ leaseId: plan.member.leaseId, rank: plan.rank, extraDeposit: plan.extraDeposit, newEnd: after.end });
  }
  return { leaseId: first.member.leaseId, extraDeposit: total, newEnd: Math.min(...done.map((lease) => lease.newEnd)), gasUsed, leases: done };
}

/**
 * The provider's offers for the machine (on-demand, then its reserved-term tiers): the first
 * whose duration range covers the lease's new total and whose price does not exceed the lease's
 * is its consent. An extension that crosses into a tier uses that tier's offer. The offer feed
 * fills in the background: when no known offer qualifies (no bootstrap given, as with `suanli
 * extend`, or the tier it needs not seen yet), ask the provider itself. Without a qualifying
 * offer, the closest one goes to the chain, whose refusal says why (for a group, the simulation
 * before anything is sent).
 */
async function consentingOffer(ctx: SuanliContext, attempt: TaskAttempt, lease: LeaseView, seconds: number, group: boolean) {
  const total = Number(lease.deposit / (BigInt(lease.units) * lease.pricePerUnitSecond)) + seconds;
  const consenting = () => {
    const offers = Array.from({ length: MAX_OFFER_TIER + 1 }, (_, tier) => ctx.feed.message(offerKey(attempt.provider, attempt.machineId, tier))).filter((m) => m !== undefined);
    const qualifying = offers.find(
      (m) =>
        total >= m.offer.minDuration &&
        total <= m.offer.maxDuration &&
        (lease.interruptible
          ? m.offer.minBidPerUnitSecond > 0n && m.offer.minBidPerUnitSecond <= lease.pricePerUnitSecond
          : m.offer.pricePerUnitSecond <= lease.pricePerUnitSecond),
    );
    return { qualifying, any: offers[0] };
  };
  let found = consenting();
  if (!found.qualifying) {
    ctx.progress(`Fetching the provider's current offers for machine ${attempt.machineId}...`);
    await ctx.feed.syncPeer(attempt.peerId, attempt.addrs).catch(() => undefined);
    found = consenting();
  }
  const message = found.qualifying ?? found.any;
  if (!message) {
    throw new TaskStateError(
      `The provider has no current offer for machine ${attempt.machineId}: it does not consent to an extension now.${group ? " Nothing was extended." : ""}`,
      {
        metaMessages: ["Submit a new task instead, or try again when the provider re-announces its offer."],
      },
    );
  }
  return message;
}
