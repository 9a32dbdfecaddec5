import type { Address, Hex } from "viem";
import { allocate, type AllocationResult } from "../../common/matching/allocator.js";
import { depositFor, leaseTermsFor, reserveRequestFor } from "../../common/matching/handshake.js";
import { parseMatchRequest, type MatchRequest, type MatchRequestInput } from "../../common/matching/request.js";
import { suanliTypes } from "../../common/eip712.js";
import { declaredInputBytes } from "../../common/protocols/task-inputs.js";
import { taskSpecSchema, type TaskSpec } from "../../common/protocols/task-spec.js";
import { parseInput } from "../../common/validation.js";
import { checkBundleDigest } from "../internal/bundle-check.js";
import { sealingKeyProblem, sealSecret, type SealingKey } from "../../common/sealed.js";
import { AllocationError, BundlerError, InsufficientBalanceError, InsufficientGasError, NoMatchError, ProviderRequestError } from "../errors.js";
import { closeLease, openLease, readChainClock, tokenBalances, type SentTransaction } from "../internal/chain.js";
import { authorize, requireWallet, sessionFor, sessionToSign, type SuanliContext } from "../internal/context.js";
import { randomHex } from "../internal/random.js";
import { storableTaskSpec, type TaskRecord } from "../internal/store.js";
import { submitTaskParametersSchema, type SubmitTaskParameters, type SubmitTaskReturnType, type TaskAttempt } from "../types.js";

export type { SubmitTaskParameters, SubmitTaskReturnType };

/** A fresh task-liveness nonce: 32 random bytes as lowercase hex. */
export function taskLivenessNonce(): string {
  return Array.from(globalThis.crypto.getRandomValues(new Uint8Array(32)), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/**
 * Splits the caller's parameters into the match request and the task spec (both validated),
 * as submitTask does before anything else: a way to check parameters without a client. Throws
 * InvalidInputError naming every bad field.
 *
 * @example
 * import { parseSubmitParameters } from "suanli/sdk";
 * const { request, spec, autoMigrate } = parseSubmitParameters({
 *   gpuType: "A100", gpuCount: 1, duration: 600, maxPricePerGpuHour: "2.50",
 *   image: "nvcr.io/nvidia/pytorch:24.03-py3", command: ["python", "train.py"],
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
    ...(params.cpuCores !== undefined ? { cpuCores: params.cpuCores } : {}),
    ...(params.memoryGiB !== undefined ? { memoryGiB: params.memoryGiB } : {}),
    ...(params.diskGiB !== undefined ? { diskGiB: params.diskGiB } : {}),
    ...(params.minReputation !== undefined ? { minReputation: params.minReputation } : {}),
    ...(params.maxAttestFailures !== undefined ? { maxAttestFailures: params.maxAttestFailures } : {}),
    ...(params.attestedOnly !== undefined ? { attestedOnly: params.attestedOnly } : {}),
    ...(params.gpuIdentityVerified !== undefined ? { gpuIdentityVerified: params.gpuIdentityVerified } : {}),
    ...(params.colocation !== undefined ? { colocation: params.colocation } : {}),
  };
  const spec = parseInput(
    taskSpecSchema,
    {
      ...(params.bundleUrl ? { bundle: { url: params.bundleUrl, sha256: params.sha256 } } : {}),
      ...(params.image ? { image: params.image } : {}),
      ...(params.imageUrl ? { imageArchive: { url: params.imageUrl, sha256: params.bundleUrl ? params.imageSha256 : (params.imageSha256 ?? params.sha256) } } : {}),
      command: params.command,
      env: params.env,
      ...(params.ports !== undefined ? { ports: params.ports } : {}),
      ...(params.inputs !== undefined ? { inputs: params.inputs } : {}),
      ...(params.checkpointPeriodSeconds !== undefined ? { checkpoint: { periodSeconds: params.checkpointPeriodSeconds } } : {}),
      ...(params.resumeFrom !== undefined ? { resumeFrom: params.resumeFrom } : {}),
      ...(params.taskLiveness
        ? { taskLiveness: { nonce: taskLivenessNonce(), ...(typeof params.taskLiveness === "object" ? { silenceSeconds: params.taskLiveness.silenceSeconds } : {}) } }
        : {}),
    },
    "task spec",
  );
  // Inputs that declare their size: the lease's disk must hold them (matching refuses smaller offers).
  if (spec.inputs?.some((input) => input.bytes !== undefined)) requestInput.inputBytes = declaredInputBytes(spec.inputs);
  const request = parseMatchRequest(requestInput);
  return { request, requestInput, spec, autoMigrate: params.autoMigrate };
}

type OpenedLease = { attempt: TaskAttempt };

/**
 * The spec each rank of a group gets, once the allocation says how many machines (ranks) it has:
 * a resumed group starts each rank from its own checkpoint (docs/data.md "Group tasks").
 */
export type RankSpec = (rank: number, worldSize: number) => TaskSpec;

/**
 * Matches, reserves, opens the lease on-chain and hands the task spec to the provider; falls back
 * to the next candidate on refusal, timeout or a failed transaction. Used by submitTask and by
 * migrations. `spec` may be a function of the rank (RankSpec). Each lease records the checkpoint
 * its rank starts from (`resumedFrom`), every member of a group included.
 */
export async function runAttempt(ctx: SuanliContext, requestInput: MatchRequestInput, spec: TaskSpec | RankSpec): Promise<TaskAttempt> {
  const request = parseMatchRequest(requestInput);
  const { walletClient, account } = requireWallet(ctx, "submitting a task");
  const { balance, native } = await tokenBalances(ctx, account.address);
  // A smart account's gas is paid by the sponsor, or from its deposit in the EntryPoint: the bundler says when it cannot be.
  if (native === 0n && !ctx.userOps) throw new InsufficientGasError(account.address);

  ctx.progress(`Matching ${request.gpuCount}× ${request.gpuType.label} for ${request.duration}s...`);
  const first = ctx.feed.engine.match(request);
  if (!first.ok) throw new NoMatchError(first.explanation, first.explanation.summary);
  const cheapest = first.candidates.reduce((min, c) => {
    const deposit = c.parts.reduce((sum, p) => sum + BigInt(p.units) * p.pricePerUnitSecond * BigInt(request.duration), 0n);
    return deposit < min ? deposit : min;
  }, 2n ** 255n);
  if (balance < cheapest) throw new InsufficientBalanceError(cheapest, balance, ctx.deployment.token.symbol, ctx.deployment.token.decimals);

  const chainCtx = { publicClient: ctx.publicClient, walletClient, account, deployment: ctx.deployment, market: ctx.market, token: ctx.token, userOps: ctx.userOps };
  // A smart account signs no reservation: its session key does, approved on-chain before the first (one user operation).
  if (ctx.userOps) await sessionToSign(ctx, "reserve", undefined);
  // A bundler that fails one lease fails them all: the allocation stops at once and says why.
  let bundlerDown: BundlerError | undefined;
  const abort = new AbortController();
  // Each provider's sealing key, from its acceptance, by lease id: secrets are sealed to it.
  const sealingKeys = new Map<bigint, SealingKey | undefined>();
  let shortOfFunds: InsufficientBalanceError | undefined;
  // Acceptances expire in chain time (the contract checks the offer's expiry against block time);
  // a chain's clock may be minutes off this host's, so they are judged by the chain's clock.
  const chainNow = await readChainClock(ctx);

  const result: AllocationResult<OpenedLease> = await allocate<OpenedLease>(requestInput, {
    engine: ctx.feed.engine,
    renter: account.address,
    chainNow,
    signal: abort.signal,
    timeoutMs: 10_000,
    async reserve(part, req, signal) {
      const nonce = `0x${randomHex(32)}` as Hex;
      const reserveRequest = reserveRequestFor(req, part, account.address, Math.floor(Date.now() / 1000), nonce);
      // Within a session covering "reserve" its key signs, with the wallet's delegation attached.
      const session = sessionFor(ctx, "reserve", undefined);
      const typed = { domain: ctx.domain, types: suanliTypes, primaryType: "ReserveRequest", message: reserveRequest } as const;
      const signature = session ? await session.account.signTypedData(typed) : await walletClient.signTypedData({ account, ...typed });
      ctx.progress(`Reserving ${part.units} units on machine ${part.entry.machineId} of ${part.entry.provider}...`);
      const body = { chainId: ctx.chainId, request: reserveRequest, signature, ...(session ? { delegation: session.session.delegation } : {}) };
      return ctx.link.reserve({ peerId: part.entry.peerId, addrs: part.entry.addrs }, body, signal);
    },
    async open(acceptance, part, req) {
      const deposit = depositFor(req, acceptance.offer, acceptance.units);
      const { balance: now } = await tokenBalances(ctx, account.address);
      if (now < deposit) {
        shortOfFunds = new InsufficientBalanceError(deposit, now, ctx.deployment.token.symbol, ctx.deployment.token.decimals);
        abort.abort();
        throw shortOfFunds;
      }
      // The sealing key in the acceptance is the provider's current one; the one its offer
      // published may be older (providers rotate their keys), never newer: an acceptance with a
      // key that expires before the published one is a roll-back to an older key. sealSpec checks
      // the signature and the expiry of the one used.
      const published = ctx.feed.message(part.entry.key)?.sealingKey;
      const accepted = acceptance.sealingKey;
      if (published && accepted && published.publicKey.toLowerCase() !== accepted.publicKey.toLowerCase() && accepted.expiresAt < published.expiresAt) {
        throw new ProviderRequestError(`The provider ${acceptance.offer.provider} accepted with a sealing key older than the one its offer publishes; no lease was opened`, {
          metaMessages: ["A provider seals to its newest key: try another provider, or again once its offer is re-announced."],
        });
      }
      ctx.progress(`Opening the lease on-chain (deposit ${deposit} base units)...`);
      const opened = await openLease(chainCtx, acceptance.offer, acceptance.signature, leaseTermsFor(req, acceptance), deposit).catch((error: unknown) => {
        if (error instanceof BundlerError) {
          bundlerDown = error;
          abort.abort();
        }
        throw error;
      });
      sealingKeys.set(opened.leaseId, accepted ?? published);
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
        openedBlock: opened.transactions[opened.transactions.length - 1]!.blockNumber,
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
  if (bundlerDown) throw bundlerDown;
  if (!result.ok) {
    if (result.reason === "no-match") throw new NoMatchError(result.explanation, result.message);
    throw new AllocationError(result.message);
  }
  const attempts = result.leases.map((leased) => leased.lease.attempt);
  const worldSize = attempts.length;
  if (worldSize > 1) ctx.progress(`Leased ${worldSize} machines on one cluster: one lease each, ranks 0..${worldSize - 1}.`);
  let master: { addr: string; port: number } | undefined;
  for (const [rank, part] of attempts.entries()) {
    ctx.progress(`Lease ${part.leaseId} opened; sending the task to ${part.provider}...`);
    // A group's machines learn about each other: rank 0's provider answers its rendezvous address.
    const rankSpec = typeof spec === "function" ? spec(rank, worldSize) : spec;
    if (rankSpec.resumeFrom) part.resumedFrom = rankSpec.resumeFrom;
    const partSpec: TaskSpec =
      worldSize > 1 ? { ...rankSpec, group: { rank, worldSize, ...(rank > 0 && master ? { masterAddr: master.addr, masterPort: master.port } : {}) } } : rankSpec;
    try {
      const sealed = await sealSpec(partSpec, sealingKeys.get(part.leaseId), part.provider, ctx.chainId, part.leaseId);
      const answer = await sendTaskOnceConfirmed(ctx, part, sealed);
      if (rank === 0 && worldSize > 1) {
        if (!answer.master) throw new ProviderRequestError(`The provider ${part.provider} did not answer a rendezvous address for rank 0 (it does not run group jobs)`);
        master = answer.master;
      }
    } catch (error) {
      // A provider took the lease but not the task: every lease of the group still Open is closed
      // (full refund, except the notice period a lease that preempted others owes its
      // provider); those already running are cancelled by the caller's cleanup below.
      for (const other of attempts) {
        const closed = await closeLease(chainCtx, other.leaseId).catch(() => undefined);
        if (closed) other.gas.push({ step: "close (task not delivered)", gasUsed: closed.gasUsed, transaction: closed.transaction });
      }
      throw new ProviderRequestError(
        `The provider ${part.provider} did not accept the task; lease ${part.leaseId}${worldSize > 1 ? " and the rest of its group were" : " was"} closed and refunded`,
        { cause: error },
      );
    }
  }
  const attempt = attempts[0]!;
  if (worldSize > 1) attempt.group = attempts.map((member) => ({ ...member }));
  return attempt;
}

/** How long the client keeps sending a task that a provider answers LeaseNotConfirmedError. */
const CONFIRMATION_RETRY_MS = 120_000;

/**
 * Sends the task spec. A provider that follows the chain some blocks below its head
 * (chain.confirmations) answers LeaseNotConfirmedError until the block that opened the lease is
 * that deep: the spec is sent again (freshly signed) for up to CONFIRMATION_RETRY_MS.
 */
async function sendTaskOnceConfirmed(ctx: SuanliContext, part: TaskAttempt, spec: TaskSpec) {
  const deadline = Date.now() + CONFIRMATION_RETRY_MS;
  for (;;) {
    try {
      return await ctx.link.task({ peerId: part.peerId, addrs: part.addrs }, { auth: await authorize(ctx, part, "task", { spec }), spec });
    } catch (error) {
      if (!(error instanceof Error) || error.name !== "LeaseNotConfirmedError" || Date.now() > deadline) throw error;
      ctx.progress(`Lease ${part.leaseId}: the provider waits for its block to be confirmed; sending the task again...`);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }
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
  if (spec.bundle) {
    // Before anything is reserved or paid: a wrong digest would otherwise cost a lease opening.
    const check = await checkBundleDigest(spec.bundle.url, spec.bundle.sha256);
    if (!check.checked) ctx.progress(`Bundle digest not checked here (${check.reason}); the provider checks it.`);
  }
  await ctx.feed.ready();
  const attempt = await runAttempt(ctx, requestInput, spec);
  if (spec.resumeFrom) attempt.resumedFrom = spec.resumeFrom;
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

/**
 * The spec as it leaves the SDK: every `{ value, secret: true }` sealed to the provider's key
 * (HPKE, common/sealed.ts) for this lease and variable, so relays and stores see ciphertext only.
 * The key must be signed by the provider's wallet and not expired (providers rotate their keys
 * and delete old ones); otherwise a secret is never sent.
 */
export async function sealSpec(
  spec: TaskSpec,
  key: SealingKey | undefined,
  provider: Address,
  chainId: number,
  leaseId: bigint,
  nowSeconds: number = Math.floor(Date.now() / 1000),
): Promise<TaskSpec> {
  const secrets = Object.entries(spec.env).filter(([, value]) => typeof value !== "string" && "value" in value);
  if (secrets.length === 0) return spec;
  if (!key) throw new ProviderRequestError(`The provider ${provider} published no sealing key: the task's secrets were not sent`);
  const problem = await sealingKeyProblem(key, provider, chainId, nowSeconds);
  if (problem === "unsigned")
    throw new ProviderRequestError(`The sealing key offered for ${provider} is not signed by its wallet: the task's secrets were not sent`, {
      metaMessages: ["Something between you and the provider changed its key or its expiry. Submit again, through another node if you use a relay."],
    });
  if (problem === "expired")
    throw new ProviderRequestError(
      `The sealing key offered for ${provider} expired at ${new Date(key.expiresAt * 1000).toISOString()}: the task's secrets were not sent (the provider may have deleted that key)`,
      { metaMessages: ["Providers rotate their sealing keys: its next acceptance carries the current one. Submit again; check this machine's clock if it keeps happening."] },
    );
  const env = { ...spec.env };
  for (const [name, value] of secrets) env[name] = { sealed: await sealSecret(key.publicKey, (value as { value: string }).value, { chainId, leaseId, name }), secret: true };
  return { ...spec, env };
}
