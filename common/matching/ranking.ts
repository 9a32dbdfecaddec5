/**
 * The matching engine's ranking (engine.ts): the best candidates of one match kept sorted by
 * cost in reused records, so ranking hundreds of offers allocates nothing.
 */
import type { Slot, SlotList } from "./book-index.js";

/**
 * A kept candidate, built into a Candidate only if it survives to the end. A class with every
 * field set at construction, so records share one layout and can be reused.
 */
export class Ranked {
  cost = 0.5;
  slot: Slot | null = null;
  tier = 0;
  priceTerm = 0.5;
  freshness = 0.5;
  /** The cluster of a group candidate (null for one machine), planned again when built. */
  group: ViableCluster | null = null;
  /** The cheapest price the group's price terms were relative to. */
  groupCheapest = 0.5;
}

/**
 * What breaks a tie in cost: the machine's key, or the cluster's for a group. Read only on a tie,
 * so that ranking does not load every offered slot just for its key.
 */
function tieKeyOf(slot: Slot, group: ViableCluster | null): string {
  return group === null ? slot.key : slot.clusterKey;
}

/**
 * The best `limit` candidates by cost, kept sorted; ties broken by key so results are
 * reproducible. Its records are reused, an evicted one for the next offer and all of them by the
 * next match (matching is synchronous and the records never leave it), so a walk that offers
 * hundreds of candidates allocates nothing.
 */
export class TopN {
  readonly items: Ranked[] = [];
  private readonly spare: Ranked[] = [];
  private limit = 0;

  reset(limit: number): void {
    for (const item of this.items) {
      // Let go of the last match's offers (an entry removed since must not stay reachable).
      item.slot = null;
      item.group = null;
      this.spare.push(item);
    }
    this.items.length = 0;
    this.limit = limit;
  }
  get full(): boolean {
    return this.items.length >= this.limit;
  }
  get worst(): number {
    return this.items.length === 0 ? Number.POSITIVE_INFINITY : this.items[this.items.length - 1]!.cost;
  }
  offer(cost: number, slot: Slot, tier: number, priceTerm: number, freshness: number, group: ViableCluster | null, groupCheapest: number): void {
    const items = this.items;
    let record: Ranked;
    if (items.length >= this.limit) {
      const last = items[items.length - 1]!;
      if (cost > last.cost || (cost === last.cost && tieKeyOf(slot, group) >= tieKeyOf(last.slot!, last.group))) return;
      record = items.pop()!;
    } else {
      record = this.spare.pop() ?? new Ranked();
    }
    record.cost = cost;
    record.slot = slot;
    record.tier = tier;
    record.priceTerm = priceTerm;
    record.freshness = freshness;
    record.group = group;
    record.groupCheapest = groupCheapest;
    let i = items.length;
    items.push(record);
    while (i > 0 && (items[i - 1]!.cost > cost || (items[i - 1]!.cost === cost && tieKeyOf(items[i - 1]!.slot!, items[i - 1]!.group) > tieKeyOf(slot, group)))) {
      items[i] = items[i - 1]!;
      i--;
    }
    items[i] = record;
  }
}

/**
 * A cluster that can serve the request, by totals over its machines that fit: positions
 * [start, end) of its model's cluster list, valid while this match runs (matching is synchronous).
 */
export type ViableCluster = { list: SlotList; start: number; end: number; cheapest: number; bound: number };
