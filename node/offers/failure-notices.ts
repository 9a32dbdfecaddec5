/**
 * The failure-notices topic on a node (`/suanli/<chainId>/attest-failures/1`, issue 35 item 9):
 * every notice a peer gossips is checked inside gossipsub's topic validator (schema, age, the
 * attestor's EIP-712 signature, the attestor's stake: common/attest/notice-intake.ts, which the
 * SDK's offer feed shares), so only valid notices travel on; a valid
 * one goes into the notice book and re-computes the attestation state of the machine's offers in
 * the offer book, which revokes that attestor's earlier attestations of the machine and counts the
 * failure. The offers-sync protocol serves and fetches the held notices too (gossip.ts).
 */
import { TopicValidatorResult } from "@libp2p/gossipsub";
import type { Address } from "viem";
import type { FailureNotice, NoticeValidation } from "../../common/attest/failure-notice.js";
import { NoticeIntake, noticeTopicValidator } from "../../common/attest/notice-intake.js";
import type { ChainView } from "../../common/offers/chain-view.js";
import type { OfferValidator } from "../../common/offers/validate.js";
import type { SuanliHost } from "../../common/p2p/host.js";
import type { Logger } from "../log/logger.js";
import type { OfferSource } from "../metrics/metrics.js";
import type { OfferBook } from "./book.js";
import type { NoticeBook } from "./notice-book.js";

export type FailureNoticesOptions = {
  host: SuanliHost;
  notices: NoticeBook;
  book: OfferBook;
  validator: OfferValidator;
  /** The chain view whose isAttestor says who is a staked attestor. */
  chain: ChainView;
  chainId: number;
  market: Address;
  logger: Logger;
  now?: () => number;
};

/**
 * @example
 * const failures = new FailureNotices({ host, notices, book, validator, chain, chainId, market, logger });
 * await failures.start();
 * await failures.publish(await signFailureNotice(account, domain, failure));
 */
export class FailureNotices {
  readonly topic: string;
  private readonly intake: NoticeIntake;

  constructor(private readonly o: FailureNoticesOptions) {
    this.intake = new NoticeIntake({ chainId: o.chainId, market: o.market, isAttestor: (address) => o.chain.isAttestor(address), holder: o.notices, now: o.now });
    this.topic = this.intake.topic;
  }

  private get pubsub() {
    return this.o.host.services.pubsub;
  }

  async start(): Promise<void> {
    const pubsub = this.pubsub;
    if (!pubsub) return;
    pubsub.topicValidators.set(
      this.topic,
      noticeTopicValidator(
        (data, from) => this.ingest(data, "gossip", from),
        (error, from) => this.o.logger.error("Failure notice validation failed unexpectedly", { from }, error),
      ),
    );
    pubsub.subscribe(this.topic);
  }

  async stop(): Promise<void> {
    // Stays subscribed (see OffersGossip.stop); messages still arriving are ignored.
    this.pubsub?.topicValidators.set(this.topic, () => TopicValidatorResult.Ignore);
  }

  /** Checks one notice and, when valid and new, keeps it and re-checks the machine's offers. */
  async ingest(data: Uint8Array | string, source: OfferSource, from?: string): Promise<NoticeValidation> {
    const result = await this.intake.ingest(data);
    if (!result.ok) {
      if (source !== "local") this.o.logger.debug("Failure notice refused", { source, from, reason: result.reason, detail: result.detail });
      return result;
    }
    if (result.kept) {
      const { failure } = result.notice;
      const revoked = await this.recheckMachine(failure.provider, failure.machineId);
      this.o.logger.info("Failure notice kept", {
        source,
        attestor: failure.attestor,
        provider: failure.provider,
        machineId: failure.machineId,
        reason: failure.reason,
        offersRechecked: revoked,
      });
    }
    return result;
  }

  /** Publishes one of this node's own notices (an attestor's), after checking it as any receiver would. */
  async publish(notice: FailureNotice): Promise<NoticeValidation> {
    const bytes = JSON.stringify(notice);
    const result = await this.ingest(bytes, "local");
    if (result.ok || result.reason === "duplicate") await this.pubsub?.publish(this.topic, new TextEncoder().encode(bytes));
    return result;
  }

  /** Re-computes the attestation state of a machine's offers (all tiers); returns how many. */
  private async recheckMachine(provider: Address, machineId: number): Promise<number> {
    const entries = this.o.book.byProvider(provider).filter((entry) => entry.machineId === machineId);
    for (const entry of entries) this.o.book.setAttestation(entry.key, await this.o.validator.attestationState(entry.message), entry.seq);
    return entries.length;
  }
}
