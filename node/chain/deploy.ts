import { getAddress, keccak256, toBytes, zeroAddress, type Abi, type Account, type Address, type Chain, type PublicClient, type Transport, type WalletClient } from "viem";
import { attestorStakingAbi, leaseMarketAbi, leaseMarketExtensionAbi, providerRegistryAbi, testTokenAbi } from "../../common/abi.js";
import type { Deployment } from "../../common/deployment.js";
import { SuanliError } from "../../common/errors.js";
import { readBytecode } from "./artifacts.js";

export class DeployError extends SuanliError {
  override name = "DeployError";
}

/** Governance parameters set at deployment (all changeable later by governance). */
export type DeployParams = {
  /** Seconds between an unstake request and its withdrawal. */
  unbondingDelay: number;
  /** Distinct attestor signatures a fault needs. */
  faultQuorum: number;
  /** Share of every provider payment to the treasury, basis points (at most 1,000). */
  protocolFeeBps: number;
  /** Share of the collateral a renter gets when the provider misses the start deadline, basis points. */
  startPenaltyBps: number;
  /** Lowest share of the collateral a quorum fault credits to the renter, basis points. */
  faultMinCreditBps: number;
  /** Seconds a preempted interruptible lease keeps running. */
  preemptionNotice: number;
  /** Receives the protocol fee; zero while the fee is zero. */
  treasury: Address;
  /** AttestorStaking: active stake an attestor needs to count (base units of the token). */
  attestorMinStake: bigint;
  /** AttestorStaking: taken from an attestor per lost dispute. */
  attestorSlashAmount: bigint;
  /** AttestorStaking: what a disputer bonds. */
  attestorDisputeFee: bigint;
  /** AttestorStaking: seconds an attestor has to answer a dispute (at least 600). */
  attestorAnswerWindow: number;
  /** AttestorStaking: seconds an attestor's unstaked tokens stay slashable (at least the answer window). */
  attestorUnbondingDelay: number;
  /** AttestorStaking: share of a slash paid to the disputer, basis points (at most 5,000; the rest to the sink). */
  attestorDisputerShareBps: number;
  /** AttestorStaking: seconds of silence an attestor waits before signing a liveness fault (1..86,400); its receipt within them after observedAt slashes it (disputeFault). */
  attestorFaultWindow: number;
};

/**
 * Devnet defaults: short delays so a demo or a test sees unbonding and preemption happen within a
 * minute; one attestor suffices for a fault. A production deployment passes its own (see
 * docs/contracts.md: a week of unbonding, a few minutes of preemption notice, a quorum of attestors).
 */
export const DEVNET_PARAMS: DeployParams = {
  unbondingDelay: 60,
  faultQuorum: 1,
  protocolFeeBps: 0,
  startPenaltyBps: 1_000,
  faultMinCreditBps: 2_000,
  preemptionNotice: 30,
  treasury: zeroAddress,
  attestorMinStake: 1_000n * 10n ** 6n,
  attestorSlashAmount: 500n * 10n ** 6n,
  attestorDisputeFee: 10n * 10n ** 6n,
  attestorAnswerWindow: 600,
  attestorUnbondingDelay: 600,
  attestorDisputerShareBps: 5_000,
  // The attestors' default QoS window (node/attest/options.ts qosWindowSeconds).
  attestorFaultWindow: 30,
};

/** The sink of the devnet's attestor slashes (what the disputer does not get) when no treasury is set: a burn address. */
export const DEVNET_SLASH_SINK: Address = "0x000000000000000000000000000000000000dEaD";

export type DeployOptions = {
  publicClient: PublicClient<Transport, Chain>;
  walletClient: WalletClient<Transport, Chain, Account>;
  /** Overrides of DEVNET_PARAMS. */
  params?: Partial<DeployParams>;
  /** Receives DEFAULT_ADMIN_ROLE of the registry (and so governs the market); the deployer by default. */
  governance?: Address;
  /** Addresses granted ATTESTOR_ROLE (only possible when the deployer is governance). */
  attestors?: readonly Address[];
};

export const MARKET_ROLE = keccak256(toBytes("MARKET_ROLE"));
export const ATTESTOR_ROLE = keccak256(toBytes("ATTESTOR_ROLE"));

/**
 * Deploys TestToken, ProviderRegistry, LeaseMarketExtension, LeaseMarket and AttestorStaking, grants the
 * market MARKET_ROLE, attaches the staking to the registry (attestors count only while staked), grants the
 * attestors ATTESTOR_ROLE and stakes the minimum for each from the token's faucet, and returns the manifest
 * (not yet written). The staking's address is the registry's `attestorStaking()`.
 * Each transaction waits for its receipt; the manifest's deploymentBlock is the first one's.
 */
export async function deployContracts({ publicClient, walletClient, params, governance, attestors = [] }: DeployOptions): Promise<Deployment> {
  const chainId = await publicClient.getChainId();
  const deployer = walletClient.account.address;
  const settings = { ...DEVNET_PARAMS, ...params };
  const admin = governance ?? deployer;
  if (attestors.length && getAddress(admin) !== getAddress(deployer)) {
    throw new DeployError("Attestors can only be granted at deployment when the deployer is governance", {
      metaMessages: ["Deploy without attestors and let governance grant ATTESTOR_ROLE later."],
    });
  }

  async function deploy(contract: string, abi: Abi, args: readonly unknown[] = []) {
    const hash = await walletClient.deployContract({ abi, bytecode: await readBytecode(contract), args });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success" || !receipt.contractAddress) {
      throw new DeployError(`Deploying ${contract} failed (transaction ${hash})`);
    }
    return { address: getAddress(receipt.contractAddress), blockNumber: receipt.blockNumber };
  }

  async function grant(role: `0x${string}`, account: Address, registry: Address) {
    const hash = await walletClient.writeContract({ address: registry, abi: providerRegistryAbi, functionName: "grantRole", args: [role, account] });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new DeployError(`Granting a role to ${account} failed (transaction ${hash})`);
  }

  async function send(what: string, request: Parameters<typeof walletClient.writeContract>[0]) {
    const hash = await walletClient.writeContract(request);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new DeployError(`${what} failed (transaction ${hash})`);
  }

  const token = await deploy("TestToken", testTokenAbi);
  // The deployer holds the admin role until the roles are granted, then hands it to governance.
  const registry = await deploy("ProviderRegistry", providerRegistryAbi, [token.address, deployer, settings.unbondingDelay, settings.faultQuorum]);
  const extension = await deploy("LeaseMarketExtension", leaseMarketExtensionAbi, [registry.address]);
  const market = await deploy("LeaseMarket", leaseMarketAbi, [
    registry.address,
    extension.address,
    {
      protocolFeeBps: settings.protocolFeeBps,
      startPenaltyBps: settings.startPenaltyBps,
      faultMinCreditBps: settings.faultMinCreditBps,
      preemptionNotice: settings.preemptionNotice,
      treasury: settings.treasury,
    },
  ]);
  await grant(MARKET_ROLE, market.address, registry.address);
  // The first staking of this registry and market: it replaces none (deployAttestorStaking replaces one).
  const staking = await deploy("AttestorStaking", attestorStakingAbi, [
    registry.address,
    market.address,
    {
      minStake: settings.attestorMinStake,
      slashAmount: settings.attestorSlashAmount,
      disputeFee: settings.attestorDisputeFee,
      answerWindow: settings.attestorAnswerWindow,
      unbondingDelay: settings.attestorUnbondingDelay,
      disputerShareBps: settings.attestorDisputerShareBps,
      sink: settings.treasury === zeroAddress ? DEVNET_SLASH_SINK : settings.treasury,
      faultWindow: settings.attestorFaultWindow,
    },
    zeroAddress,
  ]);
  await send("Attaching the attestor staking", { address: registry.address, abi: providerRegistryAbi, functionName: "setAttestorStaking", args: [staking.address] });
  for (const attestor of attestors) await grant(ATTESTOR_ROLE, attestor, registry.address);
  if (attestors.length) {
    // The test token's faucet mints the attestors' minimum stake to the deployer, who stakes it for each.
    const total = settings.attestorMinStake * BigInt(attestors.length);
    await send("Minting the attestors' stake", { address: token.address, abi: testTokenAbi, functionName: "faucet", args: [deployer, total] });
    await send("Approving the attestors' stake", { address: token.address, abi: testTokenAbi, functionName: "approve", args: [staking.address, total] });
    for (const attestor of attestors) {
      await send(`Staking for attestor ${attestor}`, { address: staking.address, abi: attestorStakingAbi, functionName: "stakeFor", args: [attestor, settings.attestorMinStake] });
    }
  }
  if (getAddress(admin) !== getAddress(deployer)) {
    await grant(`0x${"00".repeat(32)}`, admin, registry.address);
    const hash = await walletClient.writeContract({
      address: registry.address,
      abi: providerRegistryAbi,
      functionName: "renounceRole",
      args: [`0x${"00".repeat(32)}`, deployer],
    });
    await publicClient.waitForTransactionReceipt({ hash });
  }

  const [symbol, decimals] = await Promise.all([
    publicClient.readContract({ address: token.address, abi: testTokenAbi, functionName: "symbol" }),
    publicClient.readContract({ address: token.address, abi: testTokenAbi, functionName: "decimals" }),
  ]);

  return {
    chainId,
    deploymentBlock: token.blockNumber,
    deployedAt: new Date().toISOString(),
    deployer,
    contracts: { token: token.address, registry: registry.address, market: market.address },
    token: { symbol, decimals },
  };
}
