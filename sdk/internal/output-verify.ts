/**
 * What every output download shares, browser-safe: which lease a task I/O request goes to, and
 * the check of a recomputed output digest against the provider's signed report and the chain.
 */
import { taskRecord } from "../actions/getTaskStatus.js";
import { CompletionMismatchError, OutputDigestMismatchError, OutputDownloadError } from "../errors.js";
import type { TaskAttempt } from "../types.js";
import { authorize, type SuanliContext } from "./context.js";
import { checkCompletion, leaseOutcome } from "./receipt.js";
import { currentAttempt } from "./store.js";

/** The attempt (lease) a task I/O request goes to: the current one, or a group member by rank. */
export async function taskAttempt(ctx: SuanliContext, taskId: string, rank = 0): Promise<TaskAttempt> {
  const record = await taskRecord(ctx, taskId);
  const current = currentAttempt(record);
  if (rank === 0) return current;
  const member = current.group?.[rank];
  if (!member) throw new OutputDownloadError(`Task ${taskId} has no machine of rank ${rank} (${current.group?.length ?? 1} machine(s))`);
  return member;
}

/**
 * Checks a recomputed output digest against the provider's signed completion report (itself
 * checked against the chain's CompletionReported event; the chain's digest wins): true when it
 * matches, false when nothing is signed yet; throws OutputDigestMismatchError naming both digests,
 * or CompletionMismatchError when the report is not the provider's or contradicts the chain.
 * Browser-safe (the relay download uses it too).
 */
export async function verifyOutputDigest(ctx: SuanliContext, attempt: TaskAttempt, digest: `0x${string}`): Promise<boolean> {
  const [status, outcome] = await Promise.all([
    authorize(ctx, attempt, "status", {}).then((auth) => ctx.link.status({ peerId: attempt.peerId, addrs: attempt.addrs }, { auth })),
    leaseOutcome(ctx, attempt),
  ]);
  const signed = status.completion;
  const onChain = outcome.completion;
  if (signed && !(await checkCompletion(ctx, attempt, signed, onChain))) {
    throw new CompletionMismatchError(`The provider's completion report for lease ${attempt.leaseId} is not signed by it or contradicts the chain`, {
      metaMessages: ["Do not trust the downloaded files."],
    });
  }
  const expected = (onChain?.outputDigest ?? signed?.report.outputDigest) as `0x${string}` | undefined;
  if (!expected) return false;
  if (expected.toLowerCase() !== digest.toLowerCase()) {
    throw new OutputDigestMismatchError(expected, digest, onChain ? " (and reports on-chain)" : "");
  }
  return true;
}
