import type { Address, Chain, PublicClient, Transport } from "viem";
import { providerRegistryAbi } from "../abi.js";
import { INTERCONNECTS, readMachine, readProvider } from "./market.js";
import type { ChainView, MachineRecord, ProviderRecord } from "../offers/chain-view.js";

const ZERO_ADDRESS = "0x0000000000000000000000000000000000000000";

/**
 * The ChainView of offer validation, read from the ProviderRegistry. Wrap it in a
 * CachedChainView (common/offers/chain-view.ts); the ChainFollower invalidates that cache from
 * contract events.
 */
export class RegistryChainView implements ChainView {
  constructor(
    private readonly client: PublicClient<Transport, Chain>,
    private readonly registry: Address,
  ) {}

  async getProvider(provider: Address): Promise<ProviderRecord | undefined> {
    const view = await readProvider(this.client, this.registry, provider);
    if (!view.registered && view.stake === 0n && view.peerId === "") return undefined;
    return { registered: view.registered, peerId: view.peerId, freeStake: BigInt(view.free) };
  }

  async getMachine(machineId: number): Promise<MachineRecord | undefined> {
    const machine = await readMachine(this.client, this.registry, machineId);
    if (machine.owner === ZERO_ADDRESS) return undefined;
    return {
      owner: machine.owner,
      model: machine.model,
      units: machine.units,
      vramMiB: machine.vramMiB,
      interconnect: INTERCONNECTS[machine.interconnect] ?? "none",
      region: machine.region,
      cluster: machine.cluster,
    };
  }

  isAttestor(account: Address): Promise<boolean> {
    return this.client.readContract({ address: this.registry, abi: providerRegistryAbi, functionName: "isAttestor", args: [account] });
  }

  async attestationQuorum(): Promise<number> {
    const quorum = await this.client.readContract({ address: this.registry, abi: providerRegistryAbi, functionName: "faultQuorum" });
    return Math.max(1, Number(quorum));
  }

  async isNonceRevoked(provider: Address, nonce: bigint): Promise<boolean> {
    const usable = await this.client.readContract({
      address: this.registry,
      abi: providerRegistryAbi,
      functionName: "isNonceUsable",
      args: [provider, nonce],
    });
    return !usable;
  }
}
