/**
 * The set-up most end-to-end tests start from (issue #40 item 10): a fresh devnet, a bundle server
 * on 127.0.0.1, one real provider node (test/support/provider.ts, its overrides merged into the test
 * config) and a funded renter SDK client, bootstrapped from the provider, that already sees the
 * provider's offer. `close()` stops them in reverse and removes the scratch folder; a start that
 * fails half-way stops what it had started before it throws. A provider of several machines (its
 * inventory declared in `provider`) is ready once `offers` of them are seen; `extraRenters` adds
 * funded clients of fresh accounts (a second renter filling the same provider).
 *
 * @example
 * import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
 * let market: RenterMarket;
 * before(async () => (market = await startRenterMarket({ name: "output", provider: { data: { enabled: true } } })));
 * after(async () => market?.close());
 * it("runs", async () => {
 *   const bundle = await market.bundles.bundle({ "run.sh": "echo hi" });
 *   await market.client.submitTask({ gpuType: "A100", gpuCount: 1, duration: 60, maxPricePerGpuHour: "1", attestedOnly: false, bundleUrl: bundle.url, sha256: bundle.sha256, command: "sh run.sh" });
 * });
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { devnetAccount } from "../../common/devnet.js";
import { createClient, type SuanliClient } from "../../sdk/index.js";
import { startBundleServer, type BundleServer } from "./bundles.js";
import { fund, fundedAccount, startDevnet, type Devnet } from "./devnet.js";
import { startTestProvider, type TestProvider } from "./provider.js";
import { waitFor } from "./wait.js";

export type RenterMarket = {
  /** A scratch folder of the test's own (the renter's state file lives in it). */
  work: string;
  devnet: Devnet;
  bundles: BundleServer;
  provider: TestProvider;
  /** Devnet account `renter` (default 5): the client's wallet. */
  renter: ReturnType<typeof devnetAccount>;
  client: SuanliClient;
  /** `extraRenters` more clients, each of a fresh account funded like `renter`, bootstrapped from the provider. */
  others: SuanliClient[];
  close(): Promise<void>;
};

export type RenterMarketOptions = {
  /** Names the scratch folder (`suanli-<name>-...`). */
  name: string;
  /** Merged into the provider's test config (test/support/provider.ts), e.g. `{ data: { enabled: true } }`. */
  provider?: Record<string, unknown>;
  /** The renter's devnet account (default 5). */
  renter?: number;
  /** Base units of the test token minted to the renter (default 100,000,000). */
  fund?: bigint;
  /** Free units the provider's offer must show before the market is ready (default 2, the test provider's two A100s). */
  freeUnits?: number;
  /** How many of the provider's offers (one a machine) must show `freeUnits` before the market is ready (default 1). */
  offers?: number;
  /** Renter clients of fresh funded accounts beyond `client`, in `others` (default 0); each sees the offers before the market is ready. */
  extraRenters?: number;
  /** How long the SDK may take to see the offer (default 20 s). */
  offerTimeoutMs?: number;
};

export async function startRenterMarket(options: RenterMarketOptions): Promise<RenterMarket> {
  const started: (() => Promise<unknown>)[] = [];
  const close = async () => {
    for (const stop of started.reverse()) await stop();
    started.length = 0;
  };
  try {
    const work = await mkdtemp(path.join(tmpdir(), `suanli-${options.name}-`));
    started.push(() => rm(work, { recursive: true, force: true }));
    const devnet = await startDevnet({ wallClockBlocks: true });
    started.push(() => devnet.close());
    const bundles = await startBundleServer();
    started.push(() => bundles.close());
    const provider = await startTestProvider(devnet, 1, options.provider ?? {});
    started.push(() => provider.close());
    const index = options.renter ?? 5;
    await fund(devnet, await devnet.wallet(index), options.fund ?? 100_000_000n);
    const renter = devnetAccount(index);
    const client = await createClient({
      rpcUrl: devnet.rpcUrl,
      account: renter,
      bootstrap: [provider.peer.addr],
      deployment: devnet.deploymentsDir,
      stateFile: path.join(work, "renter.json"),
    });
    started.push(() => client.close());
    const others: SuanliClient[] = [];
    for (let i = 0; i < (options.extraRenters ?? 0); i++) {
      const account = await fundedAccount(devnet, options.fund ?? 100_000_000n);
      const other = await createClient({
        rpcUrl: devnet.rpcUrl,
        account,
        bootstrap: [provider.peer.addr],
        deployment: devnet.deploymentsDir,
        stateFile: path.join(work, `renter-${i + 1}.json`),
      });
      started.push(() => other.close());
      others.push(other);
    }
    const freeUnits = options.freeUnits ?? 2;
    const offers = options.offers ?? 1;
    const what = offers === 1 ? "the provider's offer" : `the provider's ${offers} offers`;
    await Promise.all(
      [client, ...others].map((renterClient, i) =>
        waitFor(
          `${what} in ${i === 0 ? "the renter" : `extra renter ${i}`}'s SDK`,
          async () => (await renterClient.queryOffers()).filter((offer) => offer.freeUnits >= freeUnits).length >= offers,
          {
            timeoutMs: options.offerTimeoutMs ?? 20_000,
          },
        ),
      ),
    );
    return { work, devnet, bundles, provider, renter, client, others, close };
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
}
