/**
 * Builders of realistic market data for API tests: offer messages signed by devnet wallets
 * (EIP-712, as providers sign them), attestations signed by an attestor wallet, providers and
 * leases in the API's shapes.
 */
import type { Address, HDAccount } from "viem";
import type { LeaseView, ProviderView } from "../../common/api/chain.js";
import { devnetAccount } from "../../common/devnet.js";
import { modelHash } from "../../common/gpu.js";
import { signedOfferEntry as signedEntry, type SignedOfferSpec } from "../../node/api/demo.js";
import type { OfferEntry } from "../../node/api/source.js";

/** A LeaseMarket address for EIP-712 domains in tests that deploy no market. */
export const TEST_MARKET: Address = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
export const TEST_CHAIN_ID = 31337;
export const ZERO32 = `0x${"0".repeat(64)}` as const;

export type OfferSpec = Omit<SignedOfferSpec, "domain" | "provider" | "attestor"> & { provider: HDAccount; attestor?: HDAccount };

/** An offer-book entry signed by the test wallets for the test chain and market. */
export function signedOfferEntry(spec: OfferSpec): Promise<OfferEntry> {
  return signedEntry({ ...spec, domain: { chainId: TEST_CHAIN_ID, verifyingContract: TEST_MARKET } });
}

export function providerRecord(account: HDAccount, machines: ProviderView["machines"], overrides: Partial<ProviderView> = {}): ProviderView {
  return {
    address: account.address,
    peerId: "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN",
    metadataURI: "https://provider.example/meta.json",
    registered: true,
    stake: 10_000_000_000n,
    locked: 1_000_000_000n,
    unbonding: 0n,
    unlockAt: null,
    freeStake: 9_000_000_000n,
    reputation: { leasesCompleted: 12, faults: 1, unitSecondsDelivered: 3_600_000n },
    machines,
    ...overrides,
  };
}

export function machineRecord(provider: Address, machineId: number, model: string, units = 8): ProviderView["machines"][number] {
  return {
    machineId,
    provider,
    model,
    modelHash: modelHash(model),
    units,
    vramMiB: 81_920,
    interconnect: "nvlink",
    region: "eu-west",
    cluster: ZERO32,
    onDemandUnits: 2,
    interruptibleUnits: 0,
    idleUnits: units - 2,
    attestations: [],
    offerKey: null,
  };
}

export function leaseRecord(id: bigint, renter: Address, provider: Address, overrides: Partial<LeaseView> = {}): LeaseView {
  return {
    id,
    renter,
    provider,
    machineId: 1,
    units: 2,
    pricePerUnitSecond: 1000n,
    collateralBps: 2000,
    deposit: 7_200_000n,
    paid: 0n,
    accrued: 0n,
    status: "Active",
    interruptible: false,
    startDeadline: 1_700_000_300,
    activatedAt: 1_700_000_100,
    stopAt: null,
    end: 1_700_003_700,
    ...overrides,
  };
}

export const accounts = {
  providerA: devnetAccount(1),
  providerB: devnetAccount(2),
  renter: devnetAccount(5),
  attestor: devnetAccount(7),
  stranger: devnetAccount(9),
};
