/**
 * An in-memory ChainView FOR TESTS AND BENCHMARKS: a stand-in for the ProviderRegistry while
 * the contract-backed view is wired in by the node. Mutators mirror what contract transactions
 * do; `reads` counts calls so tests can check that the cache in front of it works.
 */
import { getAddress, type Address } from "viem";
import type { ChainView, MachineRecord, ProviderRecord } from "../../common/offers/chain-view.js";

export class MemoryChainView implements ChainView {
  private readonly providers = new Map<Address, ProviderRecord>();
  private readonly machines = new Map<number, MachineRecord>();
  private readonly attestors = new Set<Address>();
  private readonly revoked = new Map<Address, Set<bigint>>();
  private quorum = 1;
  /** Calls that reached this view. */
  reads = 0;
  /** When set, every read throws it (an unreachable RPC endpoint). */
  failWith: Error | undefined;

  private touch(): void {
    this.reads++;
    if (this.failWith) throw this.failWith;
  }

  async getProvider(provider: Address): Promise<ProviderRecord | undefined> {
    this.touch();
    const record = this.providers.get(getAddress(provider));
    return record && { ...record };
  }

  async getMachine(machineId: number): Promise<MachineRecord | undefined> {
    this.touch();
    const record = this.machines.get(machineId);
    return record && { ...record };
  }

  async isAttestor(account: Address): Promise<boolean> {
    this.touch();
    return this.attestors.has(getAddress(account));
  }

  async attestationQuorum(): Promise<number> {
    this.touch();
    return this.quorum;
  }

  async isNonceRevoked(provider: Address, nonce: bigint): Promise<boolean> {
    this.touch();
    return this.revoked.get(getAddress(provider))?.has(nonce) ?? false;
  }

  registerProvider(provider: Address, peerId: string, freeStake: bigint): void {
    this.providers.set(getAddress(provider), { registered: true, peerId, freeStake });
  }

  setFreeStake(provider: Address, freeStake: bigint): void {
    const record = this.providers.get(getAddress(provider));
    if (!record) throw new Error(`unknown provider ${provider}`);
    record.freeStake = freeStake;
  }

  deregisterProvider(provider: Address): void {
    const record = this.providers.get(getAddress(provider));
    if (record) record.registered = false;
  }

  declareMachine(machineId: number, record: MachineRecord): void {
    this.machines.set(machineId, { ...record, owner: getAddress(record.owner) });
  }

  removeMachine(machineId: number): void {
    this.machines.delete(machineId);
  }

  addAttestor(account: Address): void {
    this.attestors.add(getAddress(account));
  }

  removeAttestor(account: Address): void {
    this.attestors.delete(getAddress(account));
  }

  setQuorum(quorum: number): void {
    this.quorum = quorum;
  }

  revokeNonce(provider: Address, nonce: bigint): void {
    const address = getAddress(provider);
    const set = this.revoked.get(address) ?? new Set<bigint>();
    set.add(nonce);
    this.revoked.set(address, set);
  }
}
