/**
 * On-chain setup from the inventory, at every start: the wallet is registered with this node's
 * peer id, its stake reaches the configured target, and every priced machine of the inventory is
 * declared (once; the machine id is remembered in level). Each step reads the chain first and
 * only sends what is missing, so a restart sends nothing.
 */
import { erc20Abi, formatUnits, parseEventLogs, parseUnits, type Address, type Chain, type PublicClient, type Transport } from "viem";
import { providerRegistryAbi } from "../../../common/abi.js";
import { readMachine, readProvider, type ProviderView } from "../../../common/chain/market.js";
import type { Deployment } from "../../../common/deployment.js";
import { DEVNET_CHAIN_ID, devnetAccount } from "../../../common/devnet.js";
import { modelHash } from "../../../common/gpu.js";
import { INTERCONNECT_CODES, type Interconnect } from "../../../common/offers/message.js";
import type { Logger } from "../../log/logger.js";
import type { Repository } from "../../store/store.js";
import type { Inventory, MachineGroup } from "../inventory/inventory.js";
import type { ProviderOptions } from "../options.js";
import type { TxSender } from "./chain-tx.js";
import { MachineDeclarationError, ProviderNotRegisteredError, StakeMissingError } from "./errors.js";

const ZERO_ADDRESS = "0x0000000000000000000000000000000000000000";
export const ZERO_CLUSTER = `0x${"0".repeat(64)}` as const;

/** A machine of the inventory as declared on-chain. */
export type DeclaredMachine = {
  /** The inventory's machine key. */
  key: string;
  machineId: number;
  /** Canonical model name. */
  model: string;
  units: number;
  vramMiB: number;
  interconnect: Interconnect;
  region: string;
  /** Cluster id declared on-chain (zero when standalone). */
  cluster: `0x${string}`;
  /** Inventory unit ids of the machine, in order. */
  unitIds: string[];
  /**
   * Why the machine is not sold right now (its on-chain declaration differs from the inventory
   * while leases hold it), or null.
   */
  blocked: string | null;
};

/** What level remembers per inventory machine. */
export type MachineBinding = { machineId: number; model: string; units: number; vramMiB: number; interconnect: Interconnect; region: string; cluster?: `0x${string}` };

export type SetupContext = {
  publicClient: PublicClient<Transport, Chain>;
  deployment: Deployment;
  registry: Address;
  address: Address;
  tx: TxSender;
  logger: Logger;
};

/**
 * Registers the wallet (or updates a changed peer id) and tops the stake up to the target.
 * Throws ProviderNotRegisteredError or StakeMissingError with what to do.
 */
export async function ensureRegistration(ctx: SetupContext, options: ProviderOptions["chain"], peerId: string): Promise<ProviderView> {
  const { publicClient, registry, address, tx, logger, deployment } = ctx;
  let provider = await readProvider(publicClient, registry, address);
  if (!provider.registered) {
    if (!options.autoRegister) {
      throw new ProviderNotRegisteredError(`The wallet ${address} is not registered as a provider`, {
        metaMessages: ["Set provider.chain.autoRegister to true, or register it yourself (ProviderRegistry.register(peerId, metadataURI))."],
      });
    }
    await tx.send({ address: registry, abi: providerRegistryAbi, functionName: "register", args: [peerId, options.metadataURI] });
    logger.info("Provider registered", { address, peerId });
  } else if (provider.peerId !== peerId || provider.metadataURI !== options.metadataURI) {
    if (!options.autoRegister) {
      throw new ProviderNotRegisteredError(`The wallet ${address} is registered with peer id ${provider.peerId}, but this node is ${peerId}`, {
        metaMessages: ["Set provider.chain.autoRegister to true to update the profile, or use the node's original data dir (p2p.identityFile)."],
      });
    }
    await tx.send({ address: registry, abi: providerRegistryAbi, functionName: "updateProfile", args: [peerId, options.metadataURI] });
    logger.info("Provider profile updated", { address, peerId });
  }

  const { symbol, decimals } = deployment.token;
  const target = parseUnits(options.stakeTarget, decimals);
  provider = await readProvider(publicClient, registry, address);
  const active = BigInt(provider.free) + BigInt(provider.locked);
  if (active < target) {
    const needed = target - active;
    const balance = await publicClient.readContract({ address: deployment.contracts.token, abi: erc20Abi, functionName: "balanceOf", args: [address] });
    if (balance < needed) {
      const devnetIndex = deployment.chainId === DEVNET_CHAIN_ID ? Array.from({ length: 20 }, (_, i) => i).find((i) => devnetAccount(i).address === address) : undefined;
      const wallet = devnetIndex === undefined ? "--key-file <file with chain.privateKey>" : `--devnet-account ${devnetIndex}`;
      throw new StakeMissingError(
        `Stake missing: ${formatUnits(needed, decimals)} ${symbol} needed to reach provider.chain.stakeTarget ${options.stakeTarget} ${symbol}, wallet ${address} holds ${formatUnits(balance, decimals)} ${symbol}`,
        {
          metaMessages: [
            `On the devnet: \`npx suanli wallet faucet ${wallet} --amount ${formatUnits(needed, decimals)}\`, then start again.`,
            `Elsewhere: send ${symbol} to ${address}, or lower provider.chain.stakeTarget (offers need free stake for their collateral).`,
          ],
        },
      );
    }
    await tx.send({ address: deployment.contracts.token, abi: erc20Abi, functionName: "approve", args: [registry, needed] });
    await tx.send({ address: registry, abi: providerRegistryAbi, functionName: "stake", args: [needed] });
    logger.info("Stake topped up", { added: formatUnits(needed, decimals), target: options.stakeTarget, symbol });
    provider = await readProvider(publicClient, registry, address);
  }
  return provider;
}

function sameDeclaration(a: MachineBinding, b: MachineBinding): boolean {
  return (
    a.model === b.model &&
    a.units === b.units &&
    a.vramMiB === b.vramMiB &&
    a.interconnect === b.interconnect &&
    a.region === b.region &&
    (a.cluster ?? ZERO_CLUSTER) === (b.cluster ?? ZERO_CLUSTER)
  );
}

function declarationArgs(binding: MachineBinding) {
  return [modelHash(binding.model), binding.units, binding.vramMiB, INTERCONNECT_CODES[binding.interconnect], binding.region, binding.cluster ?? ZERO_CLUSTER] as const;
}

/**
 * Declares each given inventory machine once and remembers its id; a declaration that no
 * longer matches the inventory is updated while the machine is unleased, and the machine is held
 * back from sale until then.
 */
export async function declareMachines(ctx: SetupContext, groups: readonly MachineGroup[], bindings: Repository<MachineBinding>): Promise<DeclaredMachine[]> {
  const { publicClient, registry, address, tx, logger } = ctx;
  const out: DeclaredMachine[] = [];
  for (const group of groups) {
    const wanted: MachineBinding = {
      machineId: 0,
      model: group.model,
      units: group.units.length,
      vramMiB: group.vramMiB,
      interconnect: group.interconnect,
      region: group.region,
      cluster: group.cluster ?? ZERO_CLUSTER,
    };
    let binding = await bindings.get(group.key);
    let blocked: string | null = null;
    if (binding) {
      const onChain = await readMachine(publicClient, registry, binding.machineId);
      if (onChain.owner === ZERO_ADDRESS || onChain.owner.toLowerCase() !== address.toLowerCase()) {
        logger.warn("A declared machine is gone from the registry; declaring it again", { machineId: binding.machineId, key: group.key });
        binding = undefined;
      } else if (!sameDeclaration(binding, wanted) || onChain.model !== modelHash(wanted.model) || onChain.units !== wanted.units) {
        if (onChain.onDemandUnits + onChain.interruptibleUnits === 0) {
          await tx.send({ address: registry, abi: providerRegistryAbi, functionName: "updateMachine", args: [binding.machineId, ...declarationArgs(wanted)] });
          binding = { ...wanted, machineId: binding.machineId };
          await bindings.put(group.key, binding);
          logger.info("Machine declaration updated", { machineId: binding.machineId, model: wanted.model, units: wanted.units });
        } else {
          blocked = "its on-chain declaration differs from the inventory and leases hold it; it is updated once they end (restart then)";
          logger.warn("Machine not offered", { machineId: binding.machineId, reason: blocked });
        }
      }
    }
    if (!binding) {
      const receipt = await tx.send({ address: registry, abi: providerRegistryAbi, functionName: "addMachine", args: declarationArgs(wanted) });
      const added = parseEventLogs({ abi: providerRegistryAbi, logs: receipt.logs, eventName: "MachineAdded", strict: true })[0];
      if (!added) throw new MachineDeclarationError(`addMachine for ${group.model} did not emit MachineAdded`);
      binding = { ...wanted, machineId: Number(added.args.machineId) };
      // Remembered at once: a crash now must not declare the machine a second time.
      await bindings.put(group.key, binding);
      logger.info("Machine declared", { machineId: binding.machineId, model: wanted.model, units: wanted.units, region: wanted.region });
    }
    out.push({
      key: group.key,
      machineId: binding.machineId,
      model: binding.model,
      units: binding.units,
      vramMiB: binding.vramMiB,
      interconnect: binding.interconnect,
      region: binding.region,
      cluster: binding.cluster ?? ZERO_CLUSTER,
      unitIds: [...group.units],
      blocked,
    });
  }
  return out;
}

/** The inventory machines the node sells: those with a configured price (others are logged and skipped). */
export function pricedMachines(inventory: Inventory, prices: Record<string, unknown>, logger: Logger): MachineGroup[] {
  const out: MachineGroup[] = [];
  for (const group of inventory.machines) {
    if (prices[group.model] === undefined) {
      logger.warn("No price for a machine's model: it is not declared or offered", {
        model: group.model,
        units: group.units.length,
        hint: `add provider.prices["${group.model}"]`,
      });
      continue;
    }
    out.push(group);
  }
  return out;
}
