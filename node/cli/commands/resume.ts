/**
 * `suanli resume TASK`: re-submits a stopped, failed, cancelled or preempted task on any provider,
 * started from its newest verified checkpoint (SDK `client.resume`, docs/data.md "Resume"). The
 * task keeps its id; `suanli wait TASK` follows the new lease. A task still running is refused
 * (TaskStillRunningError), one without a checkpoint too (NoCheckpointError).
 */
import type { Command } from "commander";
import { InvalidInputError } from "../../../common/errors.js";
import { formatUsd } from "../../../common/matching/money.js";
import { parseInput } from "../../../common/validation.js";
import { resumeTaskParametersSchema, type ResumeTaskParameters, type ResumeTaskReturnType } from "../../../sdk/index.js";
import { emit } from "../output.js";
import { FlagProblems } from "../preflight.js";
import type { RenterFlags } from "./renter-output.js";
import { withClient, withRenterFlags } from "./renter-client.js";

type ResumeFlags = RenterFlags & {
  duration?: string;
  maxPrice?: string;
  interruptible?: boolean;
  onDemand?: boolean;
  bid?: string;
  region?: string;
  allowUnattested?: boolean;
  checkpointEvery?: string;
  autoMigrate?: boolean;
};

/** The overrides the flags ask for, every problem with them in `problems`. */
export function resumeOverrides(flags: ResumeFlags, problems: FlagProblems): ResumeTaskParameters {
  if (flags.interruptible && flags.onDemand) problems.add("give --interruptible or --on-demand, not both");
  const overrides: ResumeTaskParameters = {
    ...(flags.duration !== undefined ? { duration: problems.number("duration", flags.duration) } : {}),
    ...(flags.maxPrice !== undefined ? { maxPricePerGpuHour: flags.maxPrice } : {}),
    ...(flags.interruptible ? { interruptible: true } : flags.onDemand ? { interruptible: false } : {}),
    ...(flags.bid !== undefined ? { bidPerGpuHour: flags.bid } : {}),
    ...(flags.region !== undefined ? { region: flags.region } : {}),
    ...(flags.allowUnattested ? { attestedOnly: false } : {}),
    ...(flags.checkpointEvery !== undefined ? { checkpointPeriodSeconds: problems.number("checkpoint-every", flags.checkpointEvery) } : {}),
    ...(flags.autoMigrate ? { autoMigrate: true } : {}),
  };
  try {
    parseInput(resumeTaskParametersSchema, overrides, "resume parameters");
  } catch (error) {
    if (!(error instanceof InvalidInputError)) throw error;
    problems.add(error.message);
  }
  return overrides;
}

/** The human rendering of a resume. */
export function resumeText(resumed: ResumeTaskReturnType): string {
  const { attempt, resumedFrom } = resumed;
  return [
    `Task ${resumed.taskId} resumed: lease ${attempt.leaseId}, ${attempt.units}× ${attempt.model} on machine ${attempt.machineId} of ${attempt.provider}`,
    `  from checkpoint ${resumedFrom.cid} (lease ${resumedFrom.leaseId}${resumedFrom.seq !== null ? `, #${resumedFrom.seq}` : ""}), price ${formatUsd(attempt.pricePerUnitSecond * 3600n)} USD/GPU-h`,
    `Follow it: npx suanli wait ${resumed.taskId}`,
  ].join("\n");
}

export function registerResume(program: Command): void {
  withRenterFlags(
    program
      .command("resume")
      .description("re-submit a stopped, failed, cancelled or preempted task from its newest verified checkpoint, on any provider")
      .argument("<taskId>")
      .option("--duration <seconds>", "lease length (default: the task's)")
      .option("--max-price <usd>", "highest price per GPU-hour, USD (default: the task's)")
      .option("--interruptible", "rent interruptible capacity at --bid")
      .option("--on-demand", "rent on demand (at --max-price)")
      .option("--bid <usd>", "interruptible bid per GPU-hour, USD")
      .option("--region <name>")
      .option("--allow-unattested", "also consider machines without a current attestation")
      .option("--checkpoint-every <seconds>", "checkpoint period for the new lease (at least 10; default: the task's)")
      .option("--auto-migrate", "migrate (and resume) again if the new lease faults or is preempted (with `suanli wait`)"),
  ).action(async (taskId: string, flags: ResumeFlags) => {
    const problems = new FlagProblems();
    const overrides = resumeOverrides(flags, problems);
    await withClient(
      flags,
      true,
      async (client) => {
        const resumed = await client.resume(taskId, overrides);
        emit(Boolean(flags.json), { taskId: resumed.taskId, leaseId: resumed.leaseId, provider: resumed.provider, status: resumed.status, resumedFrom: resumed.resumedFrom }, () =>
          resumeText(resumed),
        );
      },
      problems,
    );
  });
}
