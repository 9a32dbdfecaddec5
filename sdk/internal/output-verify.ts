/**
 * What every output download shares, browser-safe: which lease a task I/O request goes to, what
 * the task's own state says about its output, and the check of a recomputed output digest
 * against the provider's signed report and the chain.
 *
 * The output manifest's `kind` ("final" or "snapshot") is the provider's unsigned word, and a
 * relay can rewrite it. So the SDK never lets it decide whether the files must verify: it reads
 * the lease on-chain and the provider's status before listing. A task whose lease has ended
 * on-chain, or whose provider reports it over (a final state, or a signed completion report), has
 * an output that must match a signed digest: the files verify or the download fails with the
 * reason. Only a task that is running by both accounts may give an unverified snapshot.
 */
import { readLease, type LeaseStatusName } from "../../common/chain/market.js";
import { verifyCompletion } from "../../common/attest/completion.js";
import { outputDigestOf } from "../../common/output-cid.js";
import { FINAL_TASK_STATES, type TaskStatus as WireTaskStatus } from "../../common/protocols/lease.js";
import { taskRecord } from "../actions/getTaskStatus.js";
import { CompletionMismatchError, OutputDigestMismatchError, OutputDownloadError, OutputUnverifiableError } from "../errors.js";
import type { TaskAttempt } from "../types.js";
import { authorize, type SuanliContext } from "./context.js";
import { checkCompletion, leaseOutcome } from "./receipt.js";
import { currentAttempt } from "./store.js";

/** How long a download waits for the provider to finish stopping a task whose lease has ended on-chain. */
const STOPPING_WAIT_MS = 30_000;
const STOPPING_POLL_MS = 500;

/** The attempt (lease) a task I/O request goes to: the current one, or a group member by rank. */
export async function taskAttempt(ctx: SuanliContext, taskId: string, rank = 0): Promise<TaskAttempt> {
  const record = await taskRecord(ctx, taskId);
  const current = currentAttempt(record);
  if (rank === 0) return current;
  const member = current.group?.[rank];
  if (!member) throw new OutputDownloadError(`Task ${taskId} has no machine of rank ${rank} (${current.group?.length ?? 1} machine(s))`);
  return member;
}

async function providerStatus(ctx: SuanliContext, attempt: TaskAttempt): Promise<WireTaskStatus> {
  const auth = await authorize(ctx, attempt, "status", {});
  return ctx.link.status({ peerId: attempt.peerId, addrs: attempt.addrs }, { auth });
}

/** Whether a task's output must verify against a signed digest, and why. */
export type OutputState = {
  /** True when the task is over (on-chain, or by its provider's own report): its output must verify. */
  over: boolean;
  leaseStatus: LeaseStatusName;
  providerState: WireTaskStatus["state"];
};

/**
 * Reads the task's state before its output is listed: the lease on-chain and the provider's
 * status. When the chain says the lease ended but the provider still reports the task as running
 * (it is being stopped: SIGTERM, grace, digest, signature), waits up to 30 s for the provider to
 * report it over, so that a renter who cancels and downloads at once gets the final output.
 */
export async function outputState(ctx: SuanliContext, attempt: TaskAttempt, signal?: AbortSignal): Promise<OutputState> {
  const deadline = Date.now() + STOPPING_WAIT_MS;
  for (let polls = 0; ; polls++) {
    const [lease, status] = await Promise.all([readLease(ctx.publicClient, ctx.market, attempt.leaseId), providerStatus(ctx, attempt)]);
    const chainOver = lease.status !== "Open" && lease.status !== "Active";
    const providerOver = FINAL_TASK_STATES.has(status.state) || status.completion !== null;
    if (providerOver || !chainOver || Date.now() >= deadline) return { over: chainOver || providerOver, leaseStatus: lease.status, providerState: status.state };
    signal?.throwIfAborted();
    await new Promise((resolve) => setTimeout(resolve, STOPPING_POLL_MS));
  }
}

/** What a verified output was checked against: the chain's CompletionReported event, or the provider's signed report alone. */
export type OutputVerification = "chain" | "signed-report";

/**
 * Checks a recomputed output digest of a task that is over against what binds its output:
 *
 * - the lease's on-chain CompletionReported event when there is one (the provider's signed
 *   report, if it sends one, must then be signed by it and equal that event);
 * - else the provider's signed completion report alone (EIP-712 on this deployment, signed by
 *   the lease's provider, for this lease): the lease ended another way (the renter closed it
 *   after a cancel, a fault, a preemption, its time ran out) or the report is not mined yet.
 *
 * The signed digest is either the older one over the files (common/output-digest.ts) or, from a
 * provider whose data plane pinned the output, the digest of the output's UnixFS CID
 * (common/output-cid.ts). `cidOfFiles` computes the files' CID, asked only when the older digest
 * does not match: files match either encoding only if they are the signed ones.
 *
 * Returns which one; throws OutputDigestMismatchError naming both digests when the files differ,
 * CompletionMismatchError when the report is not the provider's or contradicts the chain, and
 * OutputUnverifiableError when neither exists (nothing binds the output). Browser-safe.
 */
export async function verifyOutputDigest(
  ctx: SuanliContext,
  attempt: TaskAttempt,
  digest: `0x${string}`,
  state?: OutputState,
  cidOfFiles?: () => Promise<string>,
): Promise<OutputVerification> {
  const [status, outcome] = await Promise.all([providerStatus(ctx, attempt), leaseOutcome(ctx, attempt)]);
  const signed = status.completion;
  const onChain = outcome.completion;
  const compare = async (expected: string, where: string) => {
    if (expected.toLowerCase() === digest.toLowerCase()) return;
    const cidDigest = cidOfFiles ? outputDigestOf(await cidOfFiles()) : undefined;
    if (cidDigest?.toLowerCase() === expected.toLowerCase()) return;
    if (!cidOfFiles && status.outputCid && outputDigestOf(status.outputCid)?.toLowerCase() === expected.toLowerCase()) {
      throw new OutputUnverifiableError(`The output of lease ${attempt.leaseId} is committed by its CID ${status.outputCid}, and this download cannot hash UnixFS`, {
        metaMessages: ["Verifying an output CID is Node only: use the Node SDK (downloadOutput with `dir`, or getData from any node)."],
      });
    }
    throw new OutputDigestMismatchError(expected as `0x${string}`, digest, where);
  };
  if (onChain) {
    if (signed && !(await checkCompletion(ctx, attempt, signed, onChain))) {
      throw new CompletionMismatchError(`The provider's completion report for lease ${attempt.leaseId} is not signed by it or contradicts the chain`, {
        metaMessages: ["Do not trust the downloaded files."],
      });
    }
    await compare(onChain.outputDigest, " (and reports on-chain)");
    return "chain";
  }
  if (signed) {
    const verdict = signed.report.leaseId === attempt.leaseId ? await verifyCompletion(signed, { domain: ctx.domain, provider: attempt.provider }) : undefined;
    if (!verdict?.valid) {
      const why = verdict ? verdict.detail : `it is about lease ${signed.report.leaseId}`;
      throw new CompletionMismatchError(`The provider's completion report for lease ${attempt.leaseId} does not check out: ${why}`, {
        metaMessages: ["Do not trust the downloaded files."],
      });
    }
    await compare(
      signed.report.outputDigest,
      ` (signed by the provider; lease ${outcome.status}${outcome.endReason !== "None" ? `, ${outcome.endReason}` : ""}, no report on-chain)`,
    );
    return "signed-report";
  }
  const seen = state ? ` (the provider reports the task ${state.providerState}, the lease is ${state.leaseStatus} on-chain)` : "";
  throw new OutputUnverifiableError(
    `Task of lease ${attempt.leaseId} is over, but neither the chain nor its provider has a completion report for it${seen}: nothing signed binds its output, so the files cannot be verified`,
    {
      metaMessages: ["The provider signs a report when the task's process ends; a lease that ended before its task ran (or while the provider was down) has none."],
    },
  );
}
