/**
 * The renter's commands: offers, submit, tasks, status, logs, wait, cancel, extend, output, forward, exec. They run the
 * SDK with the wallet given by --key / --key-file / SUANLI_KEY / --devnet-account and keep the
 * wallet's tasks in a state file so later commands can follow them (renter-client.ts opens the client).
 */
import type { Command } from "commander";
import { formatUnits } from "viem";
import { InvalidInputError } from "../../../common/errors.js";
import { formatUsd } from "../../../common/matching/money.js";
import { parseInputFlag } from "../../../common/protocols/task-inputs.js";
import { parseSubmitParameters, type SubmitTaskParameters, type SuanliClient, type TaskReceipt, type TaskStatus } from "../../../sdk/index.js";
import { CliError, emit, ExitCode, progress } from "../output.js";
import { FlagProblems } from "../preflight.js";
import { cancelledByRenter, downloadWithProgress, followUpFlags, heldText, renderOutput, renterExitCode, verificationLabel, type RenterFlags } from "./renter-output.js";
import { offersTable } from "./offers-table.js";
import { CHECKPOINT_COPY_FLAG, withClient, withRenterFlags } from "./renter-client.js";
import { waitForShutdown } from "../../signals.js";

export { withClient, withRenterFlags };

function parseEnv(pairs: string[], secret: boolean, problems: FlagProblems): Record<string, string | { value: string; secret: true }> {
  const env: Record<string, string | { value: string; secret: true }> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    if (eq <= 0) {
      problems.add(`--${secret ? "secret-env" : "env"} takes NAME=VALUE, got "${pair}"`);
      continue;
    }
    const name = pair.slice(0, eq);
    const value = pair.slice(eq + 1);
    env[name] = secret ? { value, secret: true } : value;
  }
  return env;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

function elapsed(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  return `${String(Math.floor(s / 3600)).padStart(2, "0")}:${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
}

function tokens(client: SuanliClient, amount: bigint): string {
  return `${formatUnits(amount, client.deployment.token.decimals)} ${client.deployment.token.symbol}`;
}

/** One line of progress while a task runs: state, elapsed time, cost so far. */
function statusLine(client: SuanliClient, status: TaskStatus): string {
  const resumedFrom = status.attempts.at(-1)?.resumedFrom;
  return `${status.state.padEnd(12)} lease ${status.leaseId} ${status.lease.status.padEnd(8)}${heldText(status.lease.collateralHeldUntil)} elapsed ${elapsed(status.lease.elapsedSeconds)}  cost so far ${tokens(client, status.lease.accruedNow)}${resumedFrom ? `  resumed from ${resumedFrom}` : ""}`;
}

/** A close that paid a minimum beyond the seconds used, by the minimum's name (issue #34, findings 4 and 7). */
function minimumChargeText(client: SuanliClient, charge: NonNullable<TaskReceipt["leases"][number]["minimumCharge"]>): string {
  const why = charge.reason === "Commitment" ? "the reserved tier's minimum duration, closed early" : "the preemption notice it owes for evicting others";
  return `${charge.reason}: paid ${tokens(client, charge.amount)} beyond the seconds used (${why})`;
}

/** An early completion, said plainly (issue #34): the provider ended it before the paid time, the renter did not co-sign. */
const EARLY_TEXT = " early (by the provider alone, not co-signed: no completion in its reputation; the unused deposit refunded)";

function renderReceipt(client: SuanliClient, receipt: TaskReceipt): string {
  const lines = [`Receipt for ${receipt.taskId}: ${receipt.state}${receipt.exitCode !== null ? ` (exit code ${receipt.exitCode})` : ""}`];
  if (receipt.error) lines.push(`  why: ${receipt.error.name}: ${receipt.error.message}`);
  for (const lease of receipt.leases) {
    lines.push(
      `  lease ${lease.leaseId} on ${lease.units}× ${lease.model} (machine ${lease.machineId}) by ${lease.provider}`,
      `    ran ${lease.seconds}s, ended ${lease.endReason}${lease.earlyCompletion ? EARLY_TEXT : ""}${heldText(lease.collateralHeldUntil)}; cost ${tokens(client, lease.cost)}, refunded ${tokens(client, lease.refunded)}${lease.credit ? `, credit ${tokens(client, lease.credit)}` : ""}`,
      ...(lease.minimumCharge ? [`    ${minimumChargeText(client, lease.minimumCharge)}`] : []),
      ...(lease.resumedFrom ? [`    resumed from checkpoint ${lease.resumedFrom}`] : []),
      ...lease.gas.map((step) => `    gas ${step.step}: ${step.gasUsed}`),
    );
  }
  if (receipt.completion) {
    lines.push(
      `  completion: exit ${receipt.completion.exitCode}, output ${receipt.completion.outputCid ? `CID ${receipt.completion.outputCid}` : `${receipt.completion.outputDigest.slice(0, 18)}…`}, ${receipt.completion.unitSeconds} unit-seconds, ${receipt.completion.verified ? "verified against the on-chain report" : `NOT verified: ${receipt.state === "preempted" ? "a preempted task is stopped, not completed, so the provider signs no completion report" : "no signed report from the provider matches the on-chain one"}`}`,
    );
  }
  lines.push(`  total: cost ${tokens(client, receipt.totalCost)}, refunded ${tokens(client, receipt.totalRefunded)}, gas ${receipt.totalGasUsed}`);
  return lines.join("\n");
}

async function follow(client: SuanliClient, taskId: string, json: boolean, streamLogs: boolean): Promise<TaskReceipt> {
  const logs = streamLogs
    ? (async () => {
        for await (const line of client.logs(taskId)) {
          if (json) process.stdout.write(`${JSON.stringify({ type: "log", ...line, leaseId: line.leaseId.toString() })}\n`);
          else process.stdout.write(`${line.stream === "stderr" ? "! " : line.stream === "system" ? "# " : ""}${line.text}\n`);
        }
      })().catch(() => undefined)
    : Promise.resolve();
  let last = 0;
  const receipt = await client.wait(taskId, {
    onStatus: (status) => {
      if (json || Date.now() - last < (process.stderr.isTTY ? 1_000 : 5_000)) return;
      last = Date.now();
      process.stderr.write(`${statusLine(client, status)}\n`);
    },
  });
  await logs;
  return receipt;
}

export function registerRenter(program: Command): void {
  withRenterFlags(
    program
      .command("offers")
      .description("list live GPU offers, cheapest first")
      .option("--gpu <type>", 'GPU model or class (A100, H100, "any 80GB")')
      .option("--min-free <n>", "at least this many free GPUs")
      .option("--max-price <usd>", "at most this price per GPU-hour (USD)")
      .option("--region <name>")
      .option("--attested", "only machines with a current attestation")
      .option("--gpu-identity-verified", "only machines whose GPU identities the attestors verified by NVIDIA-signed CC evidence (not a confidential VM)"),
    false,
  ).action(async (flags: RenterFlags & { gpu?: string; minFree?: string; maxPrice?: string; region?: string; attested?: boolean; gpuIdentityVerified?: boolean }) => {
    const problems = new FlagProblems();
    const minFreeUnits = problems.number("min-free", flags.minFree);
    await withClient(
      flags,
      false,
      async (client) => {
        const offers = await client.queryOffers({
          gpuType: flags.gpu,
          minFreeUnits,
          maxPricePerGpuHour: flags.maxPrice,
          region: flags.region,
          attestedOnly: Boolean(flags.attested),
          gpuIdentityVerified: Boolean(flags.gpuIdentityVerified),
        });
        emit(Boolean(flags.json), { offers }, () => (offers.length === 0 ? "No live offers match (is --bootstrap set to a running node?)." : offersTable(offers)));
      },
      problems,
    );
  });

  withRenterFlags(
    program
      .command("submit")
      .description("rent GPUs and run a task: suanli submit --gpu A100 --count 1 --duration 600 --max-price 2.5 --bundle URL --sha256 HEX -- python3 job.py")
      .requiredOption("--gpu <type>", "GPU model or class")
      .option("--count <n>", "GPUs", "1")
      .requiredOption("--duration <seconds>", "lease length in seconds")
      .option("--max-price <usd>", "highest price per GPU-hour, USD")
      .option("--bundle <url>", "http(s):// or file:// URL of a .tar.gz workspace")
      .option("--sha256 <hex>", "sha256 of the bundle (required with --bundle), or of the --image-url archive without a bundle")
      .option("--image <ref>", "container image from a registry, pulled by the provider (container runtime): host/name:tag or name@sha256:...")
      .option("--image-url <url>", "container image archive (podman/docker save: docker-archive or oci-archive .tar, optionally .gz) at an http(s):// URL; needs --sha256")
      .option("--image-sha256 <hex>", "sha256 of the --image-url archive when --bundle and --sha256 are given too")
      .option("--env <NAME=VALUE>", "environment variable (repeatable)", collect, [])
      .option("--secret-env <NAME=VALUE>", "secret environment variable: reaches the task only (repeatable)", collect, [])
      .option("--interruptible", "rent interruptible capacity at --bid (may be preempted)")
      .option("--bid <usd>", "interruptible bid per GPU-hour, USD")
      .option("--region <name>")
      .option("--min-vram <MiB>", "minimum memory per GPU, MiB")
      .option("--cpus <n>", "CPU cores for the whole task (all its GPUs together), enforced by the provider")
      .option("--memory <GiB>", "host memory (RAM) for the whole task, GiB, enforced by the provider")
      .option("--disk <GiB>", "disk for the task's workspace, GiB")
      .option("--allow-unattested", "also consider machines without a current attestation")
      .option("--max-attest-failures <n>", "skip machines with more failed attestation challenges in the last week (default 3)")
      .option("--gpu-identity-verified", "only machines whose GPU identities the attestors verified by NVIDIA-signed CC evidence (Hopper and later; not a confidential VM)")
      .option("--colocation <machine|cluster>", "machine: all GPUs on one machine (default); cluster: may span machines of one declared fast-interconnect cluster")
      .option("--auto-migrate", "re-run elsewhere if the lease faults or is preempted (needs --wait)")
      .option("--wait", "stream the logs, wait for the end and print the receipt")
      .option("--out <dir>", "with --wait: download the task's output folder here at the end and verify it")
      .option("--port <port>", "a TCP port the task serves, reachable with `npx suanli forward` (repeatable)", collect, [])
      .option("--input <CID:/data/name[:bytes]>", "data the task reads, mounted read-only at /data/name (repeatable; bytes: its size)", collect, [])
      .option("--checkpoint-every <seconds>", "snapshot $SUANLI_CHECKPOINT_DIR this often (at least 10; also at the end): `npx suanli checkpoints TASK`")
      .option("--resume-from <cid>", "start from this checkpoint: a writable copy in $SUANLI_CHECKPOINT_DIR, $SUANLI_RESUMED_FROM set")
      .option(...CHECKPOINT_COPY_FLAG)
      .option(
        "--liveness <seconds>",
        "the task rewrites $SUANLI_LIVENESS_NONCE into $SUANLI_LIVENESS_FILE at least this often (5 to 86400); silent longer, it is stopped and its lease completed at your cost so far",
      )
      .argument(
        "<command...>",
        "the command to run, after --: one argument is a shell string run by /bin/sh -c in the workspace (-- 'python3 train.py > out.txt'); several are an argv, its program looked up on the task's PATH inside the provider's sandbox (-- python3 train.py)",
      ),
  ).action(async (command: string[], flags: RenterFlags & Record<string, string | boolean | string[] | undefined>, self: Command) => {
    const json = Boolean(flags.json);
    // Every usage error at once, before anything is reached, reserved or paid.
    const problems = new FlagProblems();
    if (flags.out && !flags.wait) problems.add("--out needs --wait (or run `npx suanli output <taskId> --out DIR` later)");
    const parameters: SubmitTaskParameters = {
      gpuType: flags.gpu as string,
      gpuCount: problems.number("count", flags.count as string)!,
      duration: problems.number("duration", flags.duration as string)!,
      maxPricePerGpuHour: flags.maxPrice as string | undefined,
      bundleUrl: flags.bundle as string | undefined,
      sha256: flags.sha256 as string | undefined,
      image: flags.image as string | undefined,
      imageUrl: flags.imageUrl as string | undefined,
      imageSha256: flags.imageSha256 as string | undefined,
      command: command.length === 1 ? command[0]! : command,
      env: { ...parseEnv(flags.env as string[], false, problems), ...parseEnv(flags.secretEnv as string[], true, problems) },
      interruptible: Boolean(flags.interruptible),
      bidPerGpuHour: flags.bid as string | undefined,
      region: flags.region as string | undefined,
      minVramMiB: problems.number("min-vram", flags.minVram as string | undefined),
      cpuCores: problems.number("cpus", flags.cpus as string | undefined),
      memoryGiB: problems.number("memory", flags.memory as string | undefined),
      diskGiB: problems.number("disk", flags.disk as string | undefined),
      attestedOnly: !flags.allowUnattested,
      maxAttestFailures: problems.count("max-attest-failures", flags.maxAttestFailures as string | undefined),
      gpuIdentityVerified: Boolean(flags.gpuIdentityVerified),
      colocation: flags.colocation as "machine" | "cluster" | undefined,
      autoMigrate: Boolean(flags.autoMigrate),
      ...((flags.port as string[]).length > 0 ? { ports: (flags.port as string[]).map((port) => problems.number("port", port)!) } : {}),
      ...((flags.input as string[]).length > 0 ? { inputs: (flags.input as string[]).map(parseInputFlag) } : {}),
      ...{ checkpointPeriodSeconds: problems.number("checkpoint-every", flags.checkpointEvery as string | undefined), resumeFrom: flags.resumeFrom as string | undefined },
      ...(flags.liveness !== undefined ? { taskLiveness: { silenceSeconds: problems.number("liveness", flags.liveness as string)! } } : {}),
    };
    // The SDK's own checks of the task (GPU type, prices, bundle, command...), when the numbers parsed.
    if (problems.list.length === 0) {
      try {
        parseSubmitParameters(parameters);
      } catch (error) {
        if (!(error instanceof InvalidInputError)) throw error;
        problems.add(error.message);
      }
    }
    await withClient(
      flags,
      true,
      async (client) => {
        const submitted = await client.submitTask(parameters);
        const attempt = submitted.attempt;
        if (!flags.wait) {
          emit(json, { taskId: submitted.taskId, leaseId: submitted.leaseId, provider: submitted.provider, status: submitted.status }, () =>
            [
              `Task ${submitted.taskId} submitted: lease ${attempt.leaseId}, ${attempt.units}× ${attempt.model} on machine ${attempt.machineId} of ${attempt.provider}`,
              `  price ${formatUsd(attempt.pricePerUnitSecond * 3600n)} USD/GPU-h, deposit ${tokens(client, attempt.deposit)}`,
              `Follow it: npx suanli logs ${submitted.taskId} --follow${followUpFlags(self)}`,
              `       or: npx suanli wait ${submitted.taskId}${followUpFlags(self)}`,
            ].join("\n"),
          );
          return;
        }
        progress(json, `Task ${submitted.taskId} running on lease ${attempt.leaseId} (${attempt.units}× ${attempt.model}, ${attempt.provider})`);
        const receipt = await follow(client, submitted.taskId, json, true);
        emit(json, { type: "receipt", ...receipt }, () => renderReceipt(client, receipt));
        if (flags.out) {
          const result = await downloadWithProgress(client, submitted.taskId, flags.out as string, json, {});
          emit(json, { type: "output", ...result }, () => renderOutput(result, flags.out as string));
        }
        if (receipt.state !== "succeeded") throw new CliError(`The task ended ${receipt.state}`, ExitCode.taskFailed);
      },
      problems,
    );
  });

  withRenterFlags(program.command("tasks").description("your tasks and the state of their leases")).action(async (flags: RenterFlags) => {
    await withClient(flags, true, async (client) => {
      const records = await client.tasks();
      const rows: { taskId: string; createdAt: number; attempts: number; state: string; error: string | null; lease: TaskStatus["lease"] | null; leaseId: bigint }[] = [];
      for (const record of records) {
        const status = await client.status(record.taskId).catch(() => undefined);
        rows.push({
          taskId: record.taskId,
          createdAt: record.createdAt,
          attempts: record.attempts.length,
          state: status?.state ?? "unknown",
          error: status?.error?.name ?? null,
          lease: status?.lease ?? null,
          leaseId: record.attempts.at(-1)!.leaseId,
        });
      }
      emit(Boolean(flags.json), { tasks: rows }, () =>
        rows.length === 0
          ? "No tasks yet: suanli submit ..."
          : rows
              .map(
                (r) =>
                  `${r.taskId.padEnd(24)} ${String(r.state).padEnd(12)}${r.error ? ` (${r.error})` : ""} lease ${r.leaseId} ${r.lease?.status ?? "?"}${r.lease && r.lease.endReason !== "None" ? ` ${r.lease.endReason}` : ""}${heldText(r.lease?.collateralHeldUntil)} ${r.lease ? `cost ${tokens(client, r.lease.accrued)}` : ""}${r.lease?.minimumCharge ? ` (${minimumChargeText(client, r.lease.minimumCharge)})` : ""}`,
              )
              .join("\n"),
      );
    });
  });

  withRenterFlags(program.command("status").description("a task's state and its lease").argument("<taskId>")).action(async (taskId: string, flags: RenterFlags) => {
    await withClient(flags, true, async (client) => {
      const status = await client.status(taskId);
      emit(Boolean(flags.json), status, () => statusLine(client, status));
    });
  });

  withRenterFlags(program.command("logs").description("a task's logs").argument("<taskId>").option("--follow", "keep streaming until the task ends")).action(
    async (taskId: string, flags: RenterFlags & { follow?: boolean }) => {
      await withClient(flags, true, async (client) => {
        for await (const line of client.logs(taskId, { follow: Boolean(flags.follow) })) {
          if (flags.json) process.stdout.write(`${JSON.stringify({ ...line, leaseId: line.leaseId.toString() })}\n`);
          else process.stdout.write(`${line.stream === "stderr" ? "! " : line.stream === "system" ? "# " : ""}${line.text}\n`);
        }
      });
    },
  );

  withRenterFlags(
    program
      .command("wait")
      .description("wait for a task to end and print its receipt")
      .argument("<taskId>")
      .option(...CHECKPOINT_COPY_FLAG),
  ).action(async (taskId: string, flags: RenterFlags) => {
    await withClient(flags, true, async (client) => {
      const receipt = await follow(client, taskId, Boolean(flags.json), false);
      emit(Boolean(flags.json), receipt, () => renderReceipt(client, receipt));
      // A task the renter cancelled ended as asked: not a failure for a script waiting on it.
      if (cancelledByRenter(receipt)) progress(Boolean(flags.json), `Task ${taskId} was cancelled by you (suanli cancel); its unused deposit was refunded.`);
      else if (receipt.state !== "succeeded") throw new CliError(`The task ended ${receipt.state}`, ExitCode.taskFailed);
    });
  });

  withRenterFlags(program.command("cancel").description("stop a task and close its lease (refund of the unused deposit)").argument("<taskId>")).action(
    async (taskId: string, flags: RenterFlags) => {
      await withClient(flags, true, async (client) => {
        const receipt = await client.cancel(taskId);
        emit(Boolean(flags.json), receipt, () => renderReceipt(client, receipt));
      });
    },
  );

  withRenterFlags(program.command("extend").description("add time to a running task's lease").argument("<taskId>").requiredOption("--seconds <n>", "seconds to add")).action(
    async (taskId: string, flags: RenterFlags & { seconds: string }) => {
      const problems = new FlagProblems();
      const seconds = problems.number("seconds", flags.seconds)!;
      await withClient(
        flags,
        true,
        async (client) => {
          const result = await client.extend(taskId, { seconds });
          emit(
            Boolean(flags.json),
            result,
            () => `Lease ${result.leaseId} extended: +${tokens(client, result.extraDeposit)}, now ends at ${new Date(result.newEnd * 1000).toISOString()}`,
          );
        },
        problems,
      );
    },
  );

  withRenterFlags(
    program
      .command("output")
      .description("download a task's output folder and verify it against the provider's signed completion report")
      .argument("<taskId>")
      .requiredOption("--out <dir>", "folder to write the files into")
      .option("--max-bytes <n>", "refuse an output larger than this")
      .option("--rank <n>", "a group task's machine (default 0)")
      .option("--no-resume", "download every file again"),
  ).action(async (taskId: string, flags: RenterFlags & { out: string; maxBytes?: string; rank?: string; resume: boolean }) => {
    const problems = new FlagProblems();
    const maxBytes = problems.number("max-bytes", flags.maxBytes);
    const rank = problems.number("rank", flags.rank);
    await withClient(
      flags,
      true,
      async (client) => {
        const result = await downloadWithProgress(client, taskId, flags.out, Boolean(flags.json), { maxBytes, rank, resume: flags.resume });
        emit(Boolean(flags.json), result, () => renderOutput(result, flags.out));
      },
      problems,
    );
  });

  withRenterFlags(
    program
      .command("forward")
      .description("forward a local port to a port the running task declared, until Ctrl-C: suanli forward <taskId> 8000:8000")
      .argument("<taskId>")
      .argument("<localPort:taskPort>", "local port (0: any free one) and the task's port")
      .option("--rank <n>", "a group task's machine (default 0)"),
  ).action(async (taskId: string, mapping: string, flags: RenterFlags & { rank?: string }) => {
    const problems = new FlagProblems();
    const match = /^(\d{1,5}):(\d{1,5})$/.exec(mapping);
    if (!match) problems.add(`Expected <localPort>:<taskPort> such as 8000:8000, got "${mapping}"`);
    const rank = problems.number("rank", flags.rank);
    await withClient(
      flags,
      true,
      async (client) => {
        if (!match) return;
        const tunnel = await client.forward(taskId, {
          port: Number(match[2]),
          localPort: Number(match[1]),
          rank,
          onError: (error) => progress(Boolean(flags.json), `connection refused: ${error.message}`),
        });
        const stopped = waitForShutdown(); // before the ready line: a SIGTERM right after it closes the tunnel cleanly
        emit(
          Boolean(flags.json),
          { localPort: tunnel.localPort, taskPort: Number(match[2]) },
          () => `Forwarding 127.0.0.1:${tunnel.localPort} -> port ${match[2]} of task ${taskId} (Ctrl-C to stop)`,
        );
        await stopped;
        await tunnel.close();
      },
      problems,
    );
  });

  withRenterFlags(
    program
      .command("exec")
      .description("run a command inside the running task: suanli exec <taskId> -- ls -la")
      .argument("<taskId>")
      .argument("<command...>", "the command (after --); one argument runs through /bin/sh -c")
      .option("--timeout <seconds>", "longest the command may run", "300")
      .option("--rank <n>", "a group task's machine (default 0)")
      .option("-t, --tty", "interactive: a terminal on the provider, your keys forwarded raw (Ctrl-C included), resized with yours"),
  ).action(async (taskId: string, command: string[], flags: RenterFlags & { timeout: string; rank?: string; tty?: boolean }) => {
    const problems = new FlagProblems();
    if (flags.tty && flags.json) problems.add("--tty and --json do not go together: a terminal session has no JSON form");
    const timeoutSeconds = problems.number("timeout", flags.timeout);
    const rank = problems.number("rank", flags.rank);
    await withClient(
      flags,
      true,
      async (client) => {
        const json = Boolean(flags.json);
        const stdin = process.stdin;
        const stdout = process.stdout;
        // -t on a terminal: raw mode (every key goes to the remote terminal as typed), restored at the end.
        const raw = Boolean(flags.tty && stdin.isTTY);
        if (raw) stdin.setRawMode(true);
        try {
          const result = await client.exec(taskId, command.length === 1 ? command[0]! : command, {
            timeoutSeconds,
            rank,
            // Piped input reaches the command; so does a terminal's with -t (without it, no TTY is allocated).
            ...(process.stdin.isTTY && !flags.tty ? {} : { stdin: stdin as AsyncIterable<Uint8Array> }),
            ...(flags.tty
              ? {
                  tty: {
                    rows: stdout.rows || Number(process.env.LINES) || 24,
                    cols: stdout.columns || Number(process.env.COLUMNS) || 80,
                    term: process.env.TERM && /^[A-Za-z0-9._+-]{1,64}$/.test(process.env.TERM) ? process.env.TERM : undefined,
                    onResize: (resize: (size: { rows: number; cols: number }) => void) => {
                      if (stdout.isTTY) stdout.on("resize", () => resize({ rows: stdout.rows, cols: stdout.columns }));
                    },
                  },
                }
              : {}),
            onOutput: json ? undefined : (stream, chunk) => (stream === "stdout" ? process.stdout : process.stderr).write(chunk),
          });
          if (json) emit(true, result, () => "");
          else if (result.timedOut) process.stderr.write(`# the command ran past --timeout and was killed\n`);
          if (result.exitCode !== 0) process.exitCode = result.exitCode ?? 128;
        } finally {
          if (raw) stdin.setRawMode(false);
          // The session is over: stop reading the terminal so the process can exit.
          if (flags.tty) stdin.destroy();
        }
      },
      problems,
    );
  });
}

export { cancelledByRenter, followUpFlags, renterExitCode, verificationLabel };
