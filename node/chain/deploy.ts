import {
  getAddress,
  keccak256,
  toBytes,
  zeroAddress,
  zeroHash,
  type Abi,
  type Account,
  type Address,
  type Chain,
  type PublicClient,
  type Transport,
  type WalletClient,
} from "viem";
import {
  attestorStakingAbi,
  leaseMarketAbi,
  leaseMarketExtensionAbi,
  passkeyAccountFactoryAbi,
  providerRegistryAbi,
  sessionKeysAbi,
  sponsorPaymasterAbi,
  testTokenAbi,
} from "../../common/abi.js";
import type { Deployment } from "../../common/deployment.js";
import { deployAccountAbstraction } from "./account-abstraction.js";
import { readBytecode } from "./artifacts.js";
import { DeployError } from "./deploy-errors.js";
import { DEVNET_SLASH_SINK, PARAMS_PRESETS, type DeployParams, type ParamsPreset } from "./deploy-params.js";
import { checkSettlementToken, type SettlementToken } from "./settlement-token.js";
import { checkTimelockSettings, deployTimelock, type TimelockSettings } from "./timelock.js";

export { DeployError } from "./deploy-errors.js";
export { DEVNET_PARAMS, DEVNET_SLASH_SINK, PRODUCTION_PARAMS, PRODUCTION_TIMELOCK_DELAY_SECONDS, PARAMS_PRESETS, type DeployParams, type ParamsPreset } from "./deploy-params.js";

export type DeployOptions = {
  publicClient: PublicClient<Transport, Chain>;
  walletClient: WalletClient<Transport, Chain, Account>;
  /** The parameter set `params` overrides (deploy-params.ts): "devnet" by default, "production" for a real deployment. */
  preset?: ParamsPreset;
  /** Overrides of the preset's parameters. */
  params?: Partial<DeployParams>;
  /** Receives DEFAULT_ADMIN_ROLE of the registry (and so governs the market and the staking); the deployer by default. Not with `timelock`. */
  governance?: Address;
  /**
   * Hands every admin power to a new OpenZeppelin TimelockController with these settings: the registry's
   * DEFAULT_ADMIN_ROLE goes to it and the deployer renounces its own. Its delay must be at least the providers'
   * unbonding delay, so a provider can leave before a hostile proposal runs.
   */
  timelock?: TimelockSettings;
  /**
   * Addresses granted ATTESTOR_ROLE by the deployer before it hands governance over (not with `governance`). With the
   * devnet's TestToken the deployer also stakes the minimum for each from the faucet; with an existing token each
   * attestor stakes itself (`npx suanli attestor stake`).
   */
  attestors?: readonly Address[];
  /**
   * An existing ERC-20 to settle in instead of deploying the devnet's TestToken: checked first (6 decimals, EIP-2612
   * detected, no fee on transfer; settlement-token.ts), which needs the deployer to hold 1 token.
   */
  token?: Address;
  /**
   * Also put ERC-4337's EntryPoint v0.8 and SimpleAccountFactory at their canonical addresses when the chain lacks them
   * (account-abstraction.ts), deploy the PasskeyAccountFactory for that EntryPoint (last of all), and name them in the manifest. Off by default: a chain that has them needs no deploy.
   */
  accountAbstraction?: boolean;
  /**
   * With `accountAbstraction`: also deploy the SponsorPaymaster (docs/aa.md "Gas without ETH") honouring `signer`'s
   * sponsorships (a node's `sponsor` key), and put `depositWei` of the deployer's ETH in its EntryPoint deposit. Its
   * owner (who funds it, withdraws and replaces the signer) is the deployer, or `governance` once it accepts.
   */
  sponsor?: { signer: Address; depositWei?: bigint };
};

export const MARKET_ROLE = keccak256(toBytes("MARKET_ROLE"));
export const ATTESTOR_ROLE = keccak256(toBytes("ATTESTOR_ROLE"));
const ADMIN_ROLE = zeroHash;

/** The TestToken's permit domain (OpenZeppelin's ERC20Permit with the token's name): no need to probe our own token. */
const TEST_TOKEN_PERMIT = { name: "Suanli Test USD", version: "1" };

/**
 * Deploys ProviderRegistry, LeaseMarketExtension, LeaseMarket and AttestorStaking, settling in the devnet's TestToken
 * (deployed first) or in an existing `token` (checked first), grants the market MARKET_ROLE (once, for good), attaches
 * the staking to the registry (attestors count only while staked), grants the attestors ATTESTOR_ROLE (staking the
 * minimum for each from the TestToken's faucet), hands governance to `governance` or to a new timelock, deploys the
 * SessionKeys revocation list (last: it has no admin, and so every other contract keeps its address), and returns
 * the manifest (not yet written): every contract, the token and its permit, the parameters, the governance and the
 * role holders read back from the chain. Each transaction waits for its receipt; deploymentBlock is the first
 * contract's. Every check that can refuse (options, token) runs before any contract is deployed.
 */
export async function deployContracts(options: DeployOptions): Promise<Deployment> {
  const { publicClient, walletClient, governance, timelock, attestors = [] } = options;
  const chainId = await publicClient.getChainId();
  const deployer = walletClient.account.address;
  const preset = options.preset ?? "devnet";
  const settings: DeployParams = { ...PARAMS_PRESETS[preset], ...options.params };
  if (governance !== undefined && timelock !== undefined) throw new DeployError("Pass either governance (an account) or timelock (its settings), not both");
  if (attestors.length && governance !== undefined && getAddress(governance) !== getAddress(deployer)) {
    throw new DeployError("Attestors can only be granted at deployment when the deployer is governance", {
      metaMessages: ["Deploy without attestors and let governance grant ATTESTOR_ROLE later."],
    });
  }
  if (timelock) {
    checkTimelockSettings(timelock);
    if (timelock.minDelaySeconds < settings.unbondingDelay) {
      throw new DeployError(`The timelock delay ${timelock.minDelaySeconds} s is shorter than the providers' unbonding delay ${settings.unbondingDelay} s`, {
        metaMessages: ["A provider who sees a hostile proposal must be able to unstake and withdraw before it runs: make the delay at least the unbonding delay."],
      });
    }
  }

  async function deploy(contract: string, abi: Abi, args: readonly unknown[] = []) {
    const hash = await walletClient.deployContract({ abi, bytecode: await readBytecode(contract), args });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success" || !receipt.contractAddress) {
      throw new DeployError(`Deploying ${contract} failed (transaction ${hash})`);
    }
    return { address: getAddress(receipt.contractAddress), blockNumber: receipt.blockNumber };
  }

  async function send(what: string, request: Parameters<typeof walletClient.writeContract>[0]) {
    const hash = await walletClient.writeContract(request);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new DeployError(`${what} failed (transaction ${hash})`);
  }

  const role = (what: string, name: "grantRole" | "renounceRole", roleId: `0x${string}`, account: Address, registry: Address) =>
    send(what, { address: registry, abi: providerRegistryAbi, functionName: name, args: [roleId, account] });

  // The existing token is checked (and its fee probe sent) before any contract is deployed.
  let token: SettlementToken & { blockNumber?: bigint };
  if (options.token !== undefined) {
    token = await checkSettlementToken({ publicClient, walletClient, token: options.token });
  } else {
    const deployed = await deploy("TestToken", testTokenAbi);
    const [symbol, decimals] = await Promise.all([
      publicClient.readContract({ address: deployed.address, abi: testTokenAbi, functionName: "symbol" }),
      publicClient.readContract({ address: deployed.address, abi: testTokenAbi, functionName: "decimals" }),
    ]);
    token = { address: deployed.address, name: TEST_TOKEN_PERMIT.name, symbol, decimals, permit: TEST_TOKEN_PERMIT, blockNumber: deployed.blockNumber };
  }
  const timelockDeployed = timelock ? await deployTimelock({ publicClient, walletClient }, timelock) : undefined;
  const admin = timelockDeployed?.address ?? (governance === undefined ? deployer : getAddress(governance));

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
  await role("Granting the market MARKET_ROLE", "grantRole", MARKET_ROLE, market.address, registry.address);
  if (settings.faultQuorumBps !== 0) {
    await send("Setting the fault quorum's share", { address: registry.address, abi: providerRegistryAbi, functionName: "setFaultQuorumBps", args: [settings.faultQuorumBps] });
  }
  // The first staking of this registry and market: it replaces none (deployAttestorStaking replaces one).
  // Attached at once: no attestor holds a stake anywhere yet, so nothing stops counting. Slashes not paid to the
  // disputer go to the treasury, else to governance's timelock, else they are burnt.
  const sink = settings.treasury !== zeroAddress ? settings.treasury : (timelockDeployed?.address ?? DEVNET_SLASH_SINK);
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
      sink,
      faultWindow: settings.attestorFaultWindow,
    },
  });
  for (const attestor of attestors) await role(`Granting ATTESTOR_ROLE to ${attestor}`, "grantRole", ATTESTOR_ROLE, attestor, registry.address);
  if (attestors.length && options.token === undefined) {
    // The test token's faucet mints the attestors' minimum stake to the deployer, who stakes it for each.
    const total = settings.attestorMinStake * BigInt(attestors.length);
    await send("Minting the attestors' stake", { address: token.address, abi: testTokenAbi, functionName: "faucet", args: [deployer, total] });
    await send("Approving the attestors' stake", { address: token.address, abi: testTokenAbi, functionName: "approve", args: [stakingAddress, total] });
    for (const attestor of attestors) {
      await send(`Staking for attestor ${attestor}`, { address: stakingAddress, abi: attestorStakingAbi, functionName: "stakeFor", args: [attestor, settings.attestorMinStake] });
    }
  }
  if (admin !== deployer) {
    await role("Handing governance over", "grantRole", ADMIN_ROLE, admin, registry.address);
    await role("Renouncing the deployer's admin role", "renounceRole", ADMIN_ROLE, deployer, registry.address);
  }
  // Renters' session-key revocations (issue 38): no admin, no money, nothing to wire; nodes read isRevoked.
  const sessions = await deploy("SessionKeys", sessionKeysAbi);
  // ERC-4337 last of all, at addresses of their own: nothing above moves.
  const aa = options.accountAbstraction ? await deployAccountAbstraction({ publicClient, walletClient }) : undefined;
  let paymaster: Address | undefined;
  if (aa && options.sponsor) {
    paymaster = (await deploy("SponsorPaymaster", sponsorPaymasterAbi, [aa.entryPoint, getAddress(options.sponsor.signer)])).address;
    const depositWei = options.sponsor.depositWei ?? 0n;
    if (depositWei > 0n) {
      const hash = await walletClient.writeContract({ address: paymaster, abi: sponsorPaymasterAbi, functionName: "deposit", value: depositWei });
      if ((await publicClient.waitForTransactionReceipt({ hash })).status !== "success")
        throw new DeployError(`Funding the paymaster's EntryPoint deposit failed (transaction ${hash})`);
    }
    // Ownable2Step: governance becomes the owner once it accepts.
    if (admin !== deployer) await send("Offering the paymaster to governance", { address: paymaster, abi: sponsorPaymasterAbi, functionName: "transferOwnership", args: [admin] });
  }
  // Passkey owners' accounts (docs/aa.md "A passkey owner"): our own build, no admin; last, so no address above moves.
  const passkeyAccountFactory = aa ? (await deploy("PasskeyAccountFactory", passkeyAccountFactoryAbi, [aa.entryPoint])).address : undefined;

  const members = async (roleId: `0x${string}`) => {
    const count = await publicClient.readContract({ address: registry.address, abi: providerRegistryAbi, functionName: "getRoleMemberCount", args: [roleId] });
    return Promise.all(
      Array.from({ length: Number(count) }, (_, i) =>
        publicClient.readContract({ address: registry.address, abi: providerRegistryAbi, functionName: "getRoleMember", args: [roleId, BigInt(i)] }),
      ),
    );
  };
  const [admins, markets, attestorSet] = await Promise.all([members(ADMIN_ROLE), members(MARKET_ROLE), members(ATTESTOR_ROLE)]);

  return {
    chainId,
    deploymentBlock: token.blockNumber ?? timelockDeployed?.blockNumber ?? registry.blockNumber,
    deployedAt: new Date().toISOString(),
    deployer,
    contracts: {
      token: token.address,
      registry: registry.address,
      market: market.address,
      extension: extension.address,
      attestorStaking: stakingAddress,
      sessions: sessions.address,
      ...(timelockDeployed ? { timelock: timelockDeployed.address } : {}),
      ...(aa ?? {}),
      ...(paymaster ? { paymaster } : {}),
      ...(passkeyAccountFactory ? { passkeyAccountFactory } : {}),
    },
    token: { symbol: token.symbol, decimals: token.decimals, permit: token.permit, origin: options.token === undefined ? "TestToken" : "existing" },
    params: {
      preset,
      values: Object.fromEntries(Object.entries({ ...settings, attestorSink: sink }).map(([key, value]) => [key, typeof value === "bigint" ? value.toString() : value])),
    },
    governance: {
      admin,
      ...(timelock
        ? {
            timelock: {
              minDelaySeconds: timelock.minDelaySeconds,
              proposers: timelock.proposers.map((a) => getAddress(a)),
              executors: timelock.executors.map((a) => getAddress(a)),
              cancellers: (timelock.cancellers ?? []).map((a) => getAddress(a)),
            },
          }
        : {}),
    },
    roles: { admin: admins, market: markets, attestor: attestorSet },
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
