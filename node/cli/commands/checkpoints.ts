/**
 * `suanli checkpoints TASK`: the task's checkpoint records from its provider, each verified
 * against the lease's provider (a forged one fails the command with CheckpointSignatureError),
 * newest first; `--json` prints them as one line. `--pin-on URL` has that node (the renter's own)
 * fetch the newest from the provider and pin it. docs/data.md.
 */
import type { Command } from "commander";
import { pinData, type GetCheckpointsReturnType, type PinDataReturnType } from "../../../sdk/index.js";
import { FlagProblems } from "../preflight.js";
import { emit } from "../output.js";
import type { RenterFlags } from "./renter-output.js";
import { withClient, withRenterFlags } from "./renter-client.js";

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
  withRenterFlags(program.command("checkpoints").description("a task's checkpoints (signed by its provider, verified), newest first").argument("<taskId>"))
    .option("--pin-on <url>", "your node's HTTP API (on this machine): it fetches the newest checkpoint from the provider and pins it")
    .action(async (taskId: string, flags: RenterFlags & { pinOn?: string }) => {
      const problems = new FlagProblems();
      if (flags.pinOn !== undefined && !/^https?:\/\/[^/]+/.test(flags.pinOn))
        problems.add(`--pin-on must be a node's HTTP API URL like http://127.0.0.1:8080, got "${flags.pinOn}"`);
      problems.throwIfAny();
      await withClient(flags, true, async (client) => {
        const answer = await client.checkpoints(taskId);
        let pinned: PinDataReturnType | null = null;
        if (flags.pinOn && answer.newest)
          pinned = await pinData(answer.newest.record.cid, { nodeUrl: flags.pinOn, name: `${taskId}-checkpoint-${answer.newest.record.seq}`, providers: answer.providerAddrs });
        const pinText = flags.pinOn
          ? pinned
            ? `\nPinned #${answer.newest!.record.seq} ${pinned.cid} on ${flags.pinOn} (${pinned.bytes} bytes, every block verified)`
            : "\nNothing to pin: no checkpoint yet"
          : "";
        emit(Boolean(flags.json), flags.pinOn ? { ...answer, pinned } : answer, () => checkpointsText(answer) + pinText);
      });
    });
}
