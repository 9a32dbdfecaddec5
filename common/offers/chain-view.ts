/**
 * What offer validation needs to know from the chain, behind one small interface. The node backs
 * it with the ProviderRegistry contract; tests back it with an in-memory registry. A bounded
 * cache with a TTL sits in front (CachedChainView); the chain follower invalidates entries when
 * contract events say they changed, so a node neither hammers its RPC endpoint nor trusts a
 * stale record for longer than the TTL.
 */
import { LRUCache } from "lru-cache";
import { getAddress, type Address, type Hex } from "viem";
import type { Interconnect } from "./message.js";

/** A provider as the ProviderRegistry records it. */
export type ProviderRecord = {
  /** Registered and not deregistered. */
  registered: boolean;
  /** The libp2p peer id the provider registered; its node signs the provider's offer messages. */
  peerId: string;
  /** Stake that backs new leases: stake − locked − unbonding, in token base units. */
  freeStake: bigint;
};

/** A machine as declared in the ProviderRegistry. */
export type MachineRecord = {
  owner: Address;
  /** keccak256 of the canonical GPU model name. */
  model: Hex;
  units: number;
  vramMiB: number;
  interconnect: Interconnect;
  region: string;
  cluster: Hex;
};

/**
 * Chain reads used by offer validation and eviction. Every method may throw when the chain is
 * unreachable; validation then ignores the message (without blaming the peer) and retries on
 * the next one.
 */
export interface ChainView {
  /** The provider's record, or undefined if it never registered. */
  getProvider(provider: Address): Promise<ProviderRecord | undefined>;
  /** The machine's record, or undefined if it is not declared (or was removed). */
  getMachine(machineId: number): Promise<MachineRecord | undefined>;
  /** Whether `account` holds the attestor role. */
  isAttestor(account: Address): Promise<boolean>;
  /** Distinct valid attestations an offer needs to count as attested (at least 1). */
  attestationQuorum(): Promise<number>;
  /** Whether the provider revoked this offer nonce (revokeNonce / revokeNoncesBelow). */
  isNonceRevoked(provider: Address, nonce: bigint): Promise<boolean>;
}

export type ChainCacheOptions = {
  /** Entries per kind (providers, machines, attestors, nonces). */
  maxEntries?: number;
  /** How long an entry is trusted without an event saying it changed. */
  ttlMs?: number;
};

/** A read-through cache of one kind of record: bounded, TTL'd, concurrent misses share one read. */
export class ReadCache<K extends string, V> {
  private readonly values: LRUCache<K, { value: V }>;
  private readonly inflight = new Map<K, Promise<V>>();
  reads = 0;

  constructor(
    private readonly read: (key: K) => Promise<V>,
    options: Required<ChainCacheOptions>,
  ) {
    this.values = new LRUCache({ max: options.maxEntries, ttl: options.ttlMs });
  }

  async get(key: K): Promise<V> {
    const hit = this.values.get(key);
    if (hit) return hit.value;
    const pending = this.inflight.get(key);
    if (pending) return pending;
    this.reads++;
    const promise = this.read(key).then(
      (value) => {
        // An invalidation during the read drops it: the value may predate the event.
        if (this.inflight.get(key) === promise) {
          this.inflight.delete(key);
          this.values.set(key, { value });
        }
        return value;
      },
      (error: unknown) => {
        if (this.inflight.get(key) === promise) this.inflight.delete(key);
        throw error;
      },
    );
    this.inflight.set(key, promise);
    return promise;
  }

  delete(key: K): void {
    this.values.delete(key);
    this.inflight.delete(key);
  }

  clear(): void {
    this.values.clear();
    this.inflight.clear();
  }

  get size(): number {
    return this.values.size;
  }
}

/**
 * A ChainView with a bounded TTL cache in front of another. The chain follower calls the
 * `invalidate*` methods when contract events report a change.
 *
 * @example
 * const chain = new CachedChainView(registryView, { maxEntries: 10_000, ttlMs: 60_000 });
 * // on ProviderRegistry events:
 * chain.invalidateProvider(event.args.provider);
 */
export class CachedChainView implements ChainView {
  private readonly providers: ReadCache<string, ProviderRecord | undefined>;
  private readonly machines: ReadCache<string, MachineRecord | undefined>;
  private readonly attestors: ReadCache<string, boolean>;
  private readonly quorum: ReadCache<string, number>;
  private readonly nonces: ReadCache<string, boolean>;

  constructor(
    readonly inner: ChainView,
    options: ChainCacheOptions = {},
  ) {
    const opts = { maxEntries: options.maxEntries ?? 10_000, ttlMs: options.ttlMs ?? 60_000 };
    this.providers = new ReadCache((key) => inner.getProvider(key as Address), opts);
    this.machines = new ReadCache((key) => inner.getMachine(Number(key)), opts);
    this.attestors = new ReadCache((key) => inner.isAttestor(key as Address), opts);
    this.quorum = new ReadCache(() => inner.attestationQuorum(), { ...opts, maxEntries: 1 });
    this.nonces = new ReadCache((key) => {
      const [provider, nonce] = key.split(":");
      return inner.isNonceRevoked(provider as Address, BigInt(nonce!));
    }, opts);
  }

  getProvider(provider: Address): Promise<ProviderRecord | undefined> {
    return this.providers.get(getAddress(provider));
  }

  getMachine(machineId: number): Promise<MachineRecord | undefined> {
    return this.machines.get(String(machineId));
  }

  isAttestor(account: Address): Promise<boolean> {
    return this.attestors.get(getAddress(account));
  }

  attestationQuorum(): Promise<number> {
    return this.quorum.get("quorum");
  }

  isNonceRevoked(provider: Address, nonce: bigint): Promise<boolean> {
    return this.nonces.get(`${getAddress(provider)}:${nonce}`);
  }

  /** Registration, stake, peer id or nonce revocations of `provider` changed. */
  invalidateProvider(provider: Address): void {
    const address = getAddress(provider);
    this.providers.delete(address);
    // Revocations are rare and per provider; dropping every cached nonce is simpler than tracking them.
    this.nonces.clear();
  }

  /** A machine was updated or removed. */
  invalidateMachine(machineId: number): void {
    this.machines.delete(String(machineId));
  }

  /** The attestor set or the quorum changed. */
  invalidateAttestors(): void {
    this.attestors.clear();
    this.quorum.clear();
  }

  /** Forget everything (after a reconnect or a reorg). */
  clear(): void {
    this.providers.clear();
    this.machines.clear();
    this.attestors.clear();
    this.quorum.clear();
    this.nonces.clear();
  }

  /** Reads that reached the inner view and current entry counts (for tests and metrics). */
  stats(): { reads: number; entries: number } {
    const caches = [this.providers, this.machines, this.attestors, this.quorum, this.nonces];
    return {
      reads: caches.reduce((sum, cache) => sum + cache.reads, 0),
      entries: caches.reduce((sum, cache) => sum + cache.size, 0),
    };
  }
}
