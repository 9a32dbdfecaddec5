/**
 * The chaos harness: faults on purpose against real processes, and the money check every fault
 * test ends with.
 *
 * - `RpcProxy`: a TCP proxy on 127.0.0.1 in front of the chain's JSON-RPC server. Point a node's
 *   `chain.rpcUrl` at it and the test can take the chain away (refuse or reset connections), slow
 *   it down, or cut what is in flight, then bring it back.
 * - `checkLedger`: every lease's money against the contract's rules, the market's token balance
 *   against what it owes, each watched wallet's balance against what the rules paid it, no lease
 *   stuck past its end, no unit leased twice. A held lease's last fault window of pay (issue #34)
 *   counts as escrowed for its provider until the releasing claim, and as stuck if still held past
 *   the window and the grace.
 */
import http from "node:http";
import net from "node:net";
import { decodeFunctionData, parseEventLogs, parseTransaction, type Address, type Hex } from "viem";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { completionHeldUntil, heldPay, readLease, type LeaseView } from "../../common/chain/market.js";
import type { Devnet } from "./devnet.js";
import { waitFor } from "./wait.js";

/** What the proxy does with connections: pass them, drop new ones at once (refuse), reset them, or delay every chunk. */
export type ProxyMode = { kind: "pass" } | { kind: "refuse" } | { kind: "reset" } | { kind: "delay"; ms: number } | RpcFaultMode;

/**
 * Faults a broken RPC node answers with, HTTP request by HTTP request (connections are kept):
 * - `http-status`: an HTTP error status (500, 502, 503...) with an HTML body, as a load balancer does;
 * - `rpc-error`: HTTP 200 with a JSON-RPC error object for every call in the request;
 * - `garbage`: HTTP 200 with a body that is not JSON;
 * - `stale`: a node lagging at block `block`: `eth_blockNumber` answers it, calls at "latest" or
 *   "pending" are read at it, `eth_getLogs` stops at it and a receipt mined after it is not
 *   known yet (null); everything else, `eth_sendRawTransaction` included, passes to the chain.
 */
export type RpcFaultMode =
  { kind: "http-status"; status: number } | { kind: "rpc-error"; code?: number; message?: string } | { kind: "garbage" } | { kind: "stale"; block: bigint };

const RPC_FAULTS = new Set<ProxyMode["kind"]>(["http-status", "rpc-error", "garbage", "stale"]);
const isRpcFault = (mode: ProxyMode): mode is RpcFaultMode => RPC_FAULTS.has(mode.kind);

type JsonRpcCall = { jsonrpc?: string; id?: unknown; method?: unknown; params?: unknown };
/** Methods whose last parameter is a block tag a lagging node reads at its own head. */
const BLOCK_TAG_METHODS = new Set(["eth_call", "eth_getBalance", "eth_getTransactionCount", "eth_getCode", "eth_getStorageAt", "eth_estimateGas"]);

/** A transaction a client sent through the proxy, decoded against the market's ABI. */
export type SeenTransaction = { functionName: string; args: readonly unknown[] };

/**
 * Called with each market transaction a client sends, after it was forwarded to the chain (so it
 * lands, with automining, whatever the client does next): the moment to SIGKILL a node "during" it.
 */
export type TransactionListener = (tx: SeenTransaction) => void;

const RAW_TX = /"method":"eth_sendRawTransaction","params":\["(0x[0-9a-fA-F]+)"\]/g;
/** How much of a connection's request stream is kept to find a transaction split across chunks. */
const SCAN_BYTES = 64 * 1024;

function decodeRaw(raw: Hex): SeenTransaction | undefined {
  try {
    const tx = parseTransaction(raw);
    if (!tx.data) return undefined;
    const call = decodeFunctionData({ abi: leaseMarketAbi, data: tx.data });
    return { functionName: call.functionName, args: call.args ?? [] };
  } catch {
    return undefined; // not a market call (a token approval, a registry call)
  }
}

export class RpcProxy {
  private mode: ProxyMode = { kind: "pass" };
  private readonly listeners = new Set<TransactionListener>();
  private readonly sockets = new Set<net.Socket>();
  /** Answers HTTP requests itself while an RPC fault mode is set (see RpcFaultMode). */
  private readonly faults: http.Server;
  /** Connections accepted and dropped while the chain was away (what the fault cost the clients). */
  dropped = 0;
  /** JSON-RPC calls answered with a fault (an error, garbage or a stale view), by method. */
  readonly faulted = new Map<string, number>();

  private constructor(
    private readonly server: net.Server,
    readonly url: string,
    private readonly upstream: string,
  ) {
    this.faults = http.createServer((req, res) => void this.answer(req, res).catch(() => res.destroy()));
    this.faults.keepAliveTimeout = 1_000;
  }

  /** Listens on 127.0.0.1 (a random port) in front of `target` (an http:// URL on 127.0.0.1); at most `maxConnections` at once. */
  static async start(target: string, options: { maxConnections?: number } = {}): Promise<RpcProxy> {
    const upstream = new URL(target);
    if (upstream.hostname !== "127.0.0.1") throw new Error(`the chaos proxy only fronts 127.0.0.1, got ${upstream.hostname}`);
    const server = net.createServer();
    server.maxConnections = options.maxConnections ?? 256;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const { port } = server.address() as net.AddressInfo;
    const proxy = new RpcProxy(server, `http://127.0.0.1:${port}`, upstream.origin);
    server.on("connection", (client) => proxy.accept(client, Number(upstream.port)));
    return proxy;
  }

  private accept(client: net.Socket, port: number): void {
    if (this.mode.kind === "refuse" || this.mode.kind === "reset") {
      this.dropped++;
      if (this.mode.kind === "reset") client.resetAndDestroy();
      else client.destroy();
      return;
    }
    if (isRpcFault(this.mode)) {
      // HTTP-aware from here on: this connection's requests are answered by mode, one by one.
      this.sockets.add(client);
      client.once("close", () => this.sockets.delete(client));
      this.faults.emit("connection", client);
      return;
    }
    const server = net.connect(port, "127.0.0.1");
    this.sockets.add(client).add(server);
    let requestText = "";
    const watch = (chunk: Buffer) => {
      if (this.listeners.size === 0) return;
      requestText = (requestText + chunk.toString("latin1")).slice(-SCAN_BYTES);
      let match: RegExpExecArray | null;
      let consumed = 0;
      RAW_TX.lastIndex = 0;
      while ((match = RAW_TX.exec(requestText)) !== null) {
        consumed = RAW_TX.lastIndex;
        const seen = decodeRaw(match[1] as Hex);
        if (seen) for (const listener of this.listeners) listener(seen);
      }
      requestText = requestText.slice(consumed);
    };
    const forward = (from: net.Socket, to: net.Socket) =>
      from.on("data", (chunk: Buffer) => {
        const mode = this.mode;
        // Forward first, then tell the listeners: the transaction reaches the chain before any fault.
        if (mode.kind === "delay") {
          from.pause();
          setTimeout(() => {
            if (!to.destroyed) to.write(chunk);
            if (from === client) watch(chunk);
            from.resume();
          }, mode.ms);
        } else {
          if (!to.destroyed) to.write(chunk);
          if (from === client) watch(chunk);
        }
      });
    forward(client, server);
    forward(server, client);
    const end = () => {
      client.destroy();
      // Half-close upstream so what the client wrote before it died still reaches the chain.
      server.end();
      setTimeout(() => server.destroy(), 5_000).unref();
      this.sockets.delete(client);
      this.sockets.delete(server);
    };
    for (const socket of [client, server]) {
      socket.on("error", end);
      socket.on("close", end);
      socket.on("end", end);
    }
  }

  /** Calls `listener` for each market transaction sent through the proxy until the returned function is called. */
  onTransaction(listener: TransactionListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Sets how new traffic is treated; `refuse` and `reset` also reset every connection in flight,
   * and so does entering an RPC fault mode from a raw one (so that kept-alive connections meet it).
   */
  set(mode: ProxyMode): void {
    const wasFault = isRpcFault(this.mode);
    this.mode = mode;
    if (mode.kind === "refuse" || mode.kind === "reset" || (isRpcFault(mode) && !wasFault)) this.cut();
  }

  /** The chain's current block number, asked past the proxy. */
  async headBlock(): Promise<bigint> {
    const [answer] = await this.forward([{ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] }]);
    return BigInt((answer as { result: string }).result);
  }

  private count(method: unknown): void {
    const name = typeof method === "string" ? method : "?";
    this.faulted.set(name, (this.faulted.get(name) ?? 0) + 1);
  }

  private async forward(calls: JsonRpcCall[]): Promise<unknown[]> {
    const response = await fetch(this.upstream, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(calls) });
    return (await response.json()) as unknown[];
  }

  /** One HTTP request while a fault mode (or, on a connection kept from one, `pass`) is set. */
  private async answer(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    const mode = this.mode;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const batch = Array.isArray(parsed);
    const calls = (batch ? parsed : [parsed]) as JsonRpcCall[];
    if (mode.kind === "http-status") {
      for (const call of calls) this.count(call?.method);
      res.writeHead(mode.status, { "content-type": "text/html" }).end(`<html><body><h1>${mode.status} ${http.STATUS_CODES[mode.status] ?? ""}</h1></body></html>`);
      return;
    }
    if (mode.kind === "garbage") {
      for (const call of calls) this.count(call?.method);
      res.writeHead(200, { "content-type": "application/json" }).end(`{"jsonrpc":"2.0","result":0x${"z".repeat(16)}`);
      return;
    }
    if (mode.kind === "rpc-error") {
      const answers = calls.map((call) => {
        this.count(call?.method);
        return { jsonrpc: "2.0", id: call?.id ?? null, error: { code: mode.code ?? -32603, message: mode.message ?? "Internal error (chaos)" } };
      });
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(batch ? answers : answers[0]));
      return;
    }
    // pass or stale: forwarded, a stale view rewritten on the way
    const stale = mode.kind === "stale" ? mode.block : undefined;
    const tag = stale === undefined ? undefined : `0x${stale.toString(16)}`;
    // What a lagging node does not have yet it answers itself: no block, no logs past its head.
    const unknown = (call: JsonRpcCall): boolean => {
      if (stale === undefined || !Array.isArray(call.params)) return false;
      const first: unknown = call.params[0];
      if (call.method === "eth_getBlockByNumber") return typeof first === "string" && first.startsWith("0x") && BigInt(first) > stale;
      if (call.method !== "eth_getLogs" || !first || typeof first !== "object") return false;
      const from = (first as { fromBlock?: unknown }).fromBlock;
      return typeof from === "string" && from.startsWith("0x") && BigInt(from) > stale;
    };
    const local = new Map<string, unknown>();
    for (const call of calls) {
      if (!unknown(call)) continue;
      this.count(call.method);
      local.set(JSON.stringify(call.id), { jsonrpc: "2.0", id: call.id, result: call.method === "eth_getLogs" ? [] : null });
    }
    const sent = calls.filter((call) => !local.has(JSON.stringify(call.id))).map((call) => (stale === undefined ? call : this.pinned(call, stale, tag!)));
    const answers = sent.length > 0 ? await this.forward(sent) : [];
    // Transactions this way reach the chain too: the listeners hear of them once forwarded.
    for (const call of sent) {
      const raw = call.method === "eth_sendRawTransaction" && Array.isArray(call.params) ? (call.params[0] as unknown) : undefined;
      const seen = typeof raw === "string" ? decodeRaw(raw as Hex) : undefined;
      if (seen) for (const listener of this.listeners) listener(seen);
    }
    const byId = new Map<string, unknown>([...(answers as { id?: unknown }[]).map((a) => [JSON.stringify(a.id), a] as const), ...local]);
    const out = calls.map((call) => {
      const answer = byId.get(JSON.stringify(call.id)) as { result?: unknown } | undefined;
      if (stale !== undefined && answer && call.method === "eth_blockNumber") {
        this.count(call.method);
        return { ...answer, result: tag };
      }
      if (stale !== undefined && answer && call.method === "eth_getTransactionReceipt" && answer.result) {
        const receipt = answer.result as { blockNumber: string };
        if (BigInt(receipt.blockNumber) > stale) {
          this.count(call.method);
          return { ...answer, result: null };
        }
      }
      return answer;
    });
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(batch ? out : out[0]));
  }

  /** A call as a node lagging at `block` answers it: "latest"/"pending" read at `block`, logs cut off there. */
  private pinned(call: JsonRpcCall, block: bigint, tag: string): JsonRpcCall {
    const params = Array.isArray(call.params) ? [...(call.params as unknown[])] : [];
    const method = call.method as string;
    const isHead = (value: unknown) => value === "latest" || value === "pending" || value === undefined;
    if (method === "eth_getBlockByNumber" && isHead(params[0])) {
      this.count(method);
      params[0] = tag;
    } else if (BLOCK_TAG_METHODS.has(method) && params.length > 0) {
      const at = method === "eth_estimateGas" || method === "eth_call" ? 1 : params.length - 1;
      if (isHead(params[at]) || (typeof params[at] === "string" && /^0x[0-9a-f]+$/i.test(params[at]) && BigInt(params[at]) > block)) {
        this.count(method);
        params[at] = tag;
      }
    } else if (method === "eth_getLogs" && params[0] && typeof params[0] === "object") {
      const filter = { ...(params[0] as { toBlock?: string; fromBlock?: string }) };
      if (isHead(filter.toBlock) || BigInt(filter.toBlock!) > block) {
        this.count(method);
        filter.toBlock = tag;
      }
      params[0] = filter;
    }
    return { ...call, params };
  }

  /** Takes the chain away: connections in flight are reset, new ones dropped. */
  down(): void {
    this.set({ kind: "refuse" });
  }

  /** Brings the chain back. */
  up(): void {
    this.set({ kind: "pass" });
  }

  /** Resets every connection in flight (a flapping link); new ones still pass unless the mode says otherwise. */
  cut(): void {
    for (const socket of this.sockets) socket.resetAndDestroy();
    this.sockets.clear();
  }

  async close(): Promise<void> {
    this.cut();
    this.faults.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * A network partition in front of one TCP port on 127.0.0.1 (a provider's libp2p listen port):
 * the peer that dials the proxy instead of the port can be cut off and healed. `partition()`
 * black-holes the link, as a lost route does: connections stay open but nothing crosses them,
 * new ones are accepted and hear nothing. `heal()` drops what the partition held (its peers see
 * the connections close) and lets new connections through again.
 */
export class PartitionProxy {
  private partitioned = false;
  private readonly links = new Set<{ client: net.Socket; server: net.Socket | undefined }>();

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async start(targetPort: number): Promise<PartitionProxy> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const proxy = new PartitionProxy(server, (server.address() as net.AddressInfo).port);
    server.on("connection", (client) => proxy.accept(client, targetPort));
    return proxy;
  }

  /** `addr` (a multiaddr on 127.0.0.1, ending in /p2p/<peer id>) as dialed through this proxy. */
  dialAddress(addr: string): string {
    return addr.replace(/\/tcp\/\d+\//, `/tcp/${this.port}/`);
  }

  private accept(client: net.Socket, targetPort: number): void {
    const link: { client: net.Socket; server: net.Socket | undefined } = { client, server: undefined };
    this.links.add(link);
    const drop = () => {
      client.destroy();
      link.server?.destroy();
      this.links.delete(link);
    };
    client.on("error", drop).on("close", drop);
    if (this.partitioned) {
      client.on("data", () => undefined); // heard by nobody
      return;
    }
    const server = net.connect(targetPort, "127.0.0.1");
    link.server = server;
    server.on("error", drop).on("close", drop);
    const pipe = (from: net.Socket, to: net.Socket) =>
      from.on("data", (chunk: Buffer) => {
        if (!this.partitioned && !to.destroyed) to.write(chunk);
      });
    pipe(client, server);
    pipe(server, client);
  }

  /** Cuts the link: from now on nothing crosses, in either direction, on any connection. */
  partition(): void {
    this.partitioned = true;
  }

  /** Ends the partition: the connections it held are closed (both peers see them go), new ones pass. */
  heal(): void {
    for (const link of this.links) {
      link.client.destroy();
      link.server?.destroy();
    }
    this.links.clear();
    this.partitioned = false;
  }

  async close(): Promise<void> {
    this.heal();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * A wallet whose token balance the ledger accounts for, from `baseline` (its balance when watching
 * began, at block `sinceBlock` when known: then a provider's stake moves after it are accounted too).
 */
export type WatchedWallet = { address: Address; role: "renter" | "provider"; baseline: bigint; sinceBlock?: bigint };

export type LedgerReport = {
  leases: LeaseView[];
  /** Problems found; empty when the money adds up. */
  violations: string[];
  /** Base units the market holds beyond, or short of, what it owes (0 when nothing is lost). */
  marketDrift: bigint;
  /** Machine ids on which more units were leased at once than the machine has. */
  doubleLeased: number[];
  /** Leases Open past their start deadline or Active past their end by more than `stuckGraceSeconds`. */
  stuck: bigint[];
};

export async function tokenBalance(devnet: Devnet, who: Address, blockNumber?: bigint): Promise<bigint> {
  return devnet.admin.publicClient.readContract({ address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "balanceOf", args: [who], blockNumber });
}

async function owed(devnet: Devnet, who: Address, blockNumber?: bigint): Promise<bigint> {
  return devnet.admin.publicClient.readContract({ address: devnet.deployment.contracts.market!, abi: leaseMarketAbi, functionName: "owed", args: [who], blockNumber });
}

/** Watches wallets from now on: their balances now (at one block) are the baselines the ledger starts from. */
export async function watchWallets(devnet: Devnet, wallets: { address: Address; role: WatchedWallet["role"] }[]): Promise<WatchedWallet[]> {
  const sinceBlock = await devnet.admin.publicClient.getBlockNumber();
  return Promise.all(wallets.map(async (w) => ({ ...w, sinceBlock, baseline: (await tokenBalance(devnet, w.address, sinceBlock)) + (await owed(devnet, w.address, sinceBlock)) })));
}

/**
 * What a provider moved between its wallet and its stake in the registry after `sinceBlock`: the
 * stake it added (a restarted node tops its stake back up to its target after a fault slashed
 * collateral from it) less what it withdrew. That money left the wallet but was not lost.
 */
async function stakeMoved(devnet: Devnet, wallet: Address, sinceBlock: bigint, toBlock: bigint): Promise<bigint> {
  const registry = devnet.deployment.contracts.registry;
  if (!registry) return 0n;
  const client = devnet.admin.publicClient;
  const transfers = parseEventLogs({
    abi: testTokenAbi,
    eventName: "Transfer",
    logs: await client.getLogs({ address: devnet.deployment.contracts.token, fromBlock: sinceBlock + 1n, toBlock }),
  });
  let moved = 0n;
  for (const t of transfers) {
    if (t.args.from.toLowerCase() === wallet.toLowerCase() && t.args.to.toLowerCase() === registry.toLowerCase()) moved += t.args.value;
    if (t.args.from.toLowerCase() === registry.toLowerCase() && t.args.to.toLowerCase() === wallet.toLowerCase()) moved -= t.args.value;
  }
  return moved;
}

/**
 * Waits until the provider nodes have sent the releasing claim of every held lease (issue #34) whose fault window is
 * over: after a node was down past a window, its restart releases what it holds. Throws, naming the leases, if a node
 * does not within `timeoutMs`.
 */
export async function waitHoldsReleased(devnet: Devnet, timeoutMs = 30_000): Promise<void> {
  const client = devnet.admin.publicClient;
  const market = devnet.deployment.contracts.market!;
  let due: bigint[] = [];
  await waitFor(
    "the nodes to release every held lease past its fault window",
    async () => {
      const block = await client.getBlock();
      const next = await client.readContract({ address: market, abi: leaseMarketAbi, functionName: "nextLeaseId", blockNumber: block.number });
      due = [];
      for (let id = 1n; id < next; id++) {
        const heldUntil = completionHeldUntil(await readLease(client, market, id, { blockNumber: block.number }));
        if (heldUntil !== undefined && Number(block.timestamp) >= heldUntil) due.push(id);
      }
      return due.length === 0;
    },
    { timeoutMs, intervalMs: 250 },
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}: leases ${due.join(", ")} still held`);
  });
}

/**
 * Checks the money of every lease the market has. `capacity` maps machine id to its units (for the
 * double-lease check); `stuckGraceSeconds` is how long past its end a lease may stay open (the
 * nodes' reconcile and claim intervals).
 */
export async function checkLedger(devnet: Devnet, options: { wallets: WatchedWallet[]; capacity: Map<number, number>; stuckGraceSeconds?: number }): Promise<LedgerReport> {
  const client = devnet.admin.publicClient;
  const market = devnet.deployment.contracts.market!;
  const violations: string[] = [];
  // Every read at one block: a node's claim landing while the check reads would otherwise show its pay in the
  // balances but not in the leases or the logs read before it.
  const block = await client.getBlock();
  const blockNumber = block.number;
  const next = await client.readContract({ address: market, abi: leaseMarketAbi, functionName: "nextLeaseId", blockNumber });
  const leases: LeaseView[] = [];
  for (let id = 1n; id < next; id++) leases.push(await readLease(client, market, id, { blockNumber }));
  const logs = parseEventLogs({ abi: leaseMarketAbi, logs: await client.getLogs({ address: market, fromBlock: devnet.deployment.deploymentBlock, toBlock: blockNumber }) });
  const now = Number(block.timestamp);

  // Each lease: claims add up to `paid`, never beyond what it owes the provider.
  const claimed = new Map<bigint, bigint>();
  for (const log of logs) if (log.eventName === "LeaseClaimed") claimed.set(log.args.leaseId, (claimed.get(log.args.leaseId) ?? 0n) + log.args.amount);
  // A lease that preempted another owes at least the preemption notice on its units, however soon it ends (LeaseMarket._accrued).
  const preemptors = new Set<bigint>();
  for (const log of logs) if (log.eventName === "LeasePreempted") preemptors.add(log.args.byLeaseId);
  const notice = preemptors.size > 0 ? BigInt((await client.readContract({ address: market, abi: leaseMarketAbi, functionName: "params", blockNumber })).preemptionNotice) : 0n;
  // What each lease booked: its opening deposit plus its extensions. An ended lease's view shows only
  // what it ran (duration = stopAt − activatedAt, deposit = the provider's total), but the preemptor's
  // minimum is capped by the deposit booked when it closed (LeaseMarket._preemptorMinimum).
  const booked = new Map<bigint, bigint>();
  for (const log of logs) {
    if (log.eventName === "LeaseOpened") booked.set(log.args.leaseId, (booked.get(log.args.leaseId) ?? 0n) + log.args.deposit);
    if (log.eventName === "LeaseExtended") booked.set(log.args.leaseId, (booked.get(log.args.leaseId) ?? 0n) + log.args.extraDeposit);
  }
  for (const lease of leases) {
    const claims = claimed.get(lease.leaseId) ?? 0n;
    if (claims !== lease.paid) violations.push(`lease ${lease.leaseId}: claims total ${claims}, but paid is ${lease.paid}`);
    if (lease.paid > lease.deposit) violations.push(`lease ${lease.leaseId}: paid ${lease.paid} beyond its deposit/total ${lease.deposit}`);
    // A held lease (a completion, or an Active lease ended inside its end's fault window: issue #34) is Settled with its
    // last fault window of pay still escrowed for its provider: not lost, as long as the provider's node releases it
    // once the window is over (a held lease still unpaid past heldUntil + grace is stuck, below). Every other Settled
    // lease is paid in full.
    const heldUntil = completionHeldUntil(lease);
    if (lease.status === "Settled" && heldUntil === undefined && lease.paid !== lease.deposit)
      violations.push(`lease ${lease.leaseId}: Settled with ${lease.paid} of ${lease.deposit} paid`);
    if ((lease.status === "Ended" || lease.status === "Settled") && lease.endReason !== "CoSigned" && lease.endReason !== "Faulted" && lease.activatedAt > 0) {
      let metered = BigInt(lease.units) * lease.pricePerUnitSecond * BigInt(Math.max(0, lease.stopAt - lease.activatedAt));
      if (preemptors.has(lease.leaseId)) {
        const rateTimesNotice = BigInt(lease.units) * lease.pricePerUnitSecond * notice;
        const cap = booked.get(lease.leaseId) ?? lease.deposit;
        const minimum = rateTimesNotice < cap ? rateTimesNotice : cap;
        if (minimum > metered) metered = minimum;
      }
      if (lease.deposit > metered) violations.push(`lease ${lease.leaseId}: provider total ${lease.deposit} beyond the ${metered} metered`);
    }
  }

  // The market: its balance is exactly what it still escrows plus what it owes.
  let escrowed = 0n;
  for (const lease of leases) {
    if (lease.status === "Open" || lease.status === "Active" || lease.status === "Ended") escrowed += lease.deposit - lease.paid;
    // A held lease escrows its provider's unpaid total (its deposit shows that total) until the releasing claim.
    else escrowed += heldPay(lease);
  }
  const owedTo = new Set<Address>(options.wallets.map((w) => w.address));
  for (const log of logs) if (log.eventName === "PaymentDeferred") owedTo.add(log.args.to);
  let owedTotal = 0n;
  for (const who of owedTo) owedTotal += await owed(devnet, who, blockNumber);
  const marketDrift = (await tokenBalance(devnet, market, blockNumber)) - escrowed - owedTotal;
  if (marketDrift !== 0n) violations.push(`market holds ${marketDrift} base units beyond (or, negative, short of) what it escrows and owes`);

  // Each watched wallet: balance + owed = baseline + what the rules moved.
  const leaseOf = new Map(leases.map((l) => [l.leaseId, l]));
  for (const wallet of options.wallets) {
    let expected = wallet.baseline;
    for (const log of logs) {
      const args = log.args as Record<string, unknown>;
      const lease = "leaseId" in args ? leaseOf.get(args.leaseId as bigint) : undefined;
      if (!lease) continue;
      if (wallet.role === "renter" && lease.renter === wallet.address) {
        if (log.eventName === "LeaseOpened") expected -= log.args.deposit;
        else if (log.eventName === "LeaseExtended") expected -= log.args.extraDeposit;
        else if (log.eventName === "LeaseEnded") expected += log.args.refund + log.args.credit;
        else if (log.eventName === "LeaseShrunk") expected += log.args.refund;
        else if (log.eventName === "LeaseSettled") expected += log.args.refund;
      } else if (wallet.role === "provider" && lease.provider === wallet.address && log.eventName === "LeaseClaimed") {
        expected += log.args.amount - log.args.fee;
      }
    }
    if (wallet.role === "provider" && wallet.sinceBlock !== undefined) expected -= await stakeMoved(devnet, wallet.address, wallet.sinceBlock, blockNumber);
    const actual = (await tokenBalance(devnet, wallet.address, blockNumber)) + (await owed(devnet, wallet.address, blockNumber));
    if (actual !== expected) violations.push(`${wallet.role} ${wallet.address}: holds ${actual} (balance + owed), the rules say ${expected} (${actual - expected} off)`);
  }

  // No unit leased twice: on each machine, the units of leases running at once never exceed it.
  const doubleLeased: number[] = [];
  const byMachine = new Map<number, LeaseView[]>();
  for (const lease of leases) if (lease.activatedAt > 0) byMachine.set(lease.machineId, [...(byMachine.get(lease.machineId) ?? []), lease]);
  // A preempted lease accrues through its notice (stopAt) but its units are freed at the
  // preemption itself (LeaseMarket._preempt): they count as held until the LeasePreempted block.
  const preemptedAt = new Map<bigint, number>();
  for (const log of logs) {
    if (log.eventName !== "LeasePreempted") continue;
    preemptedAt.set(log.args.leaseId, Number((await client.getBlock({ blockNumber: log.blockNumber })).timestamp));
  }
  for (const [machineId, running] of byMachine) {
    const edges: [number, number][] = [];
    for (const l of running) {
      const stopped = l.stopAt > 0 ? l.stopAt : Math.min(now, l.end);
      const stop = Math.min(stopped, preemptedAt.get(l.leaseId) ?? stopped);
      if (stop > l.activatedAt) edges.push([l.activatedAt, l.units], [stop, -l.units]);
    }
    edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let inUse = 0;
    for (const [, delta] of edges) {
      inUse += delta;
      if (inUse > (options.capacity.get(machineId) ?? Infinity)) {
        doubleLeased.push(machineId);
        violations.push(`machine ${machineId}: ${inUse} units leased at once, it has ${options.capacity.get(machineId)}`);
        break;
      }
    }
  }

  // Nothing stuck: a lease past its start deadline or end is ended within the grace.
  const grace = options.stuckGraceSeconds ?? 30;
  const stuck: bigint[] = [];
  for (const lease of leases) {
    if ((lease.status === "Open" && now > lease.startDeadline + grace) || (lease.status === "Active" && now > lease.end + grace)) {
      stuck.push(lease.leaseId);
      violations.push(
        `lease ${lease.leaseId} is still ${lease.status} ${lease.status === "Open" ? now - lease.startDeadline : now - lease.end} s past its ${lease.status === "Open" ? "start deadline" : "end"}`,
      );
    }
    // A hold nobody released: the provider's node claims it once the fault window is over, so its pay is not left behind.
    const heldUntil = completionHeldUntil(lease);
    if (heldUntil !== undefined && now > heldUntil + grace) {
      stuck.push(lease.leaseId);
      violations.push(`lease ${lease.leaseId} is still held ${now - heldUntil} s past its fault window (${heldPay(lease)} of its provider's pay not released)`);
    }
  }
  return { leases, violations, marketDrift, doubleLeased, stuck };
}
