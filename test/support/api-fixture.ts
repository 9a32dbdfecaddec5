/**
 * An API server over an in-memory market seeded with signed offers, providers and leases, with a
 * clock the test moves: for the routes' own behaviour (validation, paging, errors, limits). The
 * API over a real node and devnet is in test/node/api-node.test.ts.
 */
import { Registry } from "prom-client";
import type { Hex } from "viem";
import type { z } from "zod";
import type { RelayAction, RelayBody } from "../../common/api/relay.js";
import type { Deployment } from "../../common/deployment.js";
import type { ReserveRequest } from "../../common/eip712.js";
import type { ReserveReply } from "../../common/matching/handshake.js";
import { offerKey } from "../../common/offers/message.js";
import type { apiOptionsSchema } from "../../node/api/options.js";
import { createApiServer, type ApiServer } from "../../node/api/server.js";
import type { ProviderRelay } from "../../node/api/source.js";
import { accounts, leaseRecord, machineRecord, providerRecord, signedOfferEntry, TEST_CHAIN_ID, TEST_MARKET } from "./market.js";
import { InMemoryMarketSource } from "./memory-source.js";

/**
 * A relay that records what the API handed it and answers a fixed refusal: the route tests check
 * what the API lets through to a provider; forwarding itself is tested against real nodes.
 */
export class RecordingRelay implements ProviderRelay {
  readonly reserved: { request: ReserveRequest; signature: Hex }[] = [];
  readonly forwarded: { action: RelayAction; leaseId: bigint; raw: unknown }[] = [];

  async reserve(request: ReserveRequest, signature: Hex): Promise<ReserveReply> {
    this.reserved.push({ request, signature });
    return { accepted: false, reason: "busy", message: "recorded by the test relay", availableUnits: 2 };
  }

  async forward(action: RelayAction, leaseId: bigint, _body: RelayBody, raw: unknown): Promise<unknown> {
    this.forwarded.push({ action, leaseId, raw });
    switch (action) {
      case "task":
        return { leaseId, state: "accepted" };
      case "status":
        return {
          leaseId,
          state: "waiting_spec",
          startedAt: null,
          endedAt: null,
          heartbeatAt: T0 * 1000,
          unitSeconds: 0,
          gpus: [],
          exitCode: null,
          error: null,
          completion: null,
          nextLogSeq: 0,
        };
      case "logs":
        return { lines: [], nextSeq: 0, done: false, firstAvailableSeq: 0 };
      case "cancel":
        return { leaseId, state: "stopped" };
    }
  }
}

/** A fixed start, a multiple of 600 s, so that statistics buckets are predictable. */
export const T0 = 1_700_000_400;

export function testDeployment(withMarket = true): Deployment {
  return {
    chainId: TEST_CHAIN_ID,
    deploymentBlock: 1n,
    deployedAt: "2023-11-14T22:13:20.000Z",
    deployer: accounts.providerA.address,
    contracts: { token: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512", ...(withMarket ? { market: TEST_MARKET } : {}) },
    token: { symbol: "tUSD", decimals: 6 },
  };
}

export type ApiFixture = {
  api: ApiServer;
  source: InMemoryMarketSource;
  relay: RecordingRelay;
  registry: Registry;
  clock: { seconds: number };
  keys: { a100: string; h100: string; a100b: string };
  close(): Promise<void>;
};

export async function startApiFixture(options: z.input<typeof apiOptionsSchema> = {}, extra: { deployment?: Deployment; source?: InMemoryMarketSource } = {}): Promise<ApiFixture> {
  const clock = { seconds: T0 };
  const now = () => clock.seconds * 1000;
  const source = extra.source ?? new InMemoryMarketSource({ now });
  const { providerA, providerB, attestor, renter } = accounts;

  source.putOffer(
    await signedOfferEntry({ provider: providerA, machineId: 1, model: "A100-80GB", pricePerUnitSecond: 1000n, at: T0 - 600, attestor, region: "eu-west", onDemandUnits: 2 }),
  );
  source.putOffer(
    await signedOfferEntry({ provider: providerA, machineId: 2, model: "H100-80GB-SXM", pricePerUnitSecond: 3000n, at: T0 - 300, region: "us-east", vramMiB: 81_559 }),
  );
  source.putOffer(
    await signedOfferEntry({
      provider: providerB,
      machineId: 3,
      model: "A100-80GB",
      pricePerUnitSecond: 1500n,
      minBidPerUnitSecond: 500n,
      at: T0 - 120,
      attestor,
      region: "US-East",
      units: 4,
      interruptibleUnits: 2,
    }),
  );

  source.putProvider(providerRecord(providerA, [machineRecord(providerA.address, 1, "A100-80GB"), machineRecord(providerA.address, 2, "H100-80GB-SXM")]));
  source.putProvider(
    providerRecord(providerB, [machineRecord(providerB.address, 3, "A100-80GB", 4)], {
      stake: 500_000_000n,
      freeStake: 500_000_000n,
      locked: 0n,
      reputation: { leasesCompleted: 40, faults: 0, unitSecondsDelivered: 9_000_000n, uptimePercent: 100 },
    }),
  );
  source.putLease(leaseRecord(1n, renter.address, providerA.address));
  source.putLease(leaseRecord(2n, renter.address, providerB.address, { status: "Ended", machineId: 3, stopAt: 1_700_001_000 }));
  source.putLease(leaseRecord(3n, accounts.stranger.address, providerA.address, { status: "Open", activatedAt: null, end: null }));

  const registry = new Registry();
  const relay = new RecordingRelay();
  const api = await createApiServer({ source, relay, deployment: extra.deployment ?? testDeployment(), options, registry, now });
  return {
    api,
    source,
    relay,
    registry,
    clock,
    keys: {
      a100: offerKey(providerA.address, 1),
      h100: offerKey(providerA.address, 2),
      a100b: offerKey(providerB.address, 3),
    },
    close: () => api.close(),
  };
}
