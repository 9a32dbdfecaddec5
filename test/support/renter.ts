/**
 * A renter for provider tests, built on common/ only (what the SDK does): a light libp2p host, a
 * devnet wallet that signs ReserveRequests and RenterRequests, and viem calls to approve the
 * deposit and open the lease. Not the SDK: just enough to drive a real provider node.
 */
import { multiaddr } from "@multiformats/multiaddr";
import { getAddress, parseEventLogs, type Address, type Hex, type TypedDataDomain } from "viem";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import type { LeaseView } from "../../common/chain/market.js";
import { completionHeldUntil, readLease } from "../../common/chain/market.js";
import { suanliDomain, suanliTypes, type ReserveRequest } from "../../common/eip712.js";
import { createHost, type SuanliHost } from "../../common/p2p/host.js";
import { request } from "../../common/p2p/reqresp.js";
import { CANCEL_PROTOCOL, LOGS_PROTOCOL, RESERVE_PROTOCOL, STATUS_PROTOCOL, TASK_PROTOCOL } from "../../common/p2p/protocols.js";
import {
  cancelAnswerSchema,
  logsAnswerSchema,
  reserveReplySchema,
  signLeaseRequest,
  taskAnswerSchema,
  taskStatusSchema,
  type Acceptance,
  type LogLine,
  type ReserveReply,
  type RenterAction,
  type TaskStatus,
  type TypedDataSigner,
} from "../../common/protocols/lease.js";
import type { ChainClients } from "../../node/chain/clients.js";
import { fund, send, type Devnet } from "./devnet.js";
import { waitFor } from "./wait.js";

/** Where a provider node listens: its peer id and one dialable address ending in /p2p/<peer id>. */
export type ProviderPeer = { address: Address; addr: string };

export type RentOptions = {
  machineId: number;
  units: number;
  duration: number;
  interruptible?: boolean;
  bidPerUnitSecond?: bigint;
  maxPricePerUnitSecond?: bigint;
};

function randomNonce(): Hex {
  return `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}`;
}

export class TestRenter {
  readonly address: Address;
  readonly domain: TypedDataDomain;
  private constructor(
    readonly devnet: Devnet,
    readonly clients: Required<ChainClients>,
    readonly host: SuanliHost,
  ) {
    this.address = clients.account.address;
    this.domain = suanliDomain(devnet.deployment.chainId, devnet.deployment.contracts.market!);
  }

  /** Devnet account `index` as a renter, holding `tokens` base units of the test token. */
  static async start(devnet: Devnet, index: number, tokens = 1_000_000_000n): Promise<TestRenter> {
    const clients = await devnet.wallet(index);
    if (tokens > 0n) await fund(devnet, clients, tokens);
    const host = await createHost({ listen: [], dht: { enabled: false }, gossip: { enabled: false } });
    return new TestRenter(devnet, clients, host);
  }

  get market(): Address {
    return this.devnet.deployment.contracts.market!;
  }

  signer(): TypedDataSigner {
    return (parameters) => this.clients.walletClient.signTypedData({ account: this.clients.account, ...(parameters as object) } as never);
  }

  async balance(who: Address = this.address): Promise<bigint> {
    return this.clients.publicClient.readContract({ address: this.devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "balanceOf", args: [who] });
  }

  lease(leaseId: bigint): Promise<LeaseView> {
    return readLease(this.clients.publicClient, this.market, leaseId);
  }

  /** Signs a ReserveRequest and sends it; overrides tamper with the request (bad-input tests). */
  async reserve(provider: ProviderPeer, options: RentOptions, overrides: Partial<ReserveRequest> & { chainId?: number; signWith?: TestRenter } = {}): Promise<ReserveReply> {
    const { chainId, signWith, ...fields } = overrides;
    const message: ReserveRequest = {
      renter: this.address,
      provider: provider.address,
      machineId: options.machineId,
      units: options.units,
      duration: options.duration,
      interruptible: options.interruptible ?? false,
      bidPerUnitSecond: options.bidPerUnitSecond ?? 0n,
      issuedAt: Math.floor(Date.now() / 1000),
      nonce: randomNonce(),
      ...fields,
    };
    const signer = signWith ?? this;
    const signature = await signer.clients.walletClient.signTypedData({
      account: signer.clients.account,
      domain: this.domain,
      types: suanliTypes,
      primaryType: "ReserveRequest",
      message,
    });
    return request(
      this.host,
      multiaddr(provider.addr),
      RESERVE_PROTOCOL,
      { chainId: chainId ?? this.devnet.deployment.chainId, request: message, signature },
      { responseSchema: reserveReplySchema },
    );
  }

  /** Approves the deposit and opens the lease with an acceptance; returns the lease id. */
  async open(acceptance: Acceptance, options: RentOptions): Promise<bigint> {
    const price = options.interruptible ? options.bidPerUnitSecond! : acceptance.offer.pricePerUnitSecond;
    const deposit = BigInt(acceptance.units) * price * BigInt(options.duration);
    await send(this.clients, { address: this.devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [this.market, deposit] });
    const terms = {
      units: acceptance.units,
      duration: options.duration,
      maxPricePerUnitSecond: options.maxPricePerUnitSecond ?? acceptance.offer.pricePerUnitSecond,
      interruptible: options.interruptible ?? false,
      bidPerUnitSecond: options.bidPerUnitSecond ?? 0n,
      preempt: acceptance.preempt.map((id) => BigInt(id)),
    };
    const hash = await send(this.clients, { address: this.market, abi: leaseMarketAbi, functionName: "openLease", args: [acceptance.offer, acceptance.signature, terms] });
    const receipt = await this.clients.publicClient.getTransactionReceipt({ hash });
    const opened = parseEventLogs({ abi: leaseMarketAbi, logs: receipt.logs, eventName: "LeaseOpened" }).find((log) => getAddress(log.args.renter) === this.address);
    if (!opened) throw new Error("openLease emitted no LeaseOpened for this renter");
    return opened.args.leaseId;
  }

  /** Reserve, then open: a lease id, or throws with the refusal. */
  async rent(provider: ProviderPeer, options: RentOptions): Promise<bigint> {
    const reply = await this.reserve(provider, options);
    if (!reply.accepted) throw new Error(`reserve refused: ${reply.reason} ${reply.message ?? ""}`);
    return this.open(reply, options);
  }

  private async auth(provider: ProviderPeer, leaseId: bigint, action: RenterAction, body: unknown, signWith?: TestRenter) {
    const signer = signWith ?? this;
    return signLeaseRequest(signer.signer(), this.domain, { leaseId, provider: provider.address, action, body });
  }

  async sendTask(provider: ProviderPeer, leaseId: bigint, spec: unknown, options: { signWith?: TestRenter } = {}) {
    const auth = await this.auth(provider, leaseId, "task", { spec }, options.signWith);
    return request(this.host, multiaddr(provider.addr), TASK_PROTOCOL, { auth, spec }, { responseSchema: taskAnswerSchema, maxMessageBytes: 1024 * 1024 });
  }

  async status(provider: ProviderPeer, leaseId: bigint, options: { signWith?: TestRenter } = {}): Promise<TaskStatus> {
    const auth = await this.auth(provider, leaseId, "status", {}, options.signWith);
    return request(this.host, multiaddr(provider.addr), STATUS_PROTOCOL, { auth }, { responseSchema: taskStatusSchema });
  }

  async logs(provider: ProviderPeer, leaseId: bigint, fromSeq = 0, options: { waitMs?: number; signWith?: TestRenter } = {}) {
    const body = { fromSeq, waitMs: options.waitMs ?? 0, limit: 500 };
    const auth = await this.auth(provider, leaseId, "logs", body, options.signWith);
    return request(
      this.host,
      multiaddr(provider.addr),
      LOGS_PROTOCOL,
      { auth, ...body },
      { responseSchema: logsAnswerSchema, timeoutMs: 30_000, maxMessageBytes: 2 * 1024 * 1024 },
    );
  }

  async cancel(provider: ProviderPeer, leaseId: bigint, options: { signWith?: TestRenter } = {}) {
    const auth = await this.auth(provider, leaseId, "cancel", {}, options.signWith);
    return request(this.host, multiaddr(provider.addr), CANCEL_PROTOCOL, { auth }, { responseSchema: cancelAnswerSchema });
  }

  /** Polls the status until `until` holds. */
  async waitStatus(provider: ProviderPeer, leaseId: bigint, until: (status: TaskStatus) => boolean, what: string, timeoutMs = 20_000): Promise<TaskStatus> {
    let last: TaskStatus | undefined;
    return waitFor(
      what,
      async () => {
        last = await this.status(provider, leaseId);
        return until(last) ? last : undefined;
      },
      // The last status is read when the wait fails, not when it begins (it said "none" before).
      { timeoutMs, intervalMs: 100, state: () => (last ? { state: last.state, error: last.error?.name, exitCode: last.exitCode, gpus: last.gpus.length } : "no status answered") },
    );
  }

  /** Follows the logs (long-polling) until the provider says they are done. */
  async allLogs(provider: ProviderPeer, leaseId: bigint, timeoutMs = 20_000): Promise<LogLine[]> {
    const lines: LogLine[] = [];
    let next = 0;
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const answer = await this.logs(provider, leaseId, next, { waitMs: 1_000 });
      lines.push(...answer.lines);
      next = answer.nextSeq;
      if (answer.done) return lines;
    }
    throw new Error(`logs of lease ${leaseId} not done after ${timeoutMs} ms (${lines.length} lines)`);
  }

  /** Waits until the lease's chain status is one of `statuses`. */
  waitLease(leaseId: bigint, statuses: LeaseView["status"][], timeoutMs = 20_000): Promise<LeaseView> {
    return waitFor(
      `lease ${leaseId} ${statuses.join("/")}`,
      async () => {
        const view = await this.lease(leaseId);
        return statuses.includes(view.status) ? view : undefined;
      },
      { timeoutMs, intervalMs: 100 },
    );
  }

  /**
   * Waits until a Settled lease is paid in full: for a held one (a completion or an expiry inside its fault window,
   * issue #34), the provider's node has sent the releasing claim. The caller moves the chain past the window first.
   */
  waitReleased(leaseId: bigint, timeoutMs = 30_000): Promise<LeaseView> {
    return waitFor(
      `lease ${leaseId} released and paid in full`,
      async () => {
        const view = await this.lease(leaseId);
        return view.status === "Settled" && completionHeldUntil(view) === undefined && view.paid === view.deposit ? view : undefined;
      },
      { timeoutMs, intervalMs: 100 },
    );
  }

  async close(): Promise<void> {
    await this.host.stop();
  }
}

/** The dialable address of a provider node's host. */
export function providerPeer(address: Address, addrs: string[]): ProviderPeer {
  const addr = addrs.find((a) => a.includes("/127.0.0.1/")) ?? addrs[0];
  return { address, addr: addr! };
}

/** Events of a lease from the market's logs. */
export async function leaseEvents(devnet: Devnet, leaseId: bigint) {
  const client = devnet.admin.publicClient;
  const logs = await client.getLogs({ address: devnet.deployment.contracts.market!, fromBlock: devnet.deployment.deploymentBlock });
  return parseEventLogs({ abi: leaseMarketAbi, logs }).filter((log) => "leaseId" in log.args && (log.args as { leaseId: bigint }).leaseId === leaseId);
}
