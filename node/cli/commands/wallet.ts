import type { Command } from "commander";
import { erc20Abi, formatEther, formatUnits, getAddress, isAddress, parseEther, parseUnits } from "viem";
import { testTokenAbi } from "../../../common/abi.js";
import { contractAddress } from "../../../common/deployment.js";
import { getOwed, withdrawOwed } from "../../../sdk/actions/withdrawOwed.js";
import { NothingOwedError } from "../../../sdk/errors.js";
import { DEVNET_CHAIN_ID, devnetAccount } from "../../../common/devnet.js";
import { connectChain } from "../../chain/clients.js";
import { cliContext, withChainFlags, type ChainFlags } from "../context.js";
import { CliError, emit, ExitCode, progress } from "../output.js";

export function registerWallet(program: Command): void {
  const wallet = program.command("wallet").description("your wallet: address, balances, devnet faucet");

  withChainFlags(wallet.command("address").description("print the address of your wallet")).action(async (flags: ChainFlags) => {
    const ctx = await cliContext(flags, { needWallet: true });
    emit(Boolean(flags.json), { address: ctx.account!.address }, () => ctx.account!.address);
  });

  withChainFlags(wallet.command("balance").description("native and settlement-token balance of your wallet or of ADDRESS").argument("[address]")).action(
    async (address: string | undefined, flags: ChainFlags) => {
      if (address !== undefined && !isAddress(address)) {
        throw new CliError(`"${address}" is not an address (expected 0x followed by 40 hex digits)`, ExitCode.usage);
      }
      const ctx = await cliContext(flags, { needWallet: address === undefined });
      const who = address ? getAddress(address) : ctx.account!.address;
      const [native, token] = await Promise.all([
        ctx.publicClient.getBalance({ address: who }),
        ctx.publicClient.readContract({ address: ctx.deployment.contracts.token, abi: erc20Abi, functionName: "balanceOf", args: [who] }),
      ]);
      const { symbol, decimals } = ctx.deployment.token;
      emit(Boolean(flags.json), { address: who, native, token, tokenSymbol: symbol, tokenDecimals: decimals }, () =>
        [`${who}`, `  ${formatEther(native)} ETH (gas)`, `  ${formatUnits(token, decimals)} ${symbol}`].join("\n"),
      );
    },
  );

  withChainFlags(wallet.command("owed").description("what the market owes your wallet (or ADDRESS): payments the token refused to deliver").argument("[address]")).action(
    async (address: string | undefined, flags: ChainFlags) => {
      if (address !== undefined && !isAddress(address)) {
        throw new CliError(`"${address}" is not an address (expected 0x followed by 40 hex digits)`, ExitCode.usage);
      }
      const ctx = await cliContext(flags, { needWallet: address === undefined });
      const who = address ? getAddress(address) : ctx.account!.address;
      const owed = await getOwed({ publicClient: ctx.publicClient, market: contractAddress(ctx.deployment, "market"), account: undefined }, who);
      const { symbol, decimals } = ctx.deployment.token;
      emit(Boolean(flags.json), { address: who, owed, tokenSymbol: symbol, tokenDecimals: decimals }, () =>
        owed === 0n
          ? `The market owes ${who} nothing.`
          : `The market owes ${who} ${formatUnits(owed, decimals)} ${symbol}; withdraw it with \`npx suanli wallet withdraw [--to ADDRESS]\`.`,
      );
    },
  );

  withChainFlags(
    wallet
      .command("withdraw")
      .description("withdraw everything the market owes your wallet, to your wallet or to --to ADDRESS")
      .option("--to <address>", "where the tokens go (default: your wallet)"),
  ).action(async (flags: ChainFlags & { to?: string }) => {
    if (flags.to !== undefined && !isAddress(flags.to)) {
      throw new CliError(`--to "${flags.to}" is not an address (expected 0x followed by 40 hex digits)`, ExitCode.usage);
    }
    const json = Boolean(flags.json);
    const ctx = await cliContext(flags, { needWallet: true });
    const { symbol, decimals } = ctx.deployment.token;
    let result;
    try {
      result = await withdrawOwed(
        { publicClient: ctx.publicClient, walletClient: ctx.walletClient!, account: ctx.account!, market: contractAddress(ctx.deployment, "market") },
        { to: flags.to === undefined ? undefined : getAddress(flags.to) },
      );
    } catch (error) {
      if (error instanceof NothingOwedError) throw new CliError(error.shortMessage, ExitCode.usage);
      throw error;
    }
    emit(
      json,
      { address: ctx.account!.address, ...result },
      () => `Withdrew ${formatUnits(result.amount, decimals)} ${symbol} to ${result.to} (transaction ${result.transaction})`,
    );
  });

  withChainFlags(
    wallet
      .command("faucet")
      .description("devnet only: mint settlement tokens to your wallet and top up its gas")
      .option("--amount <tokens>", "tokens to mint (whole tokens, decimals allowed)", "1000"),
  ).action(async (flags: ChainFlags & { amount: string }) => {
    const json = Boolean(flags.json);
    const ctx = await cliContext(flags, { needWallet: true });
    if (ctx.chain.id !== DEVNET_CHAIN_ID) {
      throw new CliError(`The faucet exists only on the devnet (chain ${DEVNET_CHAIN_ID}); this chain is ${ctx.chain.id}`, ExitCode.usage);
    }
    let amount: bigint;
    try {
      amount = parseUnits(flags.amount, ctx.deployment.token.decimals);
    } catch {
      throw new CliError(`--amount must be a positive number of tokens, got "${flags.amount}"`, ExitCode.usage);
    }
    if (amount <= 0n) throw new CliError(`--amount must be greater than zero, got "${flags.amount}"`, ExitCode.usage);
    const me = ctx.account!.address;
    progress(json, `Minting ${flags.amount} ${ctx.deployment.token.symbol} to ${me}...`);
    const hash = await ctx
      .walletClient!.writeContract({
        address: ctx.deployment.contracts.token,
        abi: testTokenAbi,
        functionName: "faucet",
        args: [me, amount],
      })
      .catch(async (error: unknown) => {
        // A fresh key has no gas: fund it from devnet account 0 and retry once.
        const funder = await connectChain({ rpcUrl: flags.rpcUrl!, chainId: ctx.chain.id, account: devnetAccount(0) });
        const topUp = await funder.walletClient!.sendTransaction({ to: me, value: parseEther("10") });
        await funder.publicClient.waitForTransactionReceipt({ hash: topUp });
        if ((await ctx.publicClient.getBalance({ address: me })) === 0n) throw error;
        return ctx.walletClient!.writeContract({ address: ctx.deployment.contracts.token, abi: testTokenAbi, functionName: "faucet", args: [me, amount] });
      });
    const receipt = await ctx.publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new CliError(`The faucet transaction ${hash} reverted`, ExitCode.failure);
    const balance = await ctx.publicClient.readContract({ address: ctx.deployment.contracts.token, abi: erc20Abi, functionName: "balanceOf", args: [me] });
    emit(
      json,
      { address: me, minted: amount, balance, transaction: hash },
      () => `Minted ${flags.amount} ${ctx.deployment.token.symbol}; balance ${formatUnits(balance, ctx.deployment.token.decimals)} ${ctx.deployment.token.symbol}`,
    );
  });
}
