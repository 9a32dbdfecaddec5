/**
 * The size of the on-chain attestor set (ProviderRegistry.attestorCount), read at most once a
 * minute. A lease's announced check share (`leaseChecks.shareBps`) is split over it: each attestor's
 * in-lease checker spends share / count of the lease's time (in-lease.ts), and the provider refuses
 * an attestor past that part `lease_budget` (challenge/provider.ts, common/attest/bounds.ts leaseCheckLimitMs),
 * so all attestors together use the whole announced share and no more.
 */
import type { Address, Chain, PublicClient, Transport } from "viem";
import { providerRegistryAbi } from "../../../common/abi.js";

/** How long a read count is used before the chain is read again. */
export const ATTESTOR_COUNT_TTL_MS = 60_000;

export type AttestorCountOptions = {
  publicClient: PublicClient<Transport, Chain>;
  registry: Address;
  now?: () => number;
};

export class AttestorCount {
  private counted: { atMs: number; count: number } | undefined;
  private reading: Promise<number> | undefined;
  private readonly now: () => number;

  constructor(private readonly o: AttestorCountOptions) {
    this.now = o.now ?? Date.now;
  }

  /** The attestor set's size, at least 1; the last read while a fresh read fails. */
  async get(): Promise<number> {
    if (this.counted && this.now() - this.counted.atMs < ATTESTOR_COUNT_TTL_MS) return this.counted.count;
    this.reading ??= this.read().finally(() => {
      this.reading = undefined;
    });
    try {
      return await this.reading;
    } catch (error) {
      if (this.counted) return this.counted.count;
      throw error;
    }
  }

  /** The last count read, without a chain read (1 before the first). */
  get cached(): number {
    return this.counted?.count ?? 1;
  }

  private async read(): Promise<number> {
    const count = Number(await this.o.publicClient.readContract({ address: this.o.registry, abi: providerRegistryAbi, functionName: "attestorCount" }));
    this.counted = { atMs: this.now(), count: Math.max(1, count) };
    return this.counted.count;
  }
}
