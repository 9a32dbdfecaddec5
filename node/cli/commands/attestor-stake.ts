import type { Command } from "commander";
import { erc20Abi, formatUnits, parseUnits, zeroAddress, type Hex } from "viem";
import { attestorStakingAbi, providerRegistryAbi } from "../../../common/abi.js";
import { revertReason, sendContract, signPermit } from "../../../common/chain/tx.js";
import { contractAddress } from "../../../common/deployment.js";
import { cliContext, withChainFlags, type ChainFlags } from "../context.js";
import { CliError, emit, ExitCode, progress } from "../output.js";
import { attestorStanding } from "./governance.js";

const MAX_UINT96 = 2n ** 96n - 1n;

/**
 * `npx suanli attestor stake [--amount TOKENS]`: the attestor's own key stakes in the deployment's current AttestorStaking
 * (the registry's `attestorStaking()`), by EIP-2612 permit when the token has one (one transaction), else approve and
 * stake. By default it tops the active stake up to the minimum. The role itself comes from governance
 * (`npx suanli governance grant-attestor`). docs/contracts.md, "Onboarding an attestor".
 */
export function registerAttestorStake(attestor: Command): void {
  withChainFlags(
    attestor
      .command("stake")
      .description("stake in the deployment's AttestorStaking from your (the attestor's) wallet: an attestor counts once it holds ATTESTOR_ROLE and the minimum stake")
      .option("--amount <tokens>", "tokens to stake (default: what tops your active stake up to the minimum)"),
  ).action(async (flags: ChainFlags & { amount?: string }) => {
    const json = Boolean(flags.json);
    if (flags.amount !== undefined && !/^\d+(\.\d+)?$/.test(flags.amount)) {
      throw new CliError(`--amount must be a positive number of tokens, got "${flags.amount}"`, ExitCode.usage);
    }
    const ctx = await cliContext(flags, { needWallet: true });
    const me = ctx.account!.address;
    const { symbol, decimals } = ctx.deployment.token;
    const registry = contractAddress(ctx.deployment, "registry");
    const token = ctx.deployment.contracts.token;
    const staking = await ctx.publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
    if (staking === zeroAddress)
      throw new CliError("This deployment has no AttestorStaking attached: attestors count by the role alone, there is nothing to stake", ExitCode.usage);
    const [params, before] = await Promise.all([
      ctx.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "params" }),
      ctx.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "stakeOf", args: [me] }),
    ]);
    const amount = flags.amount === undefined ? (params.minStake > before.active ? params.minStake - before.active : 0n) : parseUnits(flags.amount, decimals);
    const show = (value: bigint) => `${formatUnits(value, decimals)} ${symbol}`;
    if (amount === 0n) {
      if (flags.amount !== undefined) throw new CliError("--amount must be greater than zero", ExitCode.usage);
      const standing = await attestorStanding(ctx, registry, me);
      emit(json, { attestor: me, staking, amount: 0n, active: before.active, minStake: params.minStake, ...standing }, () =>
        [`${me} already holds the minimum stake (${show(before.active)} of ${show(params.minStake)}) in ${staking}.`, ...roleHint(standing.holdsRole, me)].join("\n"),
      );
      return;
    }
    if (before.active + before.unbonding + amount > MAX_UINT96) throw new CliError(`--amount is too large: a stake must fit 96 bits`, ExitCode.usage);
    const [balance, allowance] = await Promise.all([
      ctx.publicClient.readContract({ address: token, abi: erc20Abi, functionName: "balanceOf", args: [me] }),
      ctx.publicClient.readContract({ address: token, abi: erc20Abi, functionName: "allowance", args: [me, staking] }),
    ]);
    if (balance < amount) {
      throw new CliError(`Staking ${show(amount)} needs that much in your wallet ${me}; it holds ${show(balance)}`, ExitCode.insufficientFunds, [
        `Fund it with ${symbol} first (the minimum stake is ${show(params.minStake)}).`,
      ]);
    }
    const clients = { publicClient: ctx.publicClient, walletClient: ctx.walletClient! };
    const transactions: Hex[] = [];
    const run = async (step: string, call: Parameters<typeof sendContract>[1]) => {
      try {
        transactions.push((await sendContract(clients, call as never)).transactionHash);
      } catch (error) {
        throw new CliError(`${step} failed: ${revertReason(error)}`, ExitCode.failure);
      }
    };
    progress(json, `Staking ${show(amount)} for ${me} in ${staking}...`);
    const head = await ctx.publicClient.getBlock({ blockTag: "latest" });
    const permit =
      allowance >= amount
        ? null
        : await signPermit(clients, {
            owner: ctx.account!,
            token,
            spender: staking,
            value: amount,
            deadline: head.timestamp + 600n,
            chainId: ctx.deployment.chainId,
            domain: ctx.deployment.token.permit,
          });
    if (permit) {
      await run("stakeWithPermit", { address: staking, abi: attestorStakingAbi, functionName: "stakeWithPermit", args: [amount, permit.deadline, permit.v, permit.r, permit.s] });
    } else {
      if (allowance < amount) await run("approve", { address: token, abi: erc20Abi, functionName: "approve", args: [staking, amount] });
      await run("stake", { address: staking, abi: attestorStakingAbi, functionName: "stake", args: [amount] });
    }
    const [after, standing] = await Promise.all([
      ctx.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "stakeOf", args: [me] }),
      attestorStanding(ctx, registry, me),
    ]);
    emit(json, { attestor: me, staking, amount, active: after.active, minStake: params.minStake, permit: permit !== null, transactions, ...standing }, () =>
      [
        `Staked ${show(amount)}${permit ? " by permit" : ""}: ${me} has ${show(after.active)} active in ${staking} (minimum ${show(params.minStake)}).`,
        ...roleHint(standing.holdsRole, me),
      ].join("\n"),
    );
  });
}

function roleHint(holdsRole: boolean, me: string): string[] {
  return holdsRole
    ? ["It holds ATTESTOR_ROLE: it counts as an attestor while its stake stays at the minimum."]
    : [`It does not hold ATTESTOR_ROLE yet: governance grants it (\`npx suanli governance grant-attestor ${me}\` prints the proposal).`];
}
