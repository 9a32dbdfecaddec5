/**
 * OpenZeppelin's TimelockController as Suanli's governance (docs/contracts.md, "Roles and the timelock"):
 * deploying it, and the proposals the CLI prints, schedules and executes (`npx suanli governance`).
 */
import {
  encodeFunctionData,
  getAddress,
  keccak256,
  toBytes,
  zeroAddress,
  zeroHash,
  type Account,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type Transport,
  type WalletClient,
} from "viem";
import { timelockControllerAbi } from "../../common/abi.js";
import { readBytecode } from "./artifacts.js";
import { DeployError } from "./deploy-errors.js";

export const PROPOSER_ROLE = keccak256(toBytes("PROPOSER_ROLE"));
export const EXECUTOR_ROLE = keccak256(toBytes("EXECUTOR_ROLE"));
export const CANCELLER_ROLE = keccak256(toBytes("CANCELLER_ROLE"));
const ADMIN_ROLE = zeroHash;
/** As an executor: anyone may execute a proposal once it is ready (OpenZeppelin's open role). */
export const ANYONE = zeroAddress;

export type TimelockSettings = {
  /** Seconds between scheduling a proposal and the earliest time it can run. */
  minDelaySeconds: number;
  /** Who may schedule (and cancel) proposals: a multisig in production. At least one. */
  proposers: readonly Address[];
  /** Who may execute a ready proposal; ANYONE (the zero address) opens execution to every account. At least one. */
  executors: readonly Address[];
  /** Accounts that may only cancel scheduled proposals (a guardian), besides the proposers. */
  cancellers?: readonly Address[];
};

type Clients = { publicClient: PublicClient<Transport, Chain>; walletClient: WalletClient<Transport, Chain, Account> };

/** Refuses settings that would leave governance unusable, before anything is sent. */
export function checkTimelockSettings(settings: TimelockSettings): void {
  if (!Number.isInteger(settings.minDelaySeconds) || settings.minDelaySeconds < 0) {
    throw new DeployError(`The timelock delay must be a whole number of seconds, got ${settings.minDelaySeconds}`);
  }
  if (settings.proposers.length === 0) throw new DeployError("A timelock needs at least one proposer (--proposer 0x…): nobody could ever change a parameter");
  if (settings.executors.length === 0) throw new DeployError("A timelock needs at least one executor (--executor 0x… or --executor anyone)");
  if (settings.proposers.some((p) => getAddress(p) === ANYONE)) throw new DeployError("A proposer cannot be the zero address");
}

/**
 * Deploys a TimelockController with `settings`. Its own admin is itself: the deployer holds the timelock's admin role
 * only while it grants the cancellers, then renounces it, so changing proposers, executors or the delay is itself a
 * proposal that waits the delay.
 */
export async function deployTimelock({ publicClient, walletClient }: Clients, settings: TimelockSettings): Promise<{ address: Address; blockNumber: bigint }> {
  checkTimelockSettings(settings);
  const deployer = walletClient.account.address;
  const cancellers = settings.cancellers ?? [];
  const send = async (what: string, hash: Hex) => {
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new DeployError(`${what} failed (transaction ${hash})`);
    return receipt;
  };
  const deployed = await send(
    "Deploying the TimelockController",
    await walletClient.deployContract({
      abi: timelockControllerAbi,
      bytecode: await readBytecode("TimelockController"),
      args: [BigInt(settings.minDelaySeconds), [...settings.proposers], [...settings.executors], cancellers.length ? deployer : zeroAddress],
    }),
  );
  const address = getAddress(deployed.contractAddress!);
  if (cancellers.length) {
    for (const canceller of cancellers) {
      await send(
        `Granting CANCELLER_ROLE to ${canceller}`,
        await walletClient.writeContract({ address, abi: timelockControllerAbi, functionName: "grantRole", args: [CANCELLER_ROLE, canceller] }),
      );
    }
    await send(
      "Renouncing the deployer's admin role of the timelock",
      await walletClient.writeContract({ address, abi: timelockControllerAbi, functionName: "renounceRole", args: [ADMIN_ROLE, deployer] }),
    );
  }
  return { address, blockNumber: deployed.blockNumber };
}

/** One call the timelock makes when a proposal runs. */
export type TimelockCall = { target: Address; value: bigint; data: Hex };

/** A proposal ready to schedule and later execute: the operation, its id, and the calldata of both steps. */
export type TimelockProposal = TimelockCall & {
  timelock: Address;
  predecessor: Hex;
  salt: Hex;
  delaySeconds: bigint;
  /** TimelockController.hashOperation of the call, predecessor and salt. */
  id: Hex;
  /** Calldata of `schedule(target, value, data, predecessor, salt, delay)`, to send to the timelock from a proposer. */
  scheduleCalldata: Hex;
  /** Calldata of `execute(target, value, data, predecessor, salt)`, to send once the delay has passed. */
  executeCalldata: Hex;
};

/** The proposal of `call` to `timelock`, with its current minimum delay; `salt` tells apart two proposals of the same call. */
export async function buildProposal(publicClient: PublicClient<Transport, Chain>, timelock: Address, call: TimelockCall, salt: Hex = zeroHash): Promise<TimelockProposal> {
  const predecessor = zeroHash;
  const [delaySeconds, id] = await Promise.all([
    publicClient.readContract({ address: timelock, abi: timelockControllerAbi, functionName: "getMinDelay" }),
    publicClient.readContract({ address: timelock, abi: timelockControllerAbi, functionName: "hashOperation", args: [call.target, call.value, call.data, predecessor, salt] }),
  ]);
  return {
    ...call,
    timelock,
    predecessor,
    salt,
    delaySeconds,
    id,
    scheduleCalldata: encodeFunctionData({
      abi: timelockControllerAbi,
      functionName: "schedule",
      args: [call.target, call.value, call.data, predecessor, salt, delaySeconds],
    }),
    executeCalldata: encodeFunctionData({ abi: timelockControllerAbi, functionName: "execute", args: [call.target, call.value, call.data, predecessor, salt] }),
  };
}

export type OperationState = "unset" | "waiting" | "ready" | "done";

/** Where a proposal stands: not scheduled (or cancelled), waiting for its delay, ready to execute, or executed; and when it is (or was) ready. */
export async function operationStatus(publicClient: PublicClient<Transport, Chain>, timelock: Address, id: Hex): Promise<{ state: OperationState; readyAt?: number }> {
  const [state, timestamp] = await Promise.all([
    publicClient.readContract({ address: timelock, abi: timelockControllerAbi, functionName: "getOperationState", args: [id] }),
    publicClient.readContract({ address: timelock, abi: timelockControllerAbi, functionName: "getTimestamp", args: [id] }),
  ]);
  const states: OperationState[] = ["unset", "waiting", "ready", "done"];
  // getTimestamp is 1 for a done operation (OpenZeppelin's marker), 0 for an unset one.
  return { state: states[state] ?? "unset", ...(timestamp > 1n ? { readyAt: Number(timestamp) } : {}) };
}

/** Whether `account` holds `role` in the timelock, counting an open role (granted to the zero address) for the executor. */
export async function holdsTimelockRole(publicClient: PublicClient<Transport, Chain>, timelock: Address, role: Hex, account: Address): Promise<boolean> {
  const has = (who: Address) => publicClient.readContract({ address: timelock, abi: timelockControllerAbi, functionName: "hasRole", args: [role, who] });
  if (await has(account)) return true;
  return role === EXECUTOR_ROLE && has(ANYONE);
}
