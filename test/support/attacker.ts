/**
 * Helpers for attack tests: an attacker is an ordinary libp2p 3 host (built like ours) that signs
 * with whatever wallet it has and sends exactly the bytes it wants.
 */
import type { Stream } from "@libp2p/interface";
import { lpStream } from "@libp2p/utils";
import { multiaddr } from "@multiformats/multiaddr";
import type { Hex } from "viem";
import { suanliTypes, type ReserveRequest } from "../../common/eip712.js";
import { createHost, type SuanliHost } from "../../common/p2p/host.js";
import { request } from "../../common/p2p/reqresp.js";
import { RESERVE_PROTOCOL } from "../../common/p2p/protocols.js";
import { reserveReplySchema, type ReserveReply } from "../../common/protocols/lease.js";
import type { ProviderPeer, RentOptions, TestRenter } from "./renter.js";

export function randomNonce(): Hex {
  return `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}`;
}

/** A light host with no gossip and no DHT: dials and sends, listens nowhere. */
export function lightHost(): Promise<SuanliHost> {
  return createHost({ listen: [], dht: { enabled: false }, gossip: { enabled: false } });
}

/** A reserve body signed by `wallet` (its own renter address), ready to be sent by any host, any number of times. */
export async function signedReserve(wallet: TestRenter, provider: ProviderPeer, options: RentOptions): Promise<{ chainId: number; request: ReserveRequest; signature: Hex }> {
  const message: ReserveRequest = {
    renter: wallet.address,
    provider: provider.address,
    machineId: options.machineId,
    units: options.units,
    duration: options.duration,
    interruptible: options.interruptible ?? false,
    bidPerUnitSecond: options.bidPerUnitSecond ?? 0n,
    issuedAt: Math.floor(Date.now() / 1000),
    nonce: randomNonce(),
  };
  const signature = await wallet.clients.walletClient.signTypedData({
    account: wallet.clients.account,
    domain: wallet.domain,
    types: suanliTypes,
    primaryType: "ReserveRequest",
    message,
  });
  return { chainId: wallet.devnet.deployment.chainId, request: message, signature };
}

/** Sends a reserve body from `host`. */
export function sendReserve(host: SuanliHost, provider: ProviderPeer, body: unknown): Promise<ReserveReply> {
  return request(host, multiaddr(provider.addr), RESERVE_PROTOCOL, body as never, { responseSchema: reserveReplySchema });
}

/** Opens a raw stream of `protocol` to the provider (the attacker writes what it likes). */
export async function rawStream(host: SuanliHost, provider: ProviderPeer, protocol: string): Promise<{ stream: Stream; lp: ReturnType<typeof lpStream> }> {
  const stream = await host.dialProtocol(multiaddr(provider.addr), protocol, { signal: AbortSignal.timeout(10_000) });
  return { stream, lp: lpStream(stream, { maxDataLength: 4 * 1024 * 1024 }) };
}

/** Reads a counter's value (summed over the given labels) from a prom-client registry. */
export async function counterValue(registry: { getSingleMetric(name: string): unknown }, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = registry.getSingleMetric(name) as { get(): Promise<{ values: { value: number; labels: Record<string, string | number> }[] }> } | undefined;
  if (!metric) return 0;
  const { values } = await metric.get();
  return values.filter((v) => Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want)).reduce((sum, v) => sum + v.value, 0);
}
