/**
 * Errors of the provider's local machinery (inventory, runtimes, capacity). Every class has a
 * stable `name`; callers and tests match on it. Messages never carry secret values: anything
 * built from task output goes through the task's redactor first.
 */
import { SuanliError, type Blame } from "../../common/errors.js";

/**
 * Whose failure it is when a task cannot start: errors of the renter's input carry
 * `blame: "renter"` (these classes and `InvalidInputError`); anything else is the provider's.
 */
export function blameOf(error: unknown): Blame {
  return typeof error === "object" && error !== null && "blame" in error && error.blame === "renter" ? "renter" : "provider";
}

/** `nvidia-smi` is not installed or not on PATH. */
export class NvidiaSmiUnavailableError extends SuanliError {
  override name = "NvidiaSmiUnavailableError";
  constructor(path: string, cause?: unknown) {
    super(`nvidia-smi was not found (tried "${path}")`, {
      cause,
      metaMessages: [
        "Install the NVIDIA driver utilities, set provider.inventory.nvidiaSmiPath,",
        'or declare the machine: provider.inventory.source = "declared" with provider.inventory.declared.',
      ],
    });
  }
}

/** `nvidia-smi` ran but failed (driver not loaded, GPU lost, timeout). */
export class NvidiaSmiFailedError extends SuanliError {
  override name = "NvidiaSmiFailedError";
  readonly exitCode: number | null;
  constructor(args: string[], exitCode: number | null, output: string) {
    const firstLine = output.split("\n").find((line) => line.trim() !== "")?.trim() ?? "";
    super(`nvidia-smi ${args.join(" ")} failed${exitCode === null ? " (timed out or killed)" : ` with exit code ${exitCode}`}`, {
      details: firstLine || undefined,
    });
    this.exitCode = exitCode;
  }
}

/** An `nvidia-smi` output did not have the expected shape. Names the line. */
export class NvidiaSmiParseError extends SuanliError {
  override name = "NvidiaSmiParseError";
  readonly lineNumber: number;
  constructor(what: string, lineNumber: number, line: string, reason: string) {
    super(`Cannot read ${what}, line ${lineNumber}: ${reason}`, { details: JSON.stringify(line.slice(0, 200)) });
    this.lineNumber = lineNumber;
  }
}

/** The bundle's bytes do not hash to the sha256 the task declared. */
export class BundleDigestMismatchError extends SuanliError {
  override name = "BundleDigestMismatchError";
  /** The renter's task input: the task never runs and the renter pays for the second or two. */
  readonly blame: Blame = "renter";
  readonly expected: string;
  readonly actual: string;
  constructor(url: string, expected: string, actual: string) {
    super(`Bundle ${url} has sha256 ${actual}, but the task requires ${expected}`, {
      metaMessages: ["The bundle changed since the task was written, or the digest is wrong. Nothing was run."],
    });
    this.expected = expected;
    this.actual = actual;
  }
}

/** The bundle could not be fetched: unreachable host, HTTP error, timeout, missing file. */
export class BundleFetchError extends SuanliError {
  override name = "BundleFetchError";
  /** The renter's task input: the task never runs and the renter pays for the second or two. */
  readonly blame: Blame = "renter";
  readonly url: string;
  constructor(url: string, reason: string, cause?: unknown) {
    super(`Cannot fetch bundle ${url}: ${reason}`, { cause, details: reason });
    this.url = url;
  }
}

/** The bundle (download or unpacked content) exceeds the provider's size cap. */
export class BundleTooLargeError extends SuanliError {
  override name = "BundleTooLargeError";
  /** The renter's task input: the task never runs and the renter pays for the second or two. */
  readonly blame: Blame = "renter";
  readonly limit: number;
  constructor(what: string, limit: number, unit = "bytes") {
    super(`${what} exceeds the provider's limit of ${limit} ${unit}`);
    this.limit = limit;
  }
}

/** The bundle is not a readable .tar.gz, or holds an entry that would land outside the workspace. */
export class BundleUnpackError extends SuanliError {
  override name = "BundleUnpackError";
  /** The renter's task input: the task never runs and the renter pays for the second or two. */
  readonly blame: Blame = "renter";
  constructor(reason: string, cause?: unknown) {
    super(`Cannot unpack bundle: ${reason}`, {
      cause,
      metaMessages: ["A bundle is a .tar.gz whose entries are relative paths inside the archive (no `..`, no absolute paths, no links leaving it)."],
    });
  }
}

/** The task's command does not exist in the workspace or on PATH. */
export class CommandNotFoundError extends SuanliError {
  override name = "CommandNotFoundError";
  /** The renter's task input: the task never runs and the renter pays for the second or two. */
  readonly blame: Blame = "renter";
  readonly command: string;
  constructor(command: string, where: string) {
    super(`Command not found: ${command}`, { details: where });
    this.command = command;
  }
}

/** The selected runtime cannot run here (no container engine, bubblewrap required but missing). */
export class RuntimeUnavailableError extends SuanliError {
  override name = "RuntimeUnavailableError";
  constructor(runtime: string, reason: string, metaMessages?: string[]) {
    super(`The ${runtime} runtime is not available: ${reason}`, { metaMessages });
  }
}

/** A lifecycle call in the wrong state (start twice, wait before start). */
export class TaskStateError extends SuanliError {
  override name = "TaskStateError";
  constructor(taskId: string, action: string, state: string) {
    super(`Cannot ${action} task ${taskId}: it is ${state}`);
  }
}

/** The units asked for are held by an on-demand lease (or do not exist). */
export class UnitsBusyError extends SuanliError {
  override name = "UnitsBusyError";
  readonly units: string[];
  constructor(units: string[], reason: string) {
    super(`Units ${units.join(", ")} cannot be assigned: ${reason}`);
    this.units = units;
  }
}

/** A lease id the capacity manager does not know. */
export class UnknownLeaseError extends SuanliError {
  override name = "UnknownLeaseError";
  constructor(leaseId: string) {
    super(`No units are assigned to lease ${leaseId}`);
  }
}

/** The task's network namespace could not be connected or its policy installed (the provider's fault, not the renter's). */
export class SandboxNetworkError extends SuanliError {
  override name = "SandboxNetworkError";
  constructor(message: string, details?: string) {
    super(`Cannot set up the task's network: ${message}`, { details: details || undefined });
  }
}

/**
 * A renter-supplied URL points where the provider's policy does not fetch from (file:, loopback,
 * link-local, private ranges, an unsupported scheme). The message never says what answered there.
 */
export class FetchRefusedError extends SuanliError {
  override name = "FetchRefusedError";
  /** The renter's task input: the task never runs and the renter pays for the second or two. */
  readonly blame: Blame = "renter";
  readonly url: string;
  constructor(url: string, reason: string) {
    super(`Fetching ${url} was refused by the provider's policy: ${reason}`, {
      metaMessages: ["Serve the bundle from a public http(s) address, or ask the provider to allow-list its network."],
    });
    this.url = url;
  }
}
