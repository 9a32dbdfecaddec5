/**
 * Shared setup of the contract tests: a deployed Suanli (token, registry, market) with two registered
 * and staked providers, funded renters and three attestors, plus helpers to build and sign offers
 * and faults with viem exactly as node and SDK do (common/chain/sign.ts).
 */
import { keccak256, toBytes, zeroAddress, type Address, type Hex } from "viem";
import { network } from "hardhat";
import { computeCollateral, computeDeposit, orderFaultSignatures } from "../../../common/chain/market.js";
import { signFault, signOffer, signSettlement } from "../../../common/chain/sign.js";
import { suanliDomain, type Fault, type Offer, type Settlement } from "../../../common/eip712.js";
import { modelHash } from "../../../common/gpu.js";

export const MARKET_ROLE = keccak256(toBytes("MARKET_ROLE"));
export const ATTESTOR_ROLE = keccak256(toBytes("ATTESTOR_ROLE"));
export const A100 = modelHash("A100-80GB");
export const H100 = modelHash("H100-80GB-SXM");
export const UNBONDING_DELAY = 3600;
export const FAULT_QUORUM = 2;
/** 1,000,000 tUSD of 6 decimals. */
export const STAKE = 1_000_000n * 10n ** 6n;
export const RENTER_FUNDS = 1_000_000n * 10n ** 6n;
export const PRICE = 100n;
export const MIN_BID = 40n;
export const DEFAULT_PARAMS = {
  protocolFeeBps: 0,
  startPenaltyBps: 1_000,
  faultMinCreditBps: 2_000,
  preemptionNotice: 60,
  treasury: zeroAddress as Address,
};

export type Connection = Awaited<ReturnType<typeof network.create>>;

/** Creates one in-process chain per test file; fixtures snapshot and restore it. */
export async function connect(): Promise<Connection> {
  return network.create();
}

/**
 * Deploys and wires Suanli; machine 1 (A100, 8 units) belongs to `provider`, machine 2 (H100, 4) to `provider2`.
 * `token: "BlocklistToken"` settles in a TestToken with a USDC-style blocklist (`setBlocked`, read it with
 * `viem.getContractAt("BlocklistToken", s.token.address)`).
 */
export async function deploySuanli(connection: Connection, params = DEFAULT_PARAMS, options: { token?: "TestToken" | "BlocklistToken" } = {}) {
  const { viem } = connection;
  const publicClient = await viem.getPublicClient();
  const wallets = await viem.getWalletClients();
  const [governance, provider, provider2, renter, renter2, attestor1, attestor2, attestor3, other, treasury] = wallets;
  const testToken = () => viem.deployContract("TestToken");
  // BlocklistToken is a TestToken (same functions and events) plus setBlocked.
  const token = options.token === "BlocklistToken" ? ((await viem.deployContract("BlocklistToken")) as unknown as Awaited<ReturnType<typeof testToken>>) : await testToken();
  const registry = await viem.deployContract("ProviderRegistry", [token.address, governance!.account.address, UNBONDING_DELAY, FAULT_QUORUM]);
  const extension = await viem.deployContract("LeaseMarketExtension", [registry.address]);
  const market = await viem.deployContract("LeaseMarket", [registry.address, extension.address, params]);
  await registry.write.grantRole([MARKET_ROLE, market.address]);
  for (const attestor of [attestor1, attestor2, attestor3]) await registry.write.grantRole([ATTESTOR_ROLE, attestor!.account.address]);

  const maxUint = 2n ** 256n - 1n;
  for (const [index, p] of [provider, provider2].entries()) {
    await token.write.faucet([p!.account.address, STAKE]);
    await token.write.approve([registry.address, maxUint], { account: p!.account });
    await token.write.approve([market.address, maxUint], { account: p!.account });
    await registry.write.register([`12D3KooWProvider${index}`, `https://provider${index}.example/meta.json`], { account: p!.account });
    await registry.write.stake([STAKE], { account: p!.account });
  }
  await registry.write.addMachine([A100, 8, 81_920, 1, "eu-west", `0x${"00".repeat(32)}`], { account: provider!.account });
  await registry.write.addMachine([H100, 4, 81_559, 2, "us-east", keccak256(toBytes("cluster-a"))], { account: provider2!.account });
  for (const r of [renter, renter2, other]) {
    await token.write.faucet([r!.account.address, RENTER_FUNDS]);
    await token.write.approve([market.address, maxUint], { account: r!.account });
  }
  const chainId = await publicClient.getChainId();
  const domain = suanliDomain(chainId, market.address);
  const attestors = [attestor1, attestor2, attestor3].sort((a, b) => (BigInt(a!.account.address) < BigInt(b!.account.address) ? -1 : 1));
  return { publicClient, token, registry, extension, market, governance, provider, provider2, renter, renter2, attestors, other, treasury, domain, chainId };
}

export type Suanli = Awaited<ReturnType<typeof deploySuanli>>;
type Wallet = Suanli["provider"];

let nonceCounter = 1000n;

/** An offer of machine 1 by `provider` with sensible defaults; `overrides` replace fields. */
export async function makeOffer(s: Pick<Suanli, "publicClient" | "provider">, overrides: Partial<Offer> = {}): Promise<Offer> {
  const now = Number((await s.publicClient.getBlock()).timestamp);
  return {
    provider: s.provider!.account.address,
    machineId: 1,
    model: A100,
    pricePerUnitSecond: PRICE,
    minBidPerUnitSecond: MIN_BID,
    minDuration: 60,
    maxDuration: 30 * 24 * 3600,
    collateralBps: 5_000,
    startWindow: 600,
    nonce: nonceCounter++,
    expiry: now + 3600,
    renter: zeroAddress,
    ...overrides,
  };
}

export function sign(s: Suanli, offer: Offer, signer: Wallet = s.provider): Promise<Hex> {
  return signOffer(signer!, s.domain, offer);
}

export type Terms = {
  units: number;
  duration: number;
  maxPricePerUnitSecond: bigint;
  interruptible: boolean;
  bidPerUnitSecond: bigint;
  preempt: bigint[];
};

export function terms(overrides: Partial<Terms> = {}): Terms {
  return { units: 2, duration: 3600, maxPricePerUnitSecond: 1_000n, interruptible: false, bidPerUnitSecond: 0n, preempt: [], ...overrides };
}

/** Opens a lease and returns its id. */
export async function open(s: Suanli, options: { offer?: Offer; terms?: Partial<Terms>; renter?: Wallet; signature?: Hex } = {}) {
  const offer = options.offer ?? (await makeOffer(s));
  const signature = options.signature ?? (await sign(s, offer, offer.provider === s.provider2!.account.address ? s.provider2 : s.provider));
  const renter = options.renter ?? s.renter;
  const leaseId = await s.market.read.nextLeaseId();
  await s.market.write.openLease([offer, signature, terms(options.terms)], { account: renter!.account });
  return { leaseId, offer, signature };
}

/** Opens and activates a lease; returns its id and activation time. */
export async function openActive(s: Suanli, options: Parameters<typeof open>[1] = {}) {
  const opened = await open(s, options);
  const provider = opened.offer.provider === s.provider2!.account.address ? s.provider2 : s.provider;
  await s.market.write.activate([opened.leaseId], { account: provider!.account });
  const activatedAt = Number((await s.publicClient.getBlock()).timestamp);
  return { ...opened, activatedAt };
}

/** Signatures of `fault` by the given attestors, ordered as submitFault wants. */
export async function faultSignatures(s: Suanli, fault: Fault, signers: Wallet[] = s.attestors.slice(0, FAULT_QUORUM)) {
  const signed = await Promise.all(signers.map(async (w) => ({ signer: w!.account.address, signature: await signFault(w!, s.domain, fault) })));
  return orderFaultSignatures(signed);
}

export function settlementSignature(s: Suanli, settlement: Settlement, signer: Wallet): Promise<Hex> {
  return signSettlement(signer!, s.domain, settlement);
}

export async function latest(s: Suanli): Promise<number> {
  return Number((await s.publicClient.getBlock()).timestamp);
}

export async function balance(s: Suanli, who: Address): Promise<bigint> {
  return s.token.read.balanceOf([who]);
}

export { computeCollateral, computeDeposit };
