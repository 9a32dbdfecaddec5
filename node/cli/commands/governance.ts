import type { Command } from "commander";
import { encodeFunctionData, getAddress, isAddress, zeroAddress, zeroHash, type Address, type Hex } from "viem";
import { attestorStakingAbi, providerRegistryAbi, timelockControllerAbi } from "../../../common/abi.js";
import { revertReason, sendContract } from "../../../common/chain/tx.js";
import { contractAddress } from "../../../common/deployment.js";
import { bytes32Schema } from "../../../common/schemas.js";
import { ATTESTOR_ROLE } from "../../chain/deploy.js";
import { buildProposal, EXECUTOR_ROLE, holdsTimelockRole, operationStatus, PROPOSER_ROLE, type TimelockProposal } from "../../chain/timelock.js";
import { cliContext, withChainFlags, type ChainFlags, type CliContext } from "../context.js";
import { CliError, emit, ExitCode, progress } from "../output.js";

type ProposalFlags = ChainFlags & { schedule?: boolean; execute?: boolean; salt?: string };

/**
 * `npx suanli governance grant-attestor|revoke-attestor ADDRESS`: the proposal that changes the attestor set, printed
 * ready to send (the timelock's schedule and execute calldata), scheduled from a proposer's key with --schedule, and
 * run from an executor's key with --execute once the delay has passed. On a deployment without a timelock (the
 * devnet), --execute grants or revokes at once from the admin's key. docs/contracts.md, "Onboarding an attestor".
 */
export function registerGovernance(program: Command): void {
  const governance = program.command("governance").description("proposals to the deployment's governance (its timelock): print them, schedule them, execute them after the delay");
  for (const grant of [true, false]) {
    withChainFlags(
      governance
        .command(grant ? "grant-attestor" : "revoke-attestor")
        .description(
          grant
            ? "grant ATTESTOR_ROLE to ADDRESS: prints the timelock proposal; --schedule sends it (a proposer's key), --execute runs it after the delay (an executor's key)"
            : "revoke ATTESTOR_ROLE from ADDRESS: prints the timelock proposal; --schedule sends it (a proposer's key), --execute runs it after the delay (an executor's key)",
        )
        .argument("<address>", "the attestor's address")
        .option("--schedule", "send the proposal to the timelock now (your wallet must be a proposer)")
        .option("--execute", "run the scheduled proposal (its delay must have passed; your wallet must be an executor unless anyone may execute)")
        .option("--salt <hex>", "32-byte salt that tells apart proposals of the same call (default 0x00…00; proposing a grant again after a revocation needs a new one)"),
    ).action((address: string, flags: ProposalFlags) => attestorProposal(address, flags, grant));
  }
}

async function attestorProposal(address: string, flags: ProposalFlags, grant: boolean): Promise<void> {
  const json = Boolean(flags.json);
  if (!isAddress(address)) throw new CliError(`"${address}" is not an address (expected 0x followed by 40 hex digits)`, ExitCode.usage);
  if (flags.schedule && flags.execute) throw new CliError("--schedule and --execute are two steps, the delay apart: pass one of them", ExitCode.usage);
  let salt: Hex = zeroHash;
  if (flags.salt !== undefined) {
    const parsed = bytes32Schema.safeParse(flags.salt);
    if (!parsed.success) throw new CliError(`--salt must be 0x followed by 64 hex digits, got "${flags.salt}"`, ExitCode.usage);
    salt = parsed.data;
  }
  const attestor = getAddress(address);
  const ctx = await cliContext(flags, { needWallet: Boolean(flags.schedule || flags.execute) });
  const registry = contractAddress(ctx.deployment, "registry");
  const action = grant ? "grant-attestor" : "revoke-attestor";
  const data = encodeFunctionData({ abi: providerRegistryAbi, functionName: grant ? "grantRole" : "revokeRole", args: [ATTESTOR_ROLE, attestor] });
  const standing = () => attestorStanding(ctx, registry, attestor);
  const timelock = ctx.deployment.contracts.timelock;

  if (!timelock) return withoutTimelock(ctx, flags, { action, attestor, registry, data, standing });
  const governs = await ctx.publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "hasRole", args: [zeroHash, timelock] });
  if (!governs)
    throw new CliError(`The timelock ${timelock} of the manifest does not hold the registry's admin role`, ExitCode.failure, [
      "Read the registry's getRoleMember(0x00…, 0) for the current governance.",
    ]);
  const proposal = await buildProposal(ctx.publicClient, timelock, { target: registry, value: 0n, data }, salt);
  const status = await operationStatus(ctx.publicClient, timelock, proposal.id);

  if (flags.schedule) {
    const me = ctx.account!.address;
    if (!(await holdsTimelockRole(ctx.publicClient, timelock, PROPOSER_ROLE, me))) {
      throw new CliError(`${me} is not a proposer of the timelock ${timelock}`, ExitCode.usage, [
        "Schedule with a proposer's key, or send the printed schedule calldata from it (a multisig).",
      ]);
    }
    if (status.state !== "unset") throw alreadyThere(status.state, status.readyAt, action, attestor);
    progress(json, `Scheduling ${action} ${attestor} on the timelock ${timelock} (delay ${proposal.delaySeconds} s)...`);
    const receipt = await send("schedule", () =>
      sendContract(
        { publicClient: ctx.publicClient, walletClient: ctx.walletClient! },
        {
          address: timelock,
          abi: timelockControllerAbi,
          functionName: "schedule",
          args: [proposal.target, proposal.value, proposal.data, proposal.predecessor, proposal.salt, proposal.delaySeconds],
        },
      ),
    );
    const after = await operationStatus(ctx.publicClient, timelock, proposal.id);
    emit(json, { ...describe(action, attestor, proposal, after), transaction: receipt.transactionHash }, () =>
      [
        `Scheduled ${action} ${attestor} (operation ${proposal.id}, transaction ${receipt.transactionHash}).`,
        `Ready at ${iso(after.readyAt)}; then run: npx suanli governance ${action} ${attestor} --execute${salt === zeroHash ? "" : ` --salt ${salt}`} (an executor's key)`,
      ].join("\n"),
    );
    return;
  }

  if (flags.execute) {
    if (status.state !== "ready") {
      const now = Number((await ctx.publicClient.getBlock({ blockTag: "latest" })).timestamp);
      throw notReady(status.state, status.readyAt, now, action, attestor);
    }
    const me = ctx.account!.address;
    if (!(await holdsTimelockRole(ctx.publicClient, timelock, EXECUTOR_ROLE, me))) {
      throw new CliError(`${me} is not an executor of the timelock ${timelock}`, ExitCode.usage, ["Execute with an executor's key, or send the printed execute calldata from it."]);
    }
    progress(json, `Executing ${action} ${attestor} through the timelock ${timelock}...`);
    const receipt = await send("execute", () =>
      sendContract(
        { publicClient: ctx.publicClient, walletClient: ctx.walletClient! },
        { address: timelock, abi: timelockControllerAbi, functionName: "execute", args: [proposal.target, proposal.value, proposal.data, proposal.predecessor, proposal.salt] },
      ),
    );
    const now = await standing();
    emit(json, { ...describe(action, attestor, proposal, { state: "done" }), transaction: receipt.transactionHash, ...now }, () =>
      [`Executed ${action} ${attestor} (transaction ${receipt.transactionHash}).`, describeStanding(attestor, now)].join("\n"),
    );
    return;
  }

  const now = await standing();
  emit(json, { ...describe(action, attestor, proposal, status), ...now }, () =>
    [
      `Proposal: ${action} ${attestor} (registry ${registry})`,
      `  timelock     ${timelock} (delay ${proposal.delaySeconds} s)`,
      `  operation    ${proposal.id}: ${status.state}${status.readyAt ? `, ready at ${iso(status.readyAt)}` : ""}`,
      `  call         target ${proposal.target}, value 0, data ${proposal.data}`,
      `  predecessor  ${proposal.predecessor}`,
      `  salt         ${proposal.salt}`,
      "1. From a proposer (a multisig sends this transaction as it is):",
      `  to ${timelock}`,
      `  data ${proposal.scheduleCalldata}`,
      `  or: npx suanli governance ${action} ${attestor} --schedule${salt === zeroHash ? "" : ` --salt ${salt}`} --key-file <proposer key>`,
      `2. Once the delay has passed, from an executor:`,
      `  to ${timelock}`,
      `  data ${proposal.executeCalldata}`,
      `  or: npx suanli governance ${action} ${attestor} --execute${salt === zeroHash ? "" : ` --salt ${salt}`} --key-file <executor key>`,
      describeStanding(attestor, now),
    ].join("\n"),
  );
}

/** The devnet (no timelock): the admin's key grants or revokes at once; without --execute the direct call is printed. */
async function withoutTimelock(
  ctx: CliContext,
  flags: ProposalFlags,
  o: { action: string; attestor: Address; registry: Address; data: Hex; standing: () => ReturnType<typeof attestorStanding> },
): Promise<void> {
  const json = Boolean(flags.json);
  if (flags.schedule) {
    throw new CliError("This deployment has no timelock: governance acts at once, nothing is scheduled", ExitCode.usage, [
      `Run \`npx suanli governance ${o.action} ${o.attestor} --execute\` with the admin's key.`,
    ]);
  }
  if (flags.execute) {
    progress(json, `${o.action} ${o.attestor} on the registry ${o.registry} (no timelock)...`);
    const receipt = await send(o.action, () =>
      sendContract(
        { publicClient: ctx.publicClient, walletClient: ctx.walletClient! },
        { address: o.registry, abi: providerRegistryAbi, functionName: o.action === "grant-attestor" ? "grantRole" : "revokeRole", args: [ATTESTOR_ROLE, o.attestor] },
      ),
    );
    const now = await o.standing();
    emit(json, { action: o.action, attestor: o.attestor, timelock: null, transaction: receipt.transactionHash, ...now }, () =>
      [`Done (transaction ${receipt.transactionHash}).`, describeStanding(o.attestor, now)].join("\n"),
    );
    return;
  }
  const now = await o.standing();
  emit(json, { action: o.action, attestor: o.attestor, timelock: null, call: { to: o.registry, data: o.data }, ...now }, () =>
    [`No timelock: the registry's admin sends this at once (or add --execute with its key):`, `  to ${o.registry}`, `  data ${o.data}`, describeStanding(o.attestor, now)].join(
      "\n",
    ),
  );
}

/** Whether the attestor holds the role, its stake in the current staking, and so whether it counts. */
export async function attestorStanding(ctx: Pick<CliContext, "publicClient">, registry: Address, attestor: Address) {
  const [holdsRole, isAttestor, staking] = await Promise.all([
    ctx.publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "hasRole", args: [ATTESTOR_ROLE, attestor] }),
    ctx.publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "isAttestor", args: [attestor] }),
    ctx.publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" }),
  ]);
  const staked = staking === zeroAddress ? null : await ctx.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "isStaked", args: [attestor] });
  return { holdsRole, staked, isAttestor };
}

export function describeStanding(attestor: Address, s: Awaited<ReturnType<typeof attestorStanding>>): string {
  const stake = s.staked === null ? "no staking attached" : s.staked ? "staked" : "not staked (suanli attestor stake, from its key)";
  return `Now: ${attestor} ${s.holdsRole ? "holds" : "does not hold"} ATTESTOR_ROLE, ${stake}: ${s.isAttestor ? "it counts as an attestor" : "it does not count as an attestor"}.`;
}

function describe(action: string, attestor: Address, p: TimelockProposal, status: { state: string; readyAt?: number }) {
  return {
    action,
    attestor,
    timelock: p.timelock,
    target: p.target,
    value: p.value,
    data: p.data,
    predecessor: p.predecessor,
    salt: p.salt,
    delaySeconds: p.delaySeconds,
    id: p.id,
    state: status.state,
    readyAt: status.readyAt ?? null,
    schedule: { to: p.timelock, data: p.scheduleCalldata },
    execute: { to: p.timelock, data: p.executeCalldata },
  };
}

const iso = (seconds: number | undefined) => (seconds === undefined ? "?" : new Date(seconds * 1000).toISOString());

function alreadyThere(state: string, readyAt: number | undefined, action: string, attestor: Address): CliError {
  return state === "done"
    ? new CliError(`This proposal (${action} ${attestor}) was already executed`, ExitCode.usage, ["To propose the same call again, pass a new --salt 0x<64 hex>."])
    : new CliError(`This proposal (${action} ${attestor}) is already scheduled, ${state === "ready" ? "and ready" : `ready at ${iso(readyAt)}`}`, ExitCode.usage, [
        `Run it with \`npx suanli governance ${action} ${attestor} --execute\` once ready.`,
      ]);
}

function notReady(state: string, readyAt: number | undefined, now: number, action: string, attestor: Address): CliError {
  if (state === "unset") {
    return new CliError(`This proposal (${action} ${attestor}) is not scheduled (or was cancelled)`, ExitCode.usage, [
      `Schedule it first: \`npx suanli governance ${action} ${attestor} --schedule\` with a proposer's key.`,
    ]);
  }
  if (state === "done") return alreadyThere(state, readyAt, action, attestor);
  return new CliError(
    `This proposal (${action} ${attestor}) is not ready: the timelock runs it from ${iso(readyAt)}, in ${(readyAt ?? now) - now} s of chain time`,
    ExitCode.usage,
  );
}

async function send<T>(step: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(`The ${step} transaction failed: ${revertReason(error)}`, ExitCode.failure);
  }
}
