/**
 * Taking in attestors' failure notices (common/attest/failure-notice.ts), the same way on a node
 * (node/offers/failure-notices.ts) and in a renter's libp2p offer feed (sdk/internal/feed.ts):
 * each notice is checked by checkFailureNotice (size, JSON, schema, age, the attestor's EIP-712
 * signature under the chain's domain, the attestor's stake) and, when valid and new, kept in the
 * holder; the caller then re-checks the machine's offers, which revokes that attestor's earlier
 * attestations and counts the failure. Inside gossipsub's topic validator a notice nobody honest
 * sends is rejected (its sender's score drops) and a stale or duplicate one ignored.
 */
import { TopicValidatorResult } from "@libp2p/gossipsub";
import type { Address } from "viem";
import { TypedDataRecoverer } from "../eip712-recover.js";
import { attestFailuresTopic, checkFailureNotice, type FailureNotice, type NoticeValidation } from "./failure-notice.js";

/** Where kept notices go: the node's NoticeBook (level) or an in-memory NoticeIndex. */
export type NoticeHolder = {
  has(key: string): boolean;
  /** True when the notice was new and is kept. */
  add(notice: FailureNotice, raw: string): boolean | Promise<boolean>;
};

export type NoticeIntakeOptions = {
  chainId: number;
  /** LeaseMarket address (the EIP-712 verifying contract). */
  market: Address;
  /** ProviderRegistry.isAttestor: holds ATTESTOR_ROLE and is staked (typically a cached read). */
  isAttestor: (address: Address) => Promise<boolean>;
  holder: NoticeHolder;
  /** Unix seconds now. */
  now?: () => number;
};

/** A checked notice, and whether it was new and kept. */
export type NoticeIntakeResult = NoticeValidation & { kept?: boolean };

/**
 * @example
 * const intake = new NoticeIntake({ chainId, market, isAttestor: (a) => chain.isAttestor(a), holder: notices });
 * const result = await intake.ingest(bytes);
 * if (result.ok && result.kept) await recheckMachine(result.notice.failure.provider, result.notice.failure.machineId);
 */
export class NoticeIntake {
  readonly topic: string;
  private readonly recoverer: TypedDataRecoverer;
  private readonly now: () => number;

  constructor(private readonly o: NoticeIntakeOptions) {
    this.topic = attestFailuresTopic(o.chainId);
    this.recoverer = new TypedDataRecoverer(o.chainId, o.market);
    this.now = o.now ?? (() => Math.floor(Date.now() / 1000));
  }

  /** Checks one notice and, when valid and new, keeps it (`kept`). */
  async ingest(data: Uint8Array | string): Promise<NoticeIntakeResult> {
    const result = await checkFailureNotice(data, {
      recoverer: this.recoverer,
      isAttestor: this.o.isAttestor,
      now: this.now(),
      has: (key) => this.o.holder.has(key),
    });
    if (!result.ok) return result;
    return { ...result, kept: await this.o.holder.add(result.notice, result.raw) };
  }
}

/**
 * The gossipsub topic validator of the notices topic: Accept a valid notice (new or already
 * held: valid notices travel on), Reject what nobody honest sends, Ignore the rest and any failure
 * of ours (`onError`).
 */
export function noticeTopicValidator(
  ingest: (data: Uint8Array, from: string) => Promise<NoticeValidation>,
  onError?: (error: unknown, from: string) => void,
): (peer: { toString(): string }, message: { data: Uint8Array }) => Promise<TopicValidatorResult> {
  return async (peer, message) => {
    const from = peer.toString();
    try {
      const result = await ingest(message.data, from);
      if (result.ok) return TopicValidatorResult.Accept;
      return result.action === "reject" ? TopicValidatorResult.Reject : TopicValidatorResult.Ignore;
    } catch (error) {
      onError?.(error, from);
      return TopicValidatorResult.Ignore;
    }
  };
}
