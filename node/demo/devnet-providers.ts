/**
 * Demo providers for the devnet (`npx suanli devnet --api-port 8080 --demo-offers`): real provider
 * nodes — each a daemon with its own devnet wallet and libp2p identity — that register and stake
 * on the devnet's chain, declare their machines, and publish signed offers (with hardware
 * attestations signed by the devnet attestor wallet) over gossip to the devnet's node, which
 * validates them against the registry like any other. One offer is republished now and then with
 * a new price so the explorer's live updates can be watched.
 *
 * Nothing here runs unless asked for; devnet wallets have no value anywhere. The demo attests
 * with a wallet instead of running the proof-of-capacity challenge (docs/attestation.md): the
 * attestor daemon does that on a real network.
 */
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { erc20Abi, type Address, type Hex } from "viem";
import { providerRegistryAbi, testTokenAbi } from "../../common/abi.js";
import { sendContract } from "../../common/chain/tx.js";
import type { Deployment } from "../../common/deployment.js";
import { devnetAccount, devnetPrivateKey } from "../../common/devnet.js";
import { suanliDomain, type Attestation } from "../../common/eip712.js";
import { findGpuModel, modelHash } from "../../common/gpu.js";
import { INTERCONNECT_CODES, type Interconnect } from "../../common/offers/message.js";
import { signAttestation } from "../../common/chain/sign.js";
import { nodeConfigSchema } from "../config/schema.js";
import { startDaemon, type Daemon } from "../daemon.js";
import type { Logger } from "../log/logger.js";

/** Devnet account whose wallet signs the demo's attestations; the devnet grants it ATTESTOR_ROLE. */
export const DEVNET_ATTESTOR_INDEX = 7;

const ZERO32: Hex = `0x${"0".repeat(64)}`;
const NVLINK_CLUSTER: Hex = modelHash("devnet-demo-cluster-1");

type DemoMachine = {
  model: string;
  units: number;
  region: string;
  interconnect: Interconnect;
  cluster: Hex;
  pricePerUnitSecond: bigint;
  minBidPerUnitSecond: bigint;
  attested: boolean;
};

/**
 * The demo market: three providers (devnet accounts 2, 3 and 6), six machines. Never account 1:
 * the README's sample provider (examples/provider.devnet.json) is account 1, and two nodes with
 * one wallet would re-register each other's peer id and evict each other's offers; nor 4 (the
 * README's renter) or 7-9 (the devnet's attestors).
 */
export const DEMO_PROVIDERS: { accountIndex: number; machines: DemoMachine[] }[] = [
  {
    accountIndex: 2,
    machines: [
      { model: "H100-80GB-SXM", units: 8, region: "eu-west", interconnect: "nvlink", cluster: ZERO32, pricePerUnitSecond: 700n, minBidPerUnitSecond: 0n, attested: true },
      { model: "A100-80GB", units: 8, region: "eu-west", interconnect: "nvlink", cluster: ZERO32, pricePerUnitSecond: 420n, minBidPerUnitSecond: 150n, attested: true },
    ],
  },
  {
    accountIndex: 3,
    machines: [
      { model: "A100-80GB", units: 4, region: "us-east", interconnect: "fabric", cluster: NVLINK_CLUSTER, pricePerUnitSecond: 380n, minBidPerUnitSecond: 0n, attested: false },
      { model: "L40S-48GB", units: 4, region: "us-east", interconnect: "none", cluster: ZERO32, pricePerUnitSecond: 250n, minBidPerUnitSecond: 0n, attested: true },
    ],
  },
  {
    accountIndex: 6,
    machines: [
      { model: "RTX4090-24GB", units: 2, region: "ap-south", interconnect: "none", cluster: ZERO32, pricePerUnitSecond: 95n, minBidPerUnitSecond: 0n, attested: true },
      { model: "H200-141GB", units: 8, region: "ap-south", interconnect: "nvlink", cluster: ZERO32, pricePerUnitSecond: 950n, minBidPerUnitSecond: 0n, attested: true },
    ],
  },
];

/** Stake each demo provider locks as collateral (base units of the 6-decimal test token: 50,000 tUSD). */
const DEMO_STAKE = 50_000_000_000n;

export type DemoProviders = {
  providers: Daemon[];
  stop(): Promise<void>;
};

export type StartDemoProvidersParameters = {
  rpcUrl: string;
  deploymentsDir: string;
  deployment: Deployment;
  /** Where each provider keeps its data (`<dataDir>/provider-<n>`). */
  dataDir: string;
  /** The devnet node's libp2p address, `/ip4/127.0.0.1/tcp/<port>/p2p/<peer id>`. */
  bootstrap: string;
  /** How often one offer is republished with a new price; 0 never. */
  intervalMs: number;
  logger: Logger;
};

/** Faucet, approve, register with the node's peer id, stake, declare machines; returns the machine ids. */
async function registerOnChain(daemon: Daemon, machines: DemoMachine[]): Promise<number[]> {
  const clients = { publicClient: daemon.chain.publicClient, walletClient: daemon.chain.walletClient! };
  const me = daemon.account!.address;
  const token = daemon.deployment.contracts.token;
  const registry = daemon.registry;
  await sendContract(clients, { address: token, abi: testTokenAbi, functionName: "faucet", args: [me, DEMO_STAKE] });
  await sendContract(clients, { address: token, abi: erc20Abi, functionName: "approve", args: [registry, DEMO_STAKE] });
  await sendContract(clients, { address: registry, abi: providerRegistryAbi, functionName: "register", args: [daemon.p2p.host.peerId.toString(), "devnet://demo"] });
  await sendContract(clients, { address: registry, abi: providerRegistryAbi, functionName: "stake", args: [DEMO_STAKE] });
  const ids: number[] = [];
  for (const machine of machines) {
    const args = [modelHash(machine.model), machine.units, vramOf(machine), INTERCONNECT_CODES[machine.interconnect], machine.region, machine.cluster] as const;
    const { result } = await clients.publicClient.simulateContract({ account: daemon.account!, address: registry, abi: providerRegistryAbi, functionName: "addMachine", args });
    await sendContract(clients, { address: registry, abi: providerRegistryAbi, functionName: "addMachine", args });
    ids.push(Number(result));
  }
  return ids;
}

function vramOf(machine: DemoMachine): number {
  return findGpuModel(machine.model)?.vramMiB ?? 81_920;
}

/** A day-long hardware attestation of the machine, signed by the devnet attestor wallet. */
async function attest(daemon: Daemon, provider: Address, machineId: number, machine: DemoMachine): Promise<{ attestation: Attestation; signature: Hex }> {
  const now = Math.floor(Date.now() / 1000);
  const attestation: Attestation = {
    provider,
    machineId,
    model: modelHash(machine.model),
    units: machine.units,
    vramMiB: vramOf(machine),
    throughput: 1_000_000_000n,
    challengeId: `0x${"00".repeat(32)}` as const,
    root: `0x${"00".repeat(32)}` as const,
    gpus: `0x${"00".repeat(32)}` as const,
    cc: `0x${"00".repeat(32)}` as const,
    failures: 0,
    lastFailureAt: 0,
    issuedAt: now - 60,
    expiry: now + 24 * 3600,
  };
  return signAttestation(devnetAccount(DEVNET_ATTESTOR_INDEX), suanliDomain(daemon.deployment.chainId, daemon.market), attestation);
}

/**
 * Starts the demo providers, registers them on-chain and publishes their offers.
 *
 * @example
 * const demo = await startDemoProviders({ rpcUrl, deploymentsDir, deployment, dataDir, bootstrap, intervalMs: 5000, logger });
 * // later
 * await demo.stop();
 */
export async function startDemoProviders(parameters: StartDemoProvidersParameters): Promise<DemoProviders> {
  const providers: Daemon[] = [];
  const published: { daemon: Daemon; machineId: number; machine: DemoMachine; attestations: { attestation: Attestation; signature: Hex }[] }[] = [];
  const stopAll = async () => {
    for (const daemon of providers.splice(0).reverse()) await daemon.stop().catch(() => undefined);
  };
  try {
    for (const { accountIndex, machines } of DEMO_PROVIDERS) {
      const dataDir = path.join(parameters.dataDir, `provider-${accountIndex}`);
      await mkdir(dataDir, { recursive: true });
      const config = nodeConfigSchema.parse({
        dataDir,
        log: { level: "warn" },
        chain: { rpcUrl: parameters.rpcUrl, deploymentsDir: parameters.deploymentsDir, privateKey: devnetPrivateKey(accountIndex), pollingIntervalMs: 250 },
        p2p: {
          listen: ["/ip4/127.0.0.1/tcp/0"],
          bootstrap: [parameters.bootstrap],
          allowPrivateAddresses: true,
          dht: { enabled: false },
          gossip: { heartbeatIntervalMs: 300, ipColocationWhitelist: ["127.0.0.1"] },
          connections: { inboundPerSecondPerHost: 100 },
        },
      });
      const daemon = await startDaemon(config, { logger: parameters.logger.child({ demoProvider: accountIndex }), publishesOffers: true });
      providers.push(daemon);
      const ids = await registerOnChain(daemon, machines);
      for (const [i, machine] of machines.entries()) {
        const attestations = machine.attested ? [await attest(daemon, daemon.account!.address, ids[i]!, machine)] : [];
        published.push({ daemon, machineId: ids[i]!, machine, attestations });
      }
    }
    for (const item of published) await publish(item, item.machine.pricePerUnitSecond);
  } catch (error) {
    await stopAll();
    throw error;
  }

  let turn = 0;
  const timer =
    parameters.intervalMs > 0
      ? setInterval(() => {
          const item = published[turn++ % published.length]!;
          const drift = BigInt(90 + Math.floor(Math.random() * 21)); // 90..110 % of the list price
          publish(item, (item.machine.pricePerUnitSecond * drift) / 100n).catch((error: unknown) =>
            parameters.logger.warn("Demo offer not republished", { machineId: item.machineId }, error),
          );
        }, parameters.intervalMs)
      : undefined;
  timer?.unref();

  return {
    providers,
    async stop() {
      if (timer) clearInterval(timer);
      await stopAll();
    },
  };
}

async function publish(
  item: { daemon: Daemon; machineId: number; machine: DemoMachine; attestations: { attestation: Attestation; signature: Hex }[] },
  pricePerUnitSecond: bigint,
): Promise<void> {
  const { machine } = item;
  await item.daemon.offers.publisher!.set({
    machine: {
      machineId: item.machineId,
      model: machine.model,
      units: machine.units,
      vramMiB: vramOf(machine),
      interconnect: machine.interconnect,
      region: machine.region,
      cluster: machine.cluster,
    },
    terms: { pricePerUnitSecond, minBidPerUnitSecond: machine.minBidPerUnitSecond, minDuration: 60, maxDuration: 7 * 86_400, collateralBps: 2_000, startWindow: 300 },
    capacity: { freeUnits: machine.units },
    attestations: item.attestations,
  });
}
