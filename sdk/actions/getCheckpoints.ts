import type { Address } from "viem";
import { verifyCheckpoints, type SignedCheckpoint } from "../../common/attest/checkpoint.js";
import { SuanliError } from "../../common/errors.js";
import { authorize, type SuanliContext } from "../internal/context.js";
import { addressesOf } from "../internal/resume.js";
import { currentAttempt } from "../internal/store.js";
import { taskRecord } from "./getTaskStatus.js";

/**
 * What getCheckpoints answers: the task's lease and provider, its checkpoint records verified
 * against that provider (newest first), the newest one, and why the provider's latest snapshot was
 * not taken (a folder over its quota: the previous checkpoint stays the newest).
 *
 * @example
 * import { getCheckpoints, type GetCheckpointsReturnType } from "suanli/sdk";
 * const { newest }: GetCheckpointsReturnType = await client.checkpoints(taskId);
 * console.log(newest?.record.cid);
 */
export type GetCheckpointsReturnType = {
  taskId: string;
  leaseId: bigint;
  provider: Address;
  /** The provider node's multiaddrs, each ending in /p2p/<peer id>: the hints to fetch or pin a checkpoint's CID from it (pinData). */
  providerAddrs: string[];
  checkpoints: SignedCheckpoint[];
  newest: SignedCheckpoint | null;
  error: { name: string; message: string } | null;
};

/**
 * The provider could not be asked for the task's checkpoints.
 *
 * @example
 * import { CheckpointsUnavailableError } from "suanli/sdk";
 * try {
 *   await client.checkpoints(taskId);
 * } catch (error) {
 *   if (error instanceof CheckpointsUnavailableError) console.error(error.shortMessage, error.metaMessages);
 * }
 */
export class CheckpointsUnavailableError extends SuanliError {
  override name = "CheckpointsUnavailableError";
}

/**
 * The task's checkpoint records from its provider (the current attempt's lease), each checked:
 * signed (EIP-712 `Checkpoint`, this deployment) by the lease's provider, for this lease. A record
 * that is not throws CheckpointSignatureError: nothing of an answer with a forged record is used.
 * Resume from `newest.record.cid` with `submitTask({ resumeFrom })`; keep it on your own node with
 * `pinData(newest.record.cid, { nodeUrl, providers: providerAddrs })`.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const client = createClient({ ... });
 * const { newest } = await client.checkpoints(taskId);
 * if (newest) await client.submit({ ...same, resumeFrom: newest.record.cid });
 */
export async function getCheckpoints(ctx: SuanliContext, taskId: string): Promise<GetCheckpointsReturnType> {
  const record = await taskRecord(ctx, taskId);
  const attempt = currentAttempt(record);
  const auth = await authorize(ctx, attempt, "status", {});
  const remote = await ctx.link.status({ peerId: attempt.peerId, addrs: attempt.addrs }, { auth }).catch((error: unknown) => {
    throw new CheckpointsUnavailableError(`The provider of task ${taskId} cannot be reached for its checkpoints`, {
      cause: error,
      metaMessages: ["Checkpoints are kept by the provider that ran the lease; try again while it is online."],
    });
  });
  const checkpoints = await verifyCheckpoints(remote.checkpoints ?? [], { domain: ctx.domain, provider: attempt.provider, leaseId: attempt.leaseId });
  return {
    taskId,
    leaseId: attempt.leaseId,
    provider: attempt.provider,
    providerAddrs: addressesOf(attempt),
    checkpoints,
    newest: checkpoints[0] ?? null,
    error: remote.checkpointError ?? null,
  };
}
