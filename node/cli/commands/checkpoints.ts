/**
 * `suanli checkpoints TASK`: the task's checkpoint records from its provider, each verified
 * against the lease's provider (a forged one fails the command with CheckpointSignatureError),
 * newest first; `--json` prints them as one line. docs/data.md.
 */
import type { Command } from "commander";
import type { GetCheckpointsReturnType } from "../../../sdk/index.js";
import { emit } from "../output.js";
import type { RenterFlags } from "./renter-output.js";
import { withClient, withRenterFlags } from "./renter.js";

/** The human rendering: one line per checkpoint, newest first, and the provider's latest refusal. */
export function checkpointsText(answer: GetCheckpointsReturnType): string {
  const lines = [`Task ${answer.taskId} (lease ${answer.leaseId}, provider ${answer.provider}): ${answer.checkpoints.length} checkpoint(s), signatures verified`];
  for (const { record } of answer.checkpoints) {
    lines.push(`  #${record.seq}  ${record.cid}  ${record.bytes} bytes  ${new Date(Number(record.time)).toISOString()}`);
  }
  if (answer.error) lines.push(`Latest snapshot not taken: ${answer.error.name}: ${answer.error.message}`);
  if (answer.newest) lines.push(`Resume from the newest once the task stopped: npx suanli resume ${answer.taskId} (or submit ... --resume-from ${answer.newest.record.cid})`);
  return lines.join("\n");
}

export function registerCheckpoints(program: Command): void {
  withRenterFlags(program.command("checkpoints").description("a task's checkpoints (signed by its provider, verified), newest first").argument("<taskId>")).action(
    async (taskId: string, flags: RenterFlags) => {
      await withClient(flags, true, async (client) => {
        const answer = await client.checkpoints(taskId);
        emit(Boolean(flags.json), answer, () => checkpointsText(answer));
      });
    },
  );
}
