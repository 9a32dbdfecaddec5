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
  // Attached at once: no attestor holds a stake anywhere yet, so nothing stops counting.
  const { address: stakingAddress } = await deployAttestorStaking({
    publicClient,
    walletClient,
    registry: registry.address,
    market: market.address,
    attach: true,
    params: {
      minStake: settings.attestorMinStake,
      slashAmount: settings.attestorSlashAmount,
      disputeFee: settings.attestorDisputeFee,
      answerWindow: settings.attestorAnswerWindow,
      unbondingDelay: settings.attestorUnbondingDelay,
      disputerShareBps: settings.attestorDisputerShareBps,
      sink: settings.treasury === zeroAddress ? DEVNET_SLASH_SINK : settings.treasury,
      faultWindow: settings.attestorFaultWindow,
    },
  });
  const staking = { address: stakingAddress };
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

/** AttestorStaking's parameters as its constructor and `params()` take them. */
export type StakingParams = {
  minStake: bigint;
  slashAmount: bigint;
  disputeFee: bigint;
  answerWindow: number;
  unbondingDelay: number;
  disputerShareBps: number;
  sink: Address;
  faultWindow: number;
};

export type DeployStakingOptions = {
  publicClient: PublicClient<Transport, Chain>;
  walletClient: WalletClient<Transport, Chain, Account>;
  registry: Address;
  market: Address;
  /**
   * The AttestorStaking this one replaces (docs/contracts.md, "Replacing the staking"); none for the first. Its
   * parameters are the defaults of the replacement's.
   */
  predecessor?: Address;
  /** The parameters; with a predecessor, overrides of its current ones (required without one). */
  params?: Partial<StakingParams>;
  /**
   * Attach it to the registry now, when the deployer is governance (default false). From then on only its stakes
   * count: attach a replacement once attestors have staked in it, or every attestation stops counting until they do.
   */
  attach?: boolean;
};

export type DeployedStaking = {
  address: Address;
  blockNumber: bigint;
  params: StakingParams;
  predecessor: Address;
  /** Whether the registry now names it: only when asked to (`attach`) and the deployer holds the registry's governance role. */
  attached: boolean;
};

const STAKING_PARAM_KEYS = ["minStake", "slashAmount", "disputeFee", "answerWindow", "unbondingDelay", "disputerShareBps", "sink", "faultWindow"] as const;

/**
 * Deploys an AttestorStaking for `registry` and `market`, replacing `predecessor` when given, and with `attach` attaches
 * it to the registry when the deployer is its governance (otherwise governance calls `setAttestorStaking(address)`,
 * once attestors have staked in it; the registry refuses one that does not name the last staking attached). The
 * predecessor is checked before anything is sent, with the contract's own rules: an AttestorStaking deployed for the
 * same registry and market, whose fault window is no smaller than the new one's.
 *
 * @example
 * import { deployAttestorStaking } from "./deploy.js";
 * const current = await publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
 * const next = await deployAttestorStaking({ publicClient, walletClient, registry, market, predecessor: current });
 */
export async function deployAttestorStaking(o: DeployStakingOptions): Promise<DeployedStaking> {
  const { publicClient, walletClient } = o;
  const registry = getAddress(o.registry);
  const market = getAddress(o.market);
  const predecessor = o.predecessor === undefined ? zeroAddress : getAddress(o.predecessor);
  let base: Partial<StakingParams> = {};
  if (predecessor !== zeroAddress) base = await checkPredecessor(publicClient, predecessor, registry, market);
  const merged = { ...base, ...o.params };
  const missing = STAKING_PARAM_KEYS.filter((key) => merged[key] === undefined);
  if (missing.length) {
    throw new DeployError(`AttestorStaking parameters missing: ${missing.join(", ")}`, {
      metaMessages: ["Pass every parameter for a first staking; a replacement takes its predecessor's as defaults."],
    });
  }
  const params = merged as StakingParams;
  if (predecessor !== zeroAddress && base.faultWindow !== undefined && params.faultWindow > base.faultWindow) {
    throw new DeployError(`The replacement's faultWindow ${params.faultWindow} s exceeds its predecessor's ${base.faultWindow} s`, {
      metaMessages: [
        "Attestors waited the predecessor's window before signing faults: start at most at it, then raise it with setParams (a raise applies to faults observed a day later).",
      ],
    });
  }
  const hash = await walletClient.deployContract({
    abi: attestorStakingAbi,
    bytecode: await readBytecode("AttestorStaking"),
    args: [registry, market, params, predecessor],
  });
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success" || !receipt.contractAddress) throw new DeployError(`Deploying AttestorStaking failed (transaction ${hash})`);
  const address = getAddress(receipt.contractAddress);
  const governs = await publicClient.readContract({
    address: registry,
    abi: providerRegistryAbi,
    functionName: "hasRole",
    args: [`0x${"00".repeat(32)}`, walletClient.account.address],
  });
  if (governs && o.attach) {
    const attach = await walletClient.writeContract({ address: registry, abi: providerRegistryAbi, functionName: "setAttestorStaking", args: [address] });
    const attached = await publicClient.waitForTransactionReceipt({ hash: attach });
    if (attached.status !== "success") throw new DeployError(`Attaching the attestor staking failed (transaction ${attach})`);
  }
  return { address, blockNumber: receipt.blockNumber, params, predecessor, attached: governs && o.attach === true };
}

/** The predecessor's parameters, once it is shown to be an AttestorStaking of the same registry and market. */
async function checkPredecessor(publicClient: PublicClient<Transport, Chain>, predecessor: Address, registry: Address, market: Address): Promise<StakingParams> {
  const code = await publicClient.getCode({ address: predecessor });
  if (!code || code === "0x") throw new DeployError(`No contract at the predecessor ${predecessor}`, { metaMessages: ["Pass the registry's current attestorStaking()."] });
  const read = <F extends "registry" | "market" | "params">(functionName: F) => publicClient.readContract({ address: predecessor, abi: attestorStakingAbi, functionName });
  let found: [Address, Address, StakingParams];
  try {
    found = await Promise.all([read("registry"), read("market"), read("params")]);
  } catch (cause) {
    throw new DeployError(`The predecessor ${predecessor} is not an AttestorStaking (it has no registry(), market() or params())`, { cause: cause as Error });
  }
  const [hisRegistry, hisMarket, params] = found;
  if (getAddress(hisRegistry) !== registry) throw new DeployError(`The predecessor ${predecessor} serves the registry ${hisRegistry}, not ${registry}`);
  if (getAddress(hisMarket) !== market) throw new DeployError(`The predecessor ${predecessor} serves the market ${hisMarket}, not ${market}`);
  return Object.fromEntries(STAKING_PARAM_KEYS.map((key) => [key, params[key]])) as StakingParams;
}
