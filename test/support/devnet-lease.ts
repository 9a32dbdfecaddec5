/**
 * A lease opened straight on the devnet's contracts, without provider or renter nodes: the provider
 * wallet registers one machine and signs an on-demand offer (100 base units per unit-second, 5,000
 * bps collateral), the renter is funded with the deposit, approves it and opens the lease.
 */
import { zeroAddress } from "viem";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import type { ChainClients } from "../../node/chain/clients.js";
import { signOffer } from "../../common/chain/sign.js";
import { suanliDomain } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import { fund, registerProvider, send, type Devnet } from "./devnet.js";

export const DIRECT_LEASE_PRICE = 100n;

/**
 * The provider wallet registers one A100-80GB machine of 8 units (stake 1,000 tokens) and signs an on-demand offer for
 * it: DIRECT_LEASE_PRICE per unit-second, 5,000 bps collateral, open to any renter for an hour.
 */
export async function signDirectOffer(devnet: Devnet, provider: Required<ChainClients>, options: { peerId: string }) {
  const market = devnet.deployment.contracts.market!;
  const [machineId] = await registerProvider(devnet, provider, {
    peerId: options.peerId,
    stake: 1_000_000_000n,
    machines: [{ model: "A100-80GB", units: 8, vramMiB: 81_920 }],
  });
  const now = Number((await provider.publicClient.getBlock()).timestamp);
  const offer = {
    provider: provider.account.address,
    machineId: machineId!,
    model: modelHash("A100-80GB"),
    pricePerUnitSecond: DIRECT_LEASE_PRICE,
    minBidPerUnitSecond: 40n,
    minDuration: 60,
    maxDuration: 86_400,
    collateralBps: 5_000,
    startWindow: 600,
    nonce: 1n,
    expiry: now + 3600,
    renter: zeroAddress,
  };
  const signature = await signOffer(provider.walletClient, suanliDomain(devnet.deployment.chainId, market), offer);
  return { offer, signature };
}

export async function openDirectLease(
  devnet: Devnet,
  provider: Required<ChainClients>,
  renter: Required<ChainClients>,
  options: { peerId: string; units: number; duration: number },
): Promise<{ leaseId: bigint; deposit: bigint }> {
  const market = devnet.deployment.contracts.market!;
  const { offer, signature } = await signDirectOffer(devnet, provider, options);
  const deposit = BigInt(options.units) * DIRECT_LEASE_PRICE * BigInt(options.duration);
  await fund(devnet, renter, deposit);
  await send(renter, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [market, deposit] });
  const leaseId = (await renter.publicClient.readContract({ address: market, abi: leaseMarketAbi, functionName: "nextLeaseId" })) as bigint;
  await send(renter, {
    address: market,
    abi: leaseMarketAbi,
    functionName: "openLease",
    args: [
      offer,
      signature,
      { units: options.units, duration: options.duration, maxPricePerUnitSecond: DIRECT_LEASE_PRICE, interruptible: false, bidPerUnitSecond: 0n, preempt: [] },
    ],
  });
  return { leaseId, deposit };
}
