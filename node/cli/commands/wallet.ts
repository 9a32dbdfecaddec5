import type { Command } from "commander";
import { erc20Abi, formatEther, formatUnits, getAddress, isAddress, parseEther, parseUnits } from "viem";
import { testTokenAbi } from "../../../common/abi.js";
import { contractAddress } from "../../../common/deployment.js";
import { getOwed, withdrawOwed } from "../../../sdk/actions/withdrawOwed.js";
import { NothingOwedError } from "../../../sdk/errors.js";
import { DEVNET_CHAIN_ID, devnetAccount } from "../../../common/devnet.js";
import { passkeyFileSchema } from "../../../common/software-passkey.js";
import { toPasskeyAccount } from "../../../sdk/internal/passkey-account.js";
import { toSimpleAccount } from "../../../sdk/internal/simple-account.js";
import { connectChain } from "../../chain/clients.js";
import { cliContext, withChainFlags, type ChainFlags, type CliContext } from "../context.js";
import { CliError, emit, ExitCode, progress } from "../output.js";
import { FlagProblems } from "../preflight.js";
import { readSmartAccountOwner, writeNewPasskeyFile, type SmartAccountOwner } from "../smart-account-file.js";

/** The address of the smart account `owner` owns on the context's deployment (salt 0, as `--smart-account` rents from). */
async function smartAccountAddress(ctx: CliContext, owner: SmartAccountOwner): Promise<string> {
  const { contracts } = ctx.deployment;
  const factory = owner.kind === "key" ? contracts.accountFactory : contracts.passkeyAccountFactory;
  if (!factory) {
    throw new CliError(
      `The deployment of chain ${ctx.chain.id} names no ${owner.kind === "key" ? "accountFactory" : "passkeyAccountFactory"}: no smart accounts there`,
      ExitCode.usage,
      ["Deploy with --account-abstraction (docs/aa.md)."],
    );
  }
  const account =
    owner.kind === "key"
      ? await toSimpleAccount({ client: ctx.publicClient, owner: owner.owner, factory, entryPoint: contracts.entryPoint })
      : await toPasskeyAccount({ client: ctx.publicClient, owner: owner.owner, factory, entryPoint: contracts.entryPoint });
  return account.address;
}

export function registerWallet(program: Command): void {
  const wallet = program.command("wallet").description("your wallet: address, balances, devnet faucet, passkey files for smart accounts");

  withChainFlags(
    wallet
      .command("address")
      .description("print the address of your wallet, or with --smart-account FILE the address of the smart account that file's key or passkey owns")
      .option("--smart-account <file>", "a key file or a passkey file (docs/aa.md): print its smart account's address on this deployment (deployed or not)"),
  ).action(async (flags: ChainFlags & { smartAccount?: string }) => {
    if (flags.smartAccount === undefined) {
      const ctx = await cliContext(flags, { needWallet: true });
      emit(Boolean(flags.json), { address: ctx.account!.address }, () => ctx.account!.address);
      return;
    }
    const problems = new FlagProblems();
    if (flags.key !== undefined || flags.keyFile !== undefined || flags.devnetAccount !== undefined) {
      problems.add("--smart-account and --key/--key-file/--devnet-account both name a wallet: pass one of them");
    }
    const owner = await readSmartAccountOwner(flags.smartAccount, (problem) => problems.add(problem));
    // Reports every problem at once, the file's included, before the chain is reached: past it, `owner` is set.
    const ctx = await cliContext(flags, { needWallet: false }, problems);
    const address = await smartAccountAddress(ctx, owner!);
    emit(Boolean(flags.json), { address, owner: owner!.kind === "key" ? owner!.owner.address : owner!.owner.publicKey, kind: owner!.kind }, () => address);
  });

  const passkey = wallet.command("passkey").description("software passkeys (a P-256 key in a file) that own a smart account: for CI and servers (docs/aa.md)");
  passkey
    .command("new")
    .description("create a passkey file (mode 0600, never over an existing file) for --smart-account; print its public key")
    .requiredOption("--out <file>", "where to write the passkey file")
    .option("--rp-id <host>", "the WebAuthn RP id its assertions name", "localhost")
    .option("--json", "print data as one JSON object")
    .action(async (flags: { out: string; rpId: string; json?: boolean }) => {
      const rpId = passkeyFileSchema.shape.rpId.safeParse(flags.rpId);
      if (!rpId.success) throw new CliError(`--rp-id ${rpId.error.issues[0]!.message}, got "${flags.rpId}"`, ExitCode.usage);
      const made = await writeNewPasskeyFile(flags.out, rpId.data).catch((error: NodeJS.ErrnoException) => {
        if (error.code === "EEXIST")
          throw new CliError(`${flags.out} exists: a passkey file is never overwritten (its key may own an account); pick another --out`, ExitCode.usage);
        throw new CliError(`Cannot write --out ${flags.out}: ${error.code ?? String(error)}`, ExitCode.usage);
      });
      emit(Boolean(flags.json), { file: flags.out, type: made.type, rpId: made.rpId, publicKey: made.publicKey }, () =>
        [
          `Wrote the passkey ${made.publicKey} to ${flags.out} (mode 0600).`,
          "It is a software passkey: whoever reads the file signs for its account. Keep it like a private key.",
          `Its smart account's address: npx suanli wallet address --smart-account ${flags.out}`,
        ].join("\n"),
      );
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
