/**
 * Errors of the provider agent: setup on-chain, transactions, renter requests about leases.
 * Every class has a stable `name` that callers, renters (it travels over the lease protocols)
 * and tests match on.
 */
import { SuanliError } from "../../../common/errors.js";

/** The provider's stake is below `provider.chain.stakeTarget` and the wallet cannot top it up. */
export class StakeMissingError extends SuanliError {
  override name = "StakeMissingError";
}

/** The wallet is not registered as a provider and `provider.chain.autoRegister` is off. */
export class ProviderNotRegisteredError extends SuanliError {
  override name = "ProviderNotRegisteredError";
}

/** A machine cannot be declared or its declaration cannot be brought in line with the inventory. */
export class MachineDeclarationError extends SuanliError {
  override name = "MachineDeclarationError";
}

/** A transaction the node sent was refused by the chain; `errorName` is the contract's custom error. */
export class ChainTransactionError extends SuanliError {
  override name = "ChainTransactionError";
  readonly functionName: string;
  readonly errorName: string | undefined;
  constructor(functionName: string, errorName: string | undefined, cause: unknown) {
    super(`Transaction ${functionName} failed${errorName ? `: ${errorName}` : ""}`, { cause });
    this.functionName = functionName;
    this.errorName = errorName;
  }
}

/**
 * A request about a lease was not authorized: not signed by the lease's renter, for another
 * provider or action, stale, replayed, or its body does not match the signed hash.
 */
export class RenterAuthError extends SuanliError {
  override name = "RenterAuthError";
}

/** The lease does not exist, or is not one of this provider's. */
export class LeaseNotFoundError extends SuanliError {
  override name = "LeaseNotFoundError";
}

/** The lease cannot take this request in its state (a task spec for an ended lease). */
export class LeaseStateError extends SuanliError {
  override name = "LeaseStateError";
}

/**
 * The lease was opened in a block not yet buried under the node's `chain.confirmations`: the node
 * does not act on it until it is (a shallow reorg may still remove it). Retryable: send again.
 */
export class LeaseNotConfirmedError extends SuanliError {
  override name = "LeaseNotConfirmedError";
}

/** Exec and port forwarding need the lease's task to be running. */
export class TaskNotRunningError extends SuanliError {
  override name = "TaskNotRunningError";
}

/** The lease has no output to download: none was written, it was too large, or its retention ran out. */
export class OutputNotAvailableError extends SuanliError {
  override name = "OutputNotAvailableError";
}

/** A forward to a port the task's spec did not declare in `ports`. */
export class PortNotDeclaredError extends SuanliError {
  override name = "PortNotDeclaredError";
}

/** Nothing of the task listens on the declared port (yet). */
export class TaskPortClosedError extends SuanliError {
  override name = "TaskPortClosedError";
}

/** The provider turned this task I/O feature off (`provider.exec.enabled`, `provider.ports.enabled`) or its runtime cannot do it. */
export class TaskIoUnavailableError extends SuanliError {
  override name = "TaskIoUnavailableError";
}

/** The lease is at its cap of forwarded connections or running execs. */
export class TaskIoLimitError extends SuanliError {
  override name = "TaskIoLimitError";
}
