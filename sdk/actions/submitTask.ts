import type { Hex } from "viem";
import { allocate, type AllocationResult } from "../../common/matching/allocator.js";
import { depositFor, leaseTermsFor, reserveRequestFor } from "../../common/matching/handshake.js";
import { parseMatchRequest, type MatchRequest, type MatchRequestInput } from "../../common/matching/request.js";
import { suanliTypes } from "../../common/eip712.js";
import { taskSpecSchema, type TaskSpec } from "../../common/protocols/task-spec.js";
import { parseInput } from "../../common/validation.js";
import { AllocationError, InsufficientBalanceError, InsufficientGasError, NoMatchError, ProviderRequestError } from "../errors.js";
import { closeLease, openLease, tokenBalances, type SentTransaction } from "../internal/chain.js";
import { authorize, requireWallet, type SuanliContext } from "../internal/context.js";
import { randomHex } from "../internal/random.js";
import { storableTaskSpec, type TaskRecord } from "../internal/store.js";
import { submitTaskParametersSchema, type SubmitTaskParameters, type SubmitTaskReturnType, type TaskAttempt } from "../types.js";

export type { SubmitTaskParameters, SubmitTaskReturnType };

/**
 * Splits the caller's parameters into the match request and the task spec (both validated),
 * as submitTask does before anything else: a way to check parameters without a client. Throws
 * InvalidInputError naming every bad field.
 *
 * @example
 * import { parseSubmitParameters } from "suanli/sdk";
 * const { request, spec, autoMigrate } = parseSubmitParameters({
 *   gpuType: "A100", gpuCount: 1, duration: 600, maxPricePerGpuHour: "2.50",
 *   imageUrl: "nvcr.io/nvidia/pytorch:24.03-py3", command: ["python", "train.py"],
 * });
 * console.log(request.maxPricePerUnitSecond, spec.image, autoMigrate); // 694n, "nvcr.io/nvidia/pytorch:24.03-py3", false
 */
export function parseSubmitParameters(parameters: SubmitTaskParameters): { request: MatchRequest; requestInput: MatchRequestInput; spec: TaskSpec; autoMigrate: boolean } {
  const params = parseInput(submitTaskParametersSchema, parameters, "task parameters");
  const requestInput: MatchRequestInput = {
    gpuType: params.gpuType,
    gpuCount: params.gpuCount,
    duration: params.duration,
    mode: params.interruptible ? "interruptible" : "on-demand",
    ...(params.maxPricePerGpuHour !== undefined ? { maxPricePerGpuHour: params.maxPricePerGpuHour } : {}),
    ...(params.bidPerGpuHour !== undefined ? { bidPerGpuHour: params.bidPerGpuHour } : {}),
    ...(params.region !== undefined ? { region: params.region } : {}),
    ...(params.minVramMiB !== undefined ? { minVramMiB: params.minVramMiB } : {}),
    ...(params.minReputation !== undefined ? { minReputation: params.minReputation } : {}),
    ...(params.attestedOnly !== undefined ? { attestedOnly: params.attestedOnly } : {}),
    ...(params.colocation !== undefined ? { colocation: params.colocation } : {}),
  };
  const request = parseMatchRequest(requestInput);
  const spec = parseInput(
    taskSpecSchema,
    {
      ...(params.bundleUrl ? { bundle: { url: params.bundleUrl, sha256: params.sha256 } } : {}),
      ...(params.imageUrl ? { image: params.imageUrl } : {}),
      command: params.command,
      env: params.env,
    },
    "task spec",
  );
  return { request, requestInput, spec, autoMigrate: params.autoMigrate };
}

type OpenedLease = { attempt: TaskAttempt };

/**
 * Matches, reserves, opens the lease on-chain and hands the task spec to the provider; falls back
 * to the next candidate on refusal, timeout or a failed transaction. Used by submitTask and by
 * migrations.
 */
export async function runAttempt(ctx: SuanliContext, requestInput: MatchRequestInput, spec: TaskSpec): Promise<TaskAttempt> {
  const request = parseMatchRequest(requestInput);
  const { walletClient, account } = requireWallet(ctx, "submitting a task");
  const { balance, native } = await tokenBalances(ctx, account.address);
  if (native === 0n) throw new InsufficientGasError(account.address);

  ctx.progress(`Matching ${request.gpuCount}× ${request.gpuType.label} for ${request.duration}s...`);
  const first = ctx.feed.engine.match(request);
  if (!first.ok) throw new NoMatchError(first.explanation, first.explanation.summary);
  const cheapest = first.candidates.reduce((min, c) => {
    const deposit = c.parts.reduce((sum, p) => sum + BigInt(p.units) * p.pricePerUnitSecond * BigInt(request.duration), 0n);
    return deposit < min ? deposit : min;
  }, 2n ** 255n);
  if (balance < cheapest) throw new InsufficientBalanceError(cheapest, balance, ctx.deployment.token.symbol, ctx.deployment.token.decimals);

  const chainCtx = { publicClient: ctx.publicClient, walletClient, account, deployment: ctx.deployment, market: ctx.market, token: ctx.token };
  const abort = new AbortController();
  let shortOfFunds: InsufficientBalanceError | undefined;

  const result: AllocationResult<OpenedLease> = await allocate<OpenedLease>(requestInput, {
    engine: ctx.feed.engine,
    renter: account.address,
    signal: abort.signal,
    timeoutMs: 10_000,
    async reserve(part, req, signal) {
      const nonce = `0x${randomHex(32)}` as Hex;
      const reserveRequest = reserveRequestFor(req, part, account.address, Math.floor(Date.now() / 1000), nonce);
      const signature = await walletClient.signTypedData({ account, domain: ctx.domain, types: suanliTypes, primaryType: "ReserveRequest", message: reserveRequest });
      ctx.progress(`Reserving ${part.units} units on machine ${part.entry.machineId} of ${part.entry.provider}...`);
      return ctx.link.reserve({ peerId: part.entry.peerId, addrs: part.entry.addrs }, { chainId: ctx.chainId, request: reserveRequest, signature }, signal);
    },
    async open(acceptance, part, req) {
      const deposit = depositFor(req, acceptance.offer, acceptance.units);
      const { balance: now } = await tokenBalances(ctx, account.address);
      if (now < deposit) {
        shortOfFunds = new InsufficientBalanceError(deposit, now, ctx.deployment.token.symbol, ctx.deployment.token.decimals);
        abort.abort();
        throw shortOfFunds;
      }
      ctx.progress(`Opening the lease on-chain (deposit ${deposit} base units)...`);
      const opened = await openLease(chainCtx, acceptance.offer, acceptance.signature, leaseTermsFor(req, acceptance), deposit);
      const attempt: TaskAttempt = {
        leaseId: opened.leaseId,
        provider: acceptance.offer.provider,
        peerId: part.entry.peerId,
        addrs: [...part.entry.addrs],
        machineId: acceptance.offer.machineId,
        model: part.entry.machine.model,
        units: acceptance.units,
        pricePerUnitSecond: req.interruptible ? req.bidPerUnitSecond! : acceptance.offer.pricePerUnitSecond,
        deposit,
        interruptible: req.interruptible,
        openedBlock: opened.transactions[opened.transactions.length - 1].blockNumber,
        openedAt: Math.floor(Date.now() / 1000),
        gas: opened.transactions.map(({ step, gasUsed, transaction }: SentTransaction) => ({ step, gasUsed, transaction })),
      };
      return { attempt };
    },
    async close(lease) {
      await closeLease(chainCtx, lease.attempt.leaseId);
    },
  });
  if (shortOfFunds) throw shortOfFunds;
  if (!result.ok) {
    if (result.reason === "no-match") throw new NoMatchError(result.explanation, result.message);
    throw new AllocationError(result.message);
  }
  if (result.leases.length !== 1) {
    // A group spans several machines: one lease per machine, each gets the same spec.
    ctx.progress(`Leased ${result.leases.length} machines on one cluster.`);
  }
  const attempt = result.leases[0].lease.attempt;
  for (const leased of result.leases) {
    const part = leased.lease.attempt;
    ctx.progress(`Lease ${part.leaseId} opened; sending the task to ${part.provider}...`);
    try {
      await ctx.link.task({ peerId: part.peerId, addrs: part.addrs }, { auth: await authorize(ctx, part, "task", { spec }), spec });
    } catch (error) {
      // The provider took the lease but not the task: close it (full refund while Open, except the notice
      // period a lease that preempted others owes its provider).
      const closed = await closeLease(chainCtx, part.leaseId).catch(() => undefined);
      if (closed) part.gas.push({ step: "close (task not delivered)", gasUsed: closed.gasUsed, transaction: closed.transaction });
      throw new ProviderRequestError(`The provider ${part.provider} did not accept the task; lease ${part.leaseId} was closed and refunded`, { cause: error });
    }
  }
  return attempt;
}

/**
 * Runs a task on a rented GPU: matches the request against the live offers, reserves units with
 * the best provider (falling back to the next), opens the lease on-chain with a deposit from the
 * client's wallet, and sends the task to the provider. Returns once the provider accepted it.
 * Throws NoMatchError (with the explanation) when nothing fits, InsufficientBalanceError before
 * any funds move, InvalidInputError naming a bad field.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * import { privateKeyToAccount } from "viem/accounts";
 * const client = await createClient({ rpcUrl: "http://127.0.0.1:8545", account: privateKeyToAccount(key), bootstrap });
 * const { taskId, leaseId } = await client.submitTask({
 *   gpuType: "A100", gpuCount: 1, duration: 600, maxPricePerGpuHour: "2.50",
 *   bundleUrl: "https://example.com/job.tar.gz", sha256: "9f86d0...", command: "python train.py",
 * });
 */
export async function submitTask(ctx: SuanliContext, parameters: SubmitTaskParameters): Promise<SubmitTaskReturnType> {
  const { requestInput, spec, autoMigrate } = parseSubmitParameters(parameters);
  requireWallet(ctx, "submitting a task");
  await ctx.feed.ready();
  const attempt = await runAttempt(ctx, requestInput, spec);
  const record: TaskRecord = {
    taskId: `task-${attempt.leaseId}-${randomHex(3)}`,
    createdAt: Date.now(),
    request: JSON.parse(JSON.stringify(requestInput)) as Record<string, unknown>,
    spec: storableTaskSpec(spec),
    autoMigrate,
    attempts: [attempt],
  };
  await ctx.tasks.put(record, spec);
  return { taskId: record.taskId, leaseId: attempt.leaseId, provider: attempt.provider, status: "submitted", attempt };
}
