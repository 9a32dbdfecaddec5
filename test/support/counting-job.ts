/**
 * The interruptible "training" job the resume tests run (issue 36, docs/data.md "Resume"): a shell
 * script that counts steps, each logged (`step=N`), and every `every` steps saves the step into
 * $SUANLI_CHECKPOINT_DIR/state. Resumed, it logs `resumed=<$SUANLI_RESUMED_FROM>` and
 * `start=<saved step>` and goes on after the saved step. It stops at step $TOTAL, or after $STEPS
 * steps of this run (`done=N`). $MARK, when set, is written into the checkpoint folder: two jobs at
 * the same step would otherwise have the same checkpoint CID.
 *
 * Its pace: one step per $PACE seconds (default 0.3). A run that only has to finish, not to be
 * caught while it runs, may go faster: $FAST (seconds a step) applies to a resumed run, or, when
 * $SLOW_TASK is set, to every run but that task's ($SUANLI_TASK_ID, `lease-<lease id>`: the lease
 * the test interrupts), so that a run started again from the beginning is quick too. Without $FAST
 * every run keeps $PACE.
 *
 * @example
 * import { countingJob } from "../support/counting-job.js";
 * const counter = await bundles.bundle({ "run.sh": countingJob(5) });
 * await client.submitTask({ ...task, command: "sh run.sh", env: { TOTAL: "70", FAST: "0.02" }, checkpointPeriodSeconds: 10 });
 */
export function countingJob(every: number): string {
  return [
    'echo "resumed=${SUANLI_RESUMED_FROM:-none}"',
    'start=0; if [ -f "$SUANLI_CHECKPOINT_DIR/state" ]; then start=$(cat "$SUANLI_CHECKPOINT_DIR/state"); fi',
    'echo "start=$start"',
    'if [ -n "$MARK" ]; then echo "$MARK" > "$SUANLI_CHECKPOINT_DIR/mark"; fi',
    "pace=${PACE:-0.3}",
    'if [ -n "$SLOW_TASK" ]; then [ "$SUANLI_TASK_ID" = "$SLOW_TASK" ] || pace=${FAST:-$pace}; elif [ -n "$SUANLI_RESUMED_FROM" ]; then pace=${FAST:-$pace}; fi',
    "i=$start; end=${TOTAL:-$((start + STEPS))}",
    `while [ $i -lt $end ]; do i=$((i + 1)); echo "step=$i"; if [ $((i % ${every})) -eq 0 ]; then echo $i > "$SUANLI_CHECKPOINT_DIR/state.tmp" && mv "$SUANLI_CHECKPOINT_DIR/state.tmp" "$SUANLI_CHECKPOINT_DIR/state"; fi; sleep $pace; done`,
    'echo "done=$i"',
    "",
  ].join("\n");
}
