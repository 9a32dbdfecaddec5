import { SuanliError } from "../../common/errors.js";
import type { RefusalReason } from "../../common/attest/messages.js";

/** A provider declined a challenge; `reason` is the stable code sent back to the attestor. */
export class ChallengeRefusedError extends SuanliError {
  override name = "ChallengeRefusedError";
  readonly reason: RefusalReason;
  /** With a signed reason (common/attest/refusal.ts): the attestor's use counted and the limit it met, in ms. */
  readonly usage: { attestorMs: number; limitMs: number } | undefined;
  constructor(reason: RefusalReason, shortMessage: string, options: { cause?: unknown; metaMessages?: string[]; usage?: { attestorMs: number; limitMs: number } } = {}) {
    super(shortMessage, options);
    this.reason = reason;
    this.usage = options.usage;
  }
}

/**
 * The attestor will not sign a pass of a machine during the fault window after a capacity fault of it that it signed
 * (node/attest/faults/faults.ts passHeldUntil): the pass would prove its own true fault false on chain. No verdict: the
 * challenge ends as an error and the machine can be challenged again after the window.
 */
export class PassWithheldError extends SuanliError {
  override name = "PassWithheldError";
}

/** A challenge state machine was driven in a way its caller should not (e.g. fed after it ended). */
export class ChallengeStateError extends SuanliError {
  override name = "ChallengeStateError";
}

/** The node's wallet does not hold ATTESTOR_ROLE (or no wallet is configured): it cannot run the attestor role. */
export class NotAnAttestorError extends SuanliError {
  override name = "NotAnAttestorError";
}

/** A liveness probe named a lease this provider does not hold active; no heartbeat is signed for it. */
export class LeaseNotHeldError extends SuanliError {
  override name = "LeaseNotHeldError";
}

/** The provider role's attestation parts need a local wallet (chain.privateKey) to sign heartbeats. */
export class NoProviderWalletError extends SuanliError {
  override name = "NoProviderWalletError";
}

/** A liveness probe was not signed by an attestor, or was issued too far from this node's clock. */
export class UnauthorizedProbeError extends SuanliError {
  override name = "UnauthorizedProbeError";
}
