/**
 * The attestor's side of failure notices (issue 35 item 9): when a machine fails one of this
 * attestor's challenges, its node signs an EIP-712 `AttestationFailure` and gossips it
 * (node/offers/failure-notices.ts), so every offer book stops counting this attestor's earlier
 * attestations of the machine and counts the failure toward `maxAttestFailures`.
 */
import type { Address, LocalAccount, TypedDataDomain } from "viem";
import { signFailureNotice, type FailureNotice } from "../../../common/attest/failure-notice.js";
import type { Logger } from "../../log/logger.js";
import type { ChallengeRecord } from "./results.js";

const ZERO_ADDRESS = "0x0000000000000000000000000000000000000000";

/**
 * Whether a recorded challenge is announced: a failure (outcome `fail`) of a known machine in a
 * challenge that was issued. Not an error (a `busy` or signed bounds refusal, an unreachable
 * provider, a backoff: never the provider's failure), not the retired `busy_too_often`, and of a
 * light in-lease check (a `light: true` record) only wrong rows, the one failure a light check
 * proves on its own.
 */
export function shouldNotify(record: ChallengeRecord): boolean {
  if (record.outcome !== "fail" || record.challengeId === null || record.provider === ZERO_ADDRESS) return false;
  if (record.reason === "busy_too_often") return false;
  return record.light !== true || record.reason === "wrong_rows";
}

export type FailureNotifierOptions = {
  account: Pick<LocalAccount, "address" | "signTypedData">;
  domain: TypedDataDomain;
  /** Gossips the notice (OfferService.failures.publish). */
  publish: (notice: FailureNotice) => Promise<unknown>;
  logger: Logger;
};

/**
 * @example
 * const notifier = new FailureNotifier({ account, domain, publish: (n) => daemon.offers.failures.publish(n), logger });
 * challenger option: onResult: (record) => notifier.onResult(record)
 */
export class FailureNotifier {
  constructor(private readonly o: FailureNotifierOptions) {}

  /** Signs and publishes a notice for `record` when shouldNotify says so; returns it. */
  async onResult(record: ChallengeRecord): Promise<FailureNotice | undefined> {
    if (!shouldNotify(record)) return undefined;
    const notice = await signFailureNotice(this.o.account, this.o.domain, {
      attestor: this.o.account.address as Address,
      provider: record.provider,
      machineId: record.machineId,
      reason: record.reason ?? "failed",
      challengeId: record.challengeId!,
      observedAt: Math.floor(record.finishedAtMs / 1000),
    });
    try {
      await this.o.publish(notice);
      this.o.logger.info("Failure notice published", { machineId: record.machineId, provider: record.provider, reason: record.reason });
    } catch (error) {
      this.o.logger.warn("Cannot publish a failure notice", { machineId: record.machineId }, error);
    }
    return notice;
  }
}
