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
    const firstLine =
      output
        .split("\n")
        .find((line) => line.trim() !== "")
        ?.trim() ?? "";
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
  /** What was served is not described (its digest would make a URL a probe of its content): compute it where the file is. */
  constructor(url: string, expected: string, what = "Bundle") {
    super(`${what} ${url} does not have the sha256 the task requires (${expected})`, {
      metaMessages: ["The bundle changed since the task was written, or the digest is wrong: check it with sha256sum where you keep the file. Nothing was run."],
    });
    this.expected = expected;
  }
}

/** The bundle could not be fetched: unreachable host, HTTP error, timeout, missing file. */
export class BundleFetchError extends SuanliError {
  override name = "BundleFetchError";
  /** The renter's task input: the task never runs and the renter pays for the second or two. */
  readonly blame: Blame = "renter";
  readonly url: string;
  constructor(url: string, reason: string, cause?: unknown, what = "bundle") {
    // details is the reason, never the cause's message: the cause (the network error) is for the node's log.
    super(`Cannot fetch ${what} ${url}: ${reason}`, { cause, details: reason });
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

/** Whose fault an error is (common/errors.ts): the provider's machinery (terminate and pay the penalty) or the renter's input. */
export type { Blame };

/**
 * The container engine or its OCI runtime could not create or start the task's container (an
 * rlimit above the host's hard limit, a CDI device that does not resolve, cgroups the runtime
 * cannot use, the engine itself failing). Never the renter's fault: the lease is terminated by
 * the rules and the renter refunded plus the penalty.
 */
export class ContainerEngineError extends SuanliError {
  override name = "ContainerEngineError";
  readonly blame: Blame = "provider";
  /** The engine's own last error line (never task output: the task had not started). */
  readonly engineMessage: string;
  constructor(step: string, engineMessage: string) {
    super(`The container engine failed to ${step}: ${engineMessage || "no error message"}`, {
      metaMessages: ["This is the provider's failure, not the task's: the provider must fix its container engine (see docs/provider.md, Container runtime)."],
    });
    this.engineMessage = engineMessage;
  }
}

/**
 * The registry has no such image: the repository or the tag (or the `@sha256:` digest) does not
 * exist there. The renter's input: nothing ran and the lease ends without run time.
 */
export class ImageNotFoundError extends SuanliError {
  override name = "ImageNotFoundError";
  readonly blame: Blame = "renter";
  readonly image: string;
  constructor(image: string, details: string) {
    super(`Image ${image} was not found in its registry (no such repository, tag or digest)`, {
      details,
      metaMessages: ["Check the name, the tag and the digest; `podman pull IMAGE` or `docker pull IMAGE` from anywhere should find it."],
    });
    this.image = image;
  }
}

/**
 * The image could not be pulled for a reason on the registry's side: unreachable, refused the
 * connection, wants credentials, timed out. The renter named the registry, so this is the
 * renter's input error (as an unreachable bundle URL is).
 */
export class ImagePullError extends SuanliError {
  override name = "ImagePullError";
  readonly blame: Blame = "renter";
  readonly image: string;
  constructor(image: string, reason: string, details?: string) {
    super(`Cannot pull image ${image}: ${reason}`, {
      details: details || undefined,
      metaMessages: ["Serve the image from a registry the provider can reach without credentials, or give it as an archive (imageUrl + sha256)."],
    });
    this.image = image;
  }
}

/** The archive behind `imageUrl` is not a container image (docker-archive or oci-archive, optionally gzipped). */
export class ImageArchiveError extends SuanliError {
  override name = "ImageArchiveError";
  readonly blame: Blame = "renter";
  readonly url: string;
  constructor(url: string, reason: string, details?: string) {
    super(`Image archive ${url} cannot be loaded: ${reason}`, {
      details: details || undefined,
      metaMessages: ["An image archive is what `podman save` or `docker save` writes: a docker-archive or oci-archive .tar, optionally gzipped, holding one image."],
    });
    this.url = url;
  }
}
