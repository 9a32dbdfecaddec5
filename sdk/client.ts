import {
  getAddress,
  createPublicClient,
  createWalletClient,
  defineChain,
  http,
  type Account,
  type Chain,
  type LocalAccount,
  type PublicClient,
  type Transport,
  type WalletClient,
} from "viem";
import type { WebAuthnAccount } from "viem/account-abstraction";
import { z } from "zod";
import { contractAddress, parseDeployment, readDeploymentBinding, bindingId, type Deployment, type DeploymentBinding } from "../common/deployment.js";
import { suanliDomain } from "../common/eip712.js";
import { SuanliError } from "../common/errors.js";
import type { MatchingOptionsInput } from "../common/matching/options.js";
import type { MatchRequestInput } from "../common/matching/request.js";
import { parseInput } from "../common/validation.js";
import { cancelTask } from "./actions/cancelTask.js";
import {
  endSession,
  revokeSession,
  startSession,
  useSession,
  type RevokeSessionParameters,
  type RevokeSessionReturnType,
  type Session,
  type StartSessionParameters,
} from "./actions/sessions.js";
import { createEndpoint, deleteEndpoint, mintEndpointToken, revokeEndpointToken, type CreateEndpointParameters, type CreateEndpointReturnType } from "./actions/endpoints.js";
import { deployEndpoint, type DeployEndpointParameters, type DeployedEndpoint } from "./actions/deployEndpoint.js";
import { extendTask, type ExtendTaskParameters, type ExtendTaskReturnType } from "./actions/extendTask.js";
import { getTaskStatus } from "./actions/getTaskStatus.js";
import { getCheckpoints, type GetCheckpointsReturnType } from "./actions/getCheckpoints.js";
import { resumeTask, type ResumeTaskParameters, type ResumeTaskReturnType } from "./actions/resumeTask.js";
import { matchOffers, type MatchOffersReturnType } from "./actions/matchOffers.js";
import { queryOffers, type OfferSummary, type QueryOffersParameters } from "./actions/queryOffers.js";
import { settleTask } from "./actions/settleTask.js";
import { streamLogs, type StreamLogsParameters, type TaskLogLine } from "./actions/streamLogs.js";
import { submitTask, type SubmitTaskParameters, type SubmitTaskReturnType } from "./actions/submitTask.js";
import { waitForTask, type WaitForTaskParameters } from "./actions/waitForTask.js";
import { getOwed, withdrawOwed, type WithdrawOwedParameters, type WithdrawOwedReturnType } from "./actions/withdrawOwed.js";
// Types only: the task I/O actions load node:fs, node:net and libp2p streams, so only the Node
// platform imports them (ClientPlatform.taskIo); a browser bundle never includes them.
import type { ExecTaskParameters, ExecTaskReturnType } from "./actions/execTask.js";
import type { ForwardPortParameters, ForwardPortReturnType } from "./actions/forwardPort.js";
import type { DownloadOutputParameters, DownloadOutputReturnType } from "./actions/downloadOutput.js";
import { TaskIoUnsupportedError } from "./errors.js";
import type { SuanliContext } from "./internal/context.js";
import type { OfferFeed } from "./internal/feed.js";
import type { ProviderLink } from "./internal/link.js";
import type { ClientPlatform, TaskIoActions } from "./internal/platform.js";
import { CheckpointCopies } from "./internal/checkpoint-copies.js";
import { TaskStore, type TaskRecord, type TaskStorage } from "./internal/store.js";
import { toPasskeyAccount } from "./internal/passkey-account.js";
import { toSimpleAccount } from "./internal/simple-account.js";
import { userOpSender } from "./internal/user-ops.js";
import type { TaskReceipt, TaskStatus } from "./types.js";

/**
 * createClient cannot build a client from its configuration: neither `rpcUrl` nor a `chain` with
 * one, the chain cannot be reached, no deployment manifest for the chain (or one for another
 * chain), or an address as `account` without `walletTransport`. A field of the wrong shape throws
 * InvalidInputError (naming the field) instead.
 *
 * @example
 * import { createClient, ClientConfigError } from "suanli/sdk";
 * try {
 *   await createClient({ rpcUrl: "http://127.0.0.1:8545" });
 * } catch (error) {
 *   if (!(error instanceof ClientConfigError)) throw error;
 *   console.error(error.shortMessage); // "Cannot reach the chain at http://127.0.0.1:8545"
 *   for (const hint of error.metaMessages ?? []) console.error(hint); // "Is the devnet running? `npm run devnet`"
 * }
 */
export class ClientConfigError extends SuanliError {
  override name = "ClientConfigError";
}

const configSchema = z.strictObject({
  /** JSON-RPC endpoint of the chain (or pass `chain`, a viem chain with an RPC URL). */
  rpcUrl: z.string().url().optional(),
  /** A viem chain: its `id` is used without asking the RPC, its first default HTTP URL when `rpcUrl` is absent. */
  chain: z.custom<Chain>((value) => typeof value === "object" && value !== null && "id" in value).optional(),
  /**
   * The renter's wallet: a viem Account (privateKeyToAccount in Node), or in a browser the address
   * of an injected wallet together with `walletTransport: custom(window.ethereum)`. Without it the
   * client is read-only.
   */
  account: z
    .union([
      z.custom<Account>((value) => typeof value === "object" && value !== null && "address" in value),
      z.string().regex(/^0x[0-9a-fA-F]{40}$/, "expected an address (0x + 40 hex digits) or a viem Account"),
    ])
    .optional(),
  /**
   * A Suanli node's HTTP API (e.g. http://127.0.0.1:8080). With it the client needs no libp2p
   * (browsers): offers come from the node, requests to providers go through its relay routes.
   */
  nodeUrl: z.string().url().optional(),
  /** A viem transport for the wallet (an injected EIP-1193 wallet: `custom(window.ethereum)`). */
  walletTransport: z.custom<Transport>((value) => typeof value === "function").optional(),
  /** libp2p multiaddrs of Suanli nodes to join through (each ending in /p2p/<peer id>); default none. Ignored with `nodeUrl`. */
  bootstrap: z.array(z.string()).default([]),
  /**
   * Node only: follow live offers over gossip (default true, for a client that stays up). False:
   * the client is never a gossip peer and pulls the offer book from its bootstrap nodes when it
   * needs offers (again once the last pull is 15 s old). Short-lived clients (the CLI, one per
   * command) use false: nodes score gossip peers per address, and dozens of short-lived peers
   * from one address would read as a Sybil attack and be refused for an hour.
   */
  gossip: z.boolean().default(true),
  /**
   * The deployment manifest (an object as written by the deploy script), or in Node the folder
   * holding `<chainId>.json`. Default (Node only): the package's `deployments/` folder.
   */
  deployment: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
  /**
   * Node only: a JSON file where the client keeps its tasks (the CLI uses one per wallet and
   * deployment). The file is bound to the deployment it was written for: another deployment's
   * file is refused (TaskStoreMismatchError). `{deployment}` in the path is replaced by the
   * deployment's id (`<chainId>-<market>-<deployment block hash>`, shortened), which keeps one
   * file per deployment; `{renter}` by the renter's address (lower case: the wallet's, or the
   * smart account's). Default: memory only.
   */
  stateFile: z.string().optional(),
  /**
   * Node only: the HTTP API of the renter's own node (on this machine, with data.enabled, e.g.
   * http://127.0.0.1:8080). Each new checkpoint record the client verifies is pinned there as it
   * appears (fetched from the provider, every block verified), and a resumed lease is told to fetch
   * it from there too: a task resumes after its provider is gone (docs/data.md "Where data lives").
   */
  pinCheckpointsOn: z.string().url().optional(),
  /** Matching engine options (ranking weights, `maxCandidates`, ...), as in common/matching/options.ts; default: its defaults. */
  matching: z.record(z.string(), z.unknown()).optional(),
  /**
   * Rent from an ERC-4337 smart account (docs/aa.md) instead of `account`: the deployment's SimpleAccount of `owner` (a
   * viem LocalAccount: privateKeyToAccount), or its PasskeyAccount when `owner` is a passkey (a viem WebAuthnAccount:
   * toWebAuthnAccount), is the renter. Every money-moving step is one user operation through the
   * bundler at `bundlerUrl` (approve + openLease together), its gas paid by the sponsor at `paymasterUrl` when given;
   * requests to providers are signed by a session key the account approves on-chain.
   */
  smartAccount: z
    .strictObject({
      owner: z.custom<LocalAccount | WebAuthnAccount>(
        (value) => typeof value === "object" && value !== null && "type" in value && (value.type === "local" || value.type === "webAuthn"),
        "expected a viem LocalAccount (privateKeyToAccount) or WebAuthnAccount (toWebAuthnAccount) as the smart account's owner",
      ),
      bundlerUrl: z.string().url(),
      paymasterUrl: z.string().url().optional(),
      /** Which of the owner's accounts (the factory's salt; default 0). */
      salt: z.bigint().nonnegative().optional(),
    })
    .optional(),
  /** Progress lines (matching, reserving, opening...) for people; silent by default. */
  onProgress: z.custom<(line: string) => void>((value) => typeof value === "function").optional(),
});
/**
 * What `createClient` takes. Give `rpcUrl` (or `chain`); add `account` to submit and pay, and
 * either `bootstrap` (Node: libp2p) or `nodeUrl` (browsers: a node's HTTP API). Unknown keys are
 * rejected with InvalidInputError.
 *
 * @example
 * import { createClient, type CreateClientParameters } from "suanli/sdk";
 * import { privateKeyToAccount } from "viem/accounts";
 * const parameters: CreateClientParameters = {
 *   rpcUrl: "http://127.0.0.1:8545",
 *   account: privateKeyToAccount(process.env.SUANLI_KEY as `0x${string}`),
 *   bootstrap: ["/ip4/127.0.0.1/tcp/4001/p2p/12D3KooW..."],
 *   deployment: "./deployments",
 *   stateFile: "./.suanli/tasks.json",
 *   onProgress: (line) => console.log(line),
 * };
 * const client = await createClient(parameters);
 */
export type CreateClientParameters = z.input<typeof configSchema>;

/**
 * The Suanli client: offers, tasks and their leases, paid from the client's wallet. Each method
 * is the action of the same purpose (`status` is getTaskStatus, `wait` is waitForTask...) bound
 * to this client. Call `close` when done: it stops the client's libp2p node.
 *
 * @example
 * import { createClient, type SuanliClient } from "suanli/sdk";
 * const client: SuanliClient = await createClient({ rpcUrl: "http://127.0.0.1:8545", account, bootstrap });
 * try {
 *   console.log(client.chainId, client.address, client.deployment.token.symbol);
 *   const offers = await client.queryOffers({ gpuType: "A100" });
 *   const { taskId } = await client.submitTask({ gpuType: "A100", gpuCount: 1, duration: 600,
 *     maxPricePerGpuHour: "2.50", image: "nvcr.io/nvidia/pytorch:24.03-py3", command: "python train.py" });
 *   const receipt = await client.wait(taskId);
 *   console.log(offers.length, receipt.totalCost);
 * } finally {
 *   await client.close();
 * }
 */
export type SuanliClient = {
  /** The chain id the client's RPC serves. */
  readonly chainId: number;
  /** The deployment manifest in use: contract addresses and the settlement token (`token.symbol`, `token.decimals`). */
  readonly deployment: Deployment;
  /** The wallet address, when the client has one. */
  readonly address: `0x${string}` | undefined;
  /** Live offers, cheapest first (queryOffers). */
  queryOffers(parameters?: QueryOffersParameters): Promise<OfferSummary[]>;
  /** A dry run of matching: candidates, or why nothing fits (matchOffers). */
  match(request: MatchRequestInput): Promise<MatchOffersReturnType>;
  /** Matches, opens a lease and hands the task to a provider (submitTask). */
  submitTask(parameters: SubmitTaskParameters): Promise<SubmitTaskReturnType>;
  /** The task on its provider and its lease on-chain (getTaskStatus). */
  status(taskId: string): Promise<TaskStatus>;
  /** The task's checkpoint records, verified against its lease's provider, newest first (getCheckpoints). */
  checkpoints(taskId: string): Promise<GetCheckpointsReturnType>;
  /** Re-submits a stopped task from its newest verified checkpoint, on any provider (resumeTask). */
  resume(taskId: string, parameters?: ResumeTaskParameters): Promise<ResumeTaskReturnType>;
  /** The task's log lines as an async iterator (streamLogs). */
  logs(taskId: string, parameters?: StreamLogsParameters): AsyncGenerator<TaskLogLine>;
  /** Waits until the task is over and returns its receipt (waitForTask). */
  wait(taskId: string, parameters?: WaitForTaskParameters): Promise<TaskReceipt>;
  /** Stops the task and closes its lease, refunding the unused deposit (cancelTask). */
  cancel(taskId: string): Promise<TaskReceipt>;
  /** Adds time to the task's lease at its price (extendTask). */
  extend(taskId: string, parameters: ExtendTaskParameters): Promise<ExtendTaskReturnType>;
  /** Makes sure the lease is over and returns the receipt (settleTask). */
  settle(taskId: string): Promise<TaskReceipt>;
  /**
   * Downloads the task's output folder and verifies it against the signed completion report:
   * into `dir` over libp2p (downloadOutput), or into memory through the node's relay when the
   * client has `nodeUrl` (downloadOutputRelay; browsers).
   */
  downloadOutput(taskId: string, parameters?: DownloadOutputParameters): Promise<DownloadOutputReturnType>;
  /** Runs a command inside the running task's environment and returns its exit code and output (execTask). */
  exec(taskId: string, command: string | string[], parameters?: ExecTaskParameters): Promise<ExecTaskReturnType>;
  /** Forwards a local port to a port the running task declared (forwardPort). */
  forward(taskId: string, parameters: ForwardPortParameters): Promise<ForwardPortReturnType>;
  /** What the market owes `address` (default: the wallet) from payments the token refused (getOwed). */
  owed(address?: `0x${string}`): Promise<bigint>;
  /** Withdraws everything the market owes the wallet to `to` (default: the wallet) (withdrawOwed). */
  withdrawOwed(parameters?: WithdrawOwedParameters): Promise<WithdrawOwedReturnType>;
  /** Generates a session key and has the wallet sign one delegation to it; it then signs the requests the session covers (startSession). */
  startSession(parameters?: StartSessionParameters): Promise<Session>;
  /** Uses a session started earlier, from what startSession returned (useSession). */
  useSession(saved: unknown): Promise<Session>;
  /** The current session, if any. */
  readonly session: Session | undefined;
  /** Signs with the wallet again; the delegation stays valid until it expires (endSession). */
  endSession(): void;
  /** Revokes the current session (or `hash`, or `all`) on-chain (revokeSession). */
  revokeSession(parameters?: RevokeSessionParameters): Promise<RevokeSessionReturnType>;
  /** Serves a port of the running task through a gateway at a public URL; the wallet signs the record and the delegation (createEndpoint). */
  createEndpoint(parameters: CreateEndpointParameters): Promise<CreateEndpointReturnType>;
  /** A bearer token for an endpoint, signed by the wallet (mintEndpointToken). */
  mintEndpointToken(parameters: { endpointId: string; ttlSeconds?: number }): Promise<{ token: string; nonce: string; expiresAt: number }>;
  /** Revokes one token of an endpoint at its gateway (revokeEndpointToken). */
  revokeEndpointToken(parameters: { gatewayUrl: string; endpointId: string; token?: string; nonce?: string }): Promise<void>;
  /** Serves a program from replicas rented and released by load, within a spend cap per hour (deployEndpoint). */
  deployEndpoint(parameters: DeployEndpointParameters): Promise<DeployedEndpoint>;
  /** Removes an endpoint from its gateway (deleteEndpoint). */
  deleteEndpoint(parameters: { gatewayUrl: string; endpointId: string }): Promise<void>;
  /** Tasks this client knows (submitted here, or kept in its state file), oldest first. */
  tasks(): Promise<TaskRecord[]>;
  /** Stops the client's offer feed (and libp2p node); the tasks keep running. */
  close(): Promise<void>;
};

function stateFileStorage(platform: ClientPlatform, file: string, binding: DeploymentBinding): TaskStorage {
  if (!platform.fileStorage) throw new ClientConfigError("`stateFile` needs Node (a file): in a browser, leave it out.");
  return platform.fileStorage(file, binding);
}

/** The task I/O actions of the platform, or TaskIoUnsupportedError at once (a browser). */
async function taskIo(platform: ClientPlatform, action: string): Promise<TaskIoActions> {
  if (!platform.taskIo) {
    throw new TaskIoUnsupportedError(`${action} needs the Node SDK (suanli/sdk): a browser cannot write files, listen on local ports or open libp2p streams`, {
      metaMessages: ["Run it with the Node SDK or the CLI (`npx suanli output`, `npx suanli exec`, `npx suanli forward`) on the wallet's tasks."],
    });
  }
  return platform.taskIo();
}

async function resolveDeployment(value: CreateClientParameters["deployment"], chainId: number, platform: ClientPlatform): Promise<Deployment> {
  if (value && typeof value === "object") return parseDeployment(value, "deployment");
  if (!platform.readDeployment) throw deploymentObjectNeeded();
  return platform.readDeployment(value, chainId);
}

/**
 * The smart account of `smartAccount`'s owner and its user-operation sender: a key's SimpleAccount on the deployment's
 * `accountFactory`, a passkey's PasskeyAccount on its `passkeyAccountFactory` (docs/aa.md "A passkey owner").
 */
async function smartAccountSender(publicClient: PublicClient<Transport, Chain>, deployment: Deployment, options: NonNullable<z.output<typeof configSchema>["smartAccount"]>) {
  const { contracts } = deployment;
  let account;
  if (options.owner.type === "webAuthn") {
    if (!contracts.passkeyAccountFactory) {
      throw new ClientConfigError(
        `The deployment of chain ${deployment.chainId} names no passkey account factory (contracts.passkeyAccountFactory): a passkey cannot own an account there`,
        {
          metaMessages: ['Deploy with `--account-abstraction` (docs/aa.md "A passkey owner"), or pass a LocalAccount as `smartAccount.owner`.'],
        },
      );
    }
    account = await toPasskeyAccount({
      client: publicClient,
      owner: options.owner,
      factory: contracts.passkeyAccountFactory,
      entryPoint: contracts.entryPoint,
      salt: options.salt,
    });
  } else {
    if (!contracts.accountFactory) {
      throw new ClientConfigError(`The deployment of chain ${deployment.chainId} names no smart account factory (contracts.accountFactory)`, {
        metaMessages: ["Deploy with `--account-abstraction` (docs/aa.md), or rent with `account`."],
      });
    }
    account = await toSimpleAccount({ client: publicClient, owner: options.owner, factory: contracts.accountFactory, entryPoint: contracts.entryPoint, salt: options.salt });
  }
  return userOpSender({ publicClient, account, bundlerUrl: options.bundlerUrl, paymasterUrl: options.paymasterUrl });
}

function deploymentObjectNeeded(): ClientConfigError {
  return new ClientConfigError("In a browser, pass the deployment manifest object as `deployment`.", {
    metaMessages: ["A node serves it: fetch your node's deployments/<chainId>.json, or import it in your bundle."],
  });
}

/**
 * Builds a client on a platform: the Node entry (sdk/index.ts) gives libp2p, files and the
 * deployments folder; the browser entry (sdk/browser.ts) gives none of them.
 */
export async function createClientWith(platform: ClientPlatform, parameters: CreateClientParameters): Promise<SuanliClient> {
  const config = parseInput(configSchema, parameters, "client configuration", ["createClient({ rpcUrl, account, bootstrap, deployment }): see sdk/README in docs/sdk.md."]);
  // Refused before anything reaches the chain: what a browser cannot do without a manifest object or `nodeUrl`.
  if (!platform.readDeployment && !(config.deployment && typeof config.deployment === "object")) throw deploymentObjectNeeded();
  if (!config.nodeUrl && !platform.startP2p) {
    throw new ClientConfigError("In a browser, pass `nodeUrl`: a Suanli node's HTTP API (libp2p over TCP exists in Node only).");
  }
  if (config.pinCheckpointsOn && !platform.dataActions) throw new ClientConfigError("`pinCheckpointsOn` needs Node: a node's data routes refuse browsers.");
  const rpcUrl = config.rpcUrl ?? config.chain?.rpcUrls.default.http[0];
  if (!rpcUrl) throw new ClientConfigError("Pass `rpcUrl` (or a viem `chain` with an RPC URL).");
  const probe = createPublicClient({ transport: http(rpcUrl, { retryCount: 1 }) });
  let chainId: number;
  try {
    chainId = config.chain?.id ?? (await probe.getChainId());
  } catch (error) {
    throw new ClientConfigError(`Cannot reach the chain at ${rpcUrl}`, { cause: error, metaMessages: ["Is the devnet running? `npm run devnet`"] });
  }
  const chain =
    config.chain ??
    defineChain({ id: chainId, name: `chain ${chainId}`, nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } });
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 250 }) as PublicClient<Transport, Chain>;
  if (typeof config.account === "string" && !config.walletTransport) {
    throw new ClientConfigError("An address as `account` needs `walletTransport`: the wallet that signs for it (custom(window.ethereum)).");
  }
  if (config.account && config.smartAccount)
    throw new ClientConfigError("Pass `account` or `smartAccount`, not both: the smart account is the renter, its owner signs its operations.");
  const deployment = await resolveDeployment(config.deployment, chainId, platform);
  const userOps = config.smartAccount ? await smartAccountSender(publicClient, deployment, config.smartAccount) : undefined;
  const account: Account | undefined = userOps ? userOps.account : typeof config.account === "string" ? { address: getAddress(config.account), type: "json-rpc" } : config.account;
  const walletClient = account
    ? (createWalletClient({ chain, account, transport: config.walletTransport ?? http(rpcUrl), pollingInterval: 250 }) as WalletClient<Transport, Chain, Account>)
    : undefined;
  const market = contractAddress(deployment, "market");
  const registry = contractAddress(deployment, "registry");
  // Checked before anything else happens: a manifest of an earlier chain fails here, clearly.
  const binding = await readDeploymentBinding(publicClient, deployment);

  let feed: OfferFeed;
  let link: ProviderLink;
  if (config.nodeUrl) {
    const { startHttpFeed, httpLink } = await import("./internal/http.js");
    feed = await startHttpFeed({ nodeUrl: config.nodeUrl, matching: config.matching as MatchingOptionsInput | undefined });
    link = httpLink(config.nodeUrl);
  } else {
    ({ feed, link } = await platform.startP2p!({
      chainId,
      market,
      registry,
      publicClient,
      bootstrap: config.bootstrap,
      gossip: config.gossip,
      matching: config.matching as MatchingOptionsInput | undefined,
    }));
  }
  const tasks = new TaskStore(
    config.stateFile
      ? stateFileStorage(platform, config.stateFile.replaceAll("{deployment}", bindingId(binding)).replaceAll("{renter}", account?.address.toLowerCase() ?? "no-wallet"), binding)
      : undefined,
  );
  const progressLine = config.onProgress ?? (() => {});
  const ctx: SuanliContext = {
    chainId,
    deployment,
    domain: suanliDomain(chainId, market),
    market,
    registry,
    token: deployment.contracts.token,
    publicClient,
    walletClient,
    account,
    feed,
    link,
    tasks,
    progress: progressLine,
    ...(userOps ? { userOps } : {}),
    ...(config.pinCheckpointsOn ? { checkpointCopies: new CheckpointCopies(config.pinCheckpointsOn, await platform.dataActions!(), tasks, progressLine) } : {}),
  };

  return {
    chainId,
    deployment,
    address: account?.address,
    queryOffers: (p) => queryOffers(ctx, p),
    match: (request) => matchOffers(ctx, request),
    submitTask: (p) => submitTask(ctx, p),
    status: (taskId) => getTaskStatus(ctx, taskId),
    checkpoints: (taskId) => getCheckpoints(ctx, taskId),
    resume: (taskId, p) => resumeTask(ctx, taskId, p),
    logs: (taskId, p) => streamLogs(ctx, taskId, p),
    wait: (taskId, p) => waitForTask(ctx, taskId, p),
    cancel: (taskId) => cancelTask(ctx, taskId),
    extend: (taskId, p) => extendTask(ctx, taskId, p),
    settle: (taskId) => settleTask(ctx, taskId),
    downloadOutput: async (taskId, p) => {
      // Without libp2p (nodeUrl: browsers), the output comes through the node's relay into memory.
      if (ctx.link.relayOutput && !ctx.link.openStream) return (await import("./actions/downloadOutputRelay.js")).downloadOutputRelay(ctx, taskId, p);
      return (await taskIo(platform, "downloadOutput")).downloadOutput(ctx, taskId, p);
    },
    exec: async (taskId, command, p) => (await taskIo(platform, "exec")).execTask(ctx, taskId, command, p),
    forward: async (taskId, p) => (await taskIo(platform, "forward")).forwardPort(ctx, taskId, p),
    owed: (address) => getOwed(ctx, address),
    withdrawOwed: (p) => withdrawOwed(ctx, p),
    startSession: (p) => startSession(ctx, p),
    useSession: (saved) => useSession(ctx, saved),
    get session() {
      return ctx.session?.session;
    },
    endSession: () => endSession(ctx),
    revokeSession: (p) => revokeSession(ctx, p),
    createEndpoint: (p) => createEndpoint(ctx, p),
    mintEndpointToken: (p) => mintEndpointToken(ctx, p),
    revokeEndpointToken: (p) => revokeEndpointToken(ctx, p),
    deleteEndpoint: (p) => deleteEndpoint(ctx, p),
    deployEndpoint: (p) => deployEndpoint(ctx, p),
    tasks: () => ctx.tasks.list(),
    close: () => feed.close(),
  };
}
