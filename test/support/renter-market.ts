/**
 * The one set-up the end-to-end tests start from (issue #40 item 10). `startMarket`: a fresh devnet,
 * a bundle server on 127.0.0.1, real provider nodes (test/support/provider.ts, their overrides
 * merged into the test config), an optional node with the HTTP API (the browser path) and a funded
 * renter account; `startRenterMarket` adds funded renter SDK clients, bootstrapped from the
 * providers, that already see their offers. A test whose renter is something else (the CLI, a page
 * in Chromium, test/support/renter.ts's TestRenter) starts from `startMarket`. `close()` stops every
 * part in reverse and removes the scratch folder; a start that fails half-way stops what it had
 * started before it throws. A provider of several machines (its inventory declared in `provider`)
 * is ready once `offers` of them are seen; `providers` starts several providers; `extraRenters`
 * adds funded clients of fresh accounts (a second renter filling the same provider), through libp2p
 * or the API node. A provider that must be a real child process (signals, crashes, restarts) starts
 * from test/support/provider-process.ts instead.
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
import { http, type Account } from "viem";
import { devnetAccount } from "../../common/devnet.js";
import type { StartDaemonOptions } from "../../node/daemon.js";
import type { ProviderAgentOptions } from "../../node/provider/agent.js";
import { createClient as createBrowserClient } from "../../sdk/browser.js";
import { createClient, type CreateClientParameters, type SuanliClient } from "../../sdk/index.js";
import { startBundleServer, type BundleServer } from "./bundles.js";
import { startTestDaemon } from "./daemons.js";
import { fund, fundedAccount, startDevnet, type Devnet } from "./devnet.js";
import { startTestProvider, type TestProvider } from "./provider.js";
import { waitFor } from "./wait.js";

export type Market = {
  /** A scratch folder of the test's own (the renters' state files live in it). */
  work: string;
  devnet: Devnet;
  bundles: BundleServer;
  /** The first of `providers` (devnet account 1). */
  provider: TestProvider;
  /** Every provider node, `providers[i]` on devnet account i + 1. */
  providers: TestProvider[];
  /** The node with the HTTP API when `apiNode` asked for one (its URL: `apiNode.api!.url`). */
  apiNode: Awaited<ReturnType<typeof startTestDaemon>> | undefined;
  /** Devnet account `renter` (default 5), funded with `fund`: the client's wallet, or the CLI's `--devnet-account`. */
  renter: ReturnType<typeof devnetAccount>;
  /** Has `stop` run by `close()` before every part started so far (a client or a process the test started on this market). */
  defer(stop: () => Promise<unknown>): void;
  close(): Promise<void>;
};

export type MarketOptions = {
  /** Names the scratch folder (`suanli-<name>-...`). */
  name: string;
  /** The devnet's own options (its blocks always keep to the wall clock), e.g. `{ params: { preemptionNotice: 2 } }`. */
  devnet?: Omit<NonNullable<Parameters<typeof startDevnet>[0]>, "wallClockBlocks">;
  /** Merged into the provider's test config (test/support/provider.ts), e.g. `{ data: { enabled: true } }`. */
  provider?: Record<string, unknown>;
  /** Several providers instead of `provider`: the overrides of each, provider i on devnet account i + 1, started in order. */
  providers?: Record<string, unknown>[];
  /** The provider agent's own options, for every provider (e.g. a sealing-key clock the test moves). */
  providerAgent?: ProviderAgentOptions;
  /** Also start a node with the HTTP API on 127.0.0.1, bootstrapped from the providers, in `apiNode`: true, or its start options (e.g. a `logger` that records what it logs). Default false. */
  apiNode?: boolean | StartDaemonOptions;
  /** The renter's devnet account (default 5). */
  renter?: number;
  /** Base units of the test token minted to each renter (default 100,000,000; 0 mints none). */
  fund?: bigint;
};

export type RenterMarket = Market & {
  client: SuanliClient;
  /** `extraRenters` more clients, each of a fresh account funded like `renter`, in the order `extraRentersVia` describes. */
  others: SuanliClient[];
};

export type RenterMarketOptions = MarketOptions & {
  /**
   * How `client` reaches the market: "libp2p" (default, bootstrapped from the providers) or "browser": the browser
   * SDK (sdk/browser.ts) through the API node's HTTP API, with the devnet's JSON-RPC as its wallet (needs `apiNode`).
   */
  renterVia?: "libp2p" | "browser";
  /** The name of the renter client's state file in `work` (default renter.json; the SDK fills in `{deployment}`). */
  renterStateFile?: string;
  /** Added to the renter client's own `createClient` parameters (e.g. a `walletTransport` in front of the devnet's RPC). */
  clientOptions?: (devnet: Devnet) => Partial<CreateClientParameters>;
  /** Free units an offer must show to count towards `offers` (default 2, the test provider's two A100s). */
  freeUnits?: number;
  /** How many offers (one a machine, all providers together) must show `freeUnits` before a renter is ready (default 1). */
  offers?: number;
  /** Renter clients of fresh funded accounts beyond `client`, in `others` (default 0); each sees the offers before the market is ready. */
  extraRenters?: number;
  /**
   * How the extra renters reach the market: "libp2p" (default, bootstrapped from the providers), "api" (`nodeUrl`:
   * the API node's HTTP API, as a browser does) or "alternate" (the 1st, 3rd, 5th ... extra renter through the
   * API, the others through libp2p: with `client` on libp2p, half of all renters each way). Not "libp2p" needs `apiNode`.
   */
  extraRentersVia?: "libp2p" | "api" | "alternate";
  /** How long each renter's SDK may take to see the offers (default 20 s). */
  offerTimeoutMs?: number;
};

/**
 * The devnet, bundle server, provider nodes, optional API node and funded renter account, without a renter client.
 *
 * @example
 * import { startMarket, type Market } from "../support/renter-market.js";
 * const market: Market = await startMarket({ name: "tty" });
 * const base = ["--rpc-url", market.devnet.rpcUrl, "--deployments", market.devnet.deploymentsDir, "--bootstrap", market.provider.peer.addr, "--devnet-account", "5"];
 */
export async function startMarket(options: MarketOptions): Promise<Market> {
  if (options.provider && options.providers) throw new Error("startMarket: pass `provider` or `providers`, not both");
  const started: (() => Promise<unknown>)[] = [];
  // Every part is stopped even when one fails to (a client whose close throws leaves no node running).
  const close = async () => {
    const failures: unknown[] = [];
    for (const stop of started.reverse()) await stop().catch((error: unknown) => failures.push(error));
    started.length = 0;
    if (failures.length > 0) throw new AggregateError(failures, `startMarket: ${failures.length} part(s) failed to stop`);
  };
  try {
    const work = await mkdtemp(path.join(tmpdir(), `suanli-${options.name}-`));
    started.push(() => rm(work, { recursive: true, force: true }));
    const devnet = await startDevnet({ ...options.devnet, wallClockBlocks: true });
    started.push(() => devnet.close());
    const bundles = await startBundleServer();
    started.push(() => bundles.close());
    const providers: TestProvider[] = [];
    for (const [i, overrides] of (options.providers ?? [options.provider ?? {}]).entries()) {
      const provider = await startTestProvider(devnet, i + 1, overrides, { agent: options.providerAgent });
      started.push(() => provider.close());
      providers.push(provider);
    }
    let apiNode: Market["apiNode"];
    if (options.apiNode) {
      const bootstrap = providers.map((provider) => provider.peer.addr);
      const node = await startTestDaemon(devnet, { p2p: { bootstrap }, api: { enabled: true, host: "127.0.0.1", port: 0 } }, options.apiNode === true ? {} : options.apiNode);
      started.push(() => node.close());
      apiNode = node;
    }
    const index = options.renter ?? 5;
    const tokens = options.fund ?? 100_000_000n;
    if (tokens > 0n) await fund(devnet, await devnet.wallet(index), tokens);
    const defer = (stop: () => Promise<unknown>) => void started.push(stop);
    return { work, devnet, bundles, provider: providers[0]!, providers, apiNode, renter: devnetAccount(index), defer, close };
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
}

/** `startMarket` and funded renter SDK clients that already see the offers (stopped by `close()` before the rest). */
export async function startRenterMarket(options: RenterMarketOptions): Promise<RenterMarket> {
  const via = options.extraRentersVia ?? "libp2p";
  if (via !== "libp2p" && !options.apiNode) throw new Error(`startRenterMarket: extraRentersVia "${via}" needs apiNode`);
  if (options.renterVia === "browser" && !options.apiNode) throw new Error('startRenterMarket: renterVia "browser" needs apiNode');
  if (options.renterVia === "browser" && options.renterStateFile) throw new Error("startRenterMarket: the browser SDK keeps no state file (renterStateFile)");
  const market = await startMarket(options);
  try {
    const { devnet, work, apiNode } = market;
    const bootstrap = market.providers.map((provider) => provider.peer.addr);
    const tokens = options.fund ?? 100_000_000n;
    const accounts: Account[] = [];
    for (let i = 0; i < (options.extraRenters ?? 0); i++) accounts.push(await fundedAccount(devnet, tokens));
    const ready = { freeUnits: options.freeUnits ?? 2, offers: options.offers ?? 1, timeoutMs: options.offerTimeoutMs ?? 20_000 };
    const throughApi = (i: number) => via === "api" || (via === "alternate" && i % 2 === 0);
    // Every renter joins and waits for the offers at the same time; each one that is ready is stopped by close().
    const joining = [
      connectRenter(devnet, {
        ...ready,
        name: "the renter",
        account: market.renter,
        ...(options.renterVia === "browser" ? { nodeUrl: apiNode!.api!.url, browser: true } : { bootstrap, stateFile: path.join(work, options.renterStateFile ?? "renter.json") }),
        client: options.clientOptions?.(devnet),
      }),
      ...accounts.map((account, i) =>
        connectRenter(devnet, {
          ...ready,
          name: `extra renter ${i + 1}`,
          account,
          ...(throughApi(i) ? { nodeUrl: apiNode!.api!.url } : { bootstrap }),
          stateFile: path.join(work, `renter-${i + 1}.json`),
        }),
      ),
    ].map(async (joined) => {
      const renterClient = await joined;
      market.defer(() => renterClient.close());
      return renterClient;
    });
    const settled = await Promise.allSettled(joining);
    const failed = settled.find((result) => result.status === "rejected");
    if (failed) throw failed.reason;
    const [client, ...others] = settled.map((result) => (result as PromiseFulfilledResult<SuanliClient>).value);
    return { ...market, client: client!, others };
  } catch (error) {
    await market.close().catch(() => undefined);
    throw error;
  }
}

export type ConnectRenterOptions = {
  /** Who it is, for the timeout's message ("the renter"). */
  name: string;
  account: Account;
  /** libp2p multiaddrs to join through, or `nodeUrl`: a node's HTTP API (the browser path). */
  bootstrap?: string[];
  nodeUrl?: string;
  /**
   * The browser SDK (sdk/browser.ts) through `nodeUrl` instead of the Node one: its account an address that the
   * devnet's JSON-RPC signs for (a devnet account; what an injected wallet does), the deployment passed as an object,
   * no state file.
   */
  browser?: boolean;
  /** The SDK's task records (default in memory). */
  stateFile?: string;
  /** Free units an offer must show to count (default 1). */
  freeUnits?: number;
  /** How many such offers it must see before it is ready (default 1). */
  offers?: number;
  /** How long it may take to see them (default 30 s). */
  timeoutMs?: number;
  /** Added to the `createClient` parameters. */
  client?: Partial<CreateClientParameters>;
};

/**
 * A renter SDK client on the devnet that already sees `offers` offers of at least `freeUnits` free units (the
 * account funded by the caller). A client that does not see them in time is closed before this rejects.
 *
 * @example
 * import { connectRenter } from "../support/renter-market.js";
 * const renter = await connectRenter(devnet, { name: "renter 6", account: devnetAccount(6), bootstrap: [node.ready.addrs[0]!] });
 */
export async function connectRenter(devnet: Devnet, options: ConnectRenterOptions): Promise<SuanliClient> {
  if (options.browser && !options.nodeUrl) throw new Error(`connectRenter: ${options.name} in the browser SDK needs nodeUrl`);
  const client = options.browser
    ? await createBrowserClient({
        rpcUrl: devnet.rpcUrl,
        nodeUrl: options.nodeUrl,
        account: options.account.address,
        walletTransport: http(devnet.rpcUrl),
        deployment: devnet.deployment,
        ...options.client,
      })
    : await createClient({
        rpcUrl: devnet.rpcUrl,
        account: options.account,
        ...(options.nodeUrl ? { nodeUrl: options.nodeUrl } : { bootstrap: options.bootstrap }),
        deployment: devnet.deploymentsDir,
        ...(options.stateFile ? { stateFile: options.stateFile } : {}),
        ...options.client,
      });
  const offers = options.offers ?? 1;
  const freeUnits = options.freeUnits ?? 1;
  try {
    await waitFor(
      `${offers === 1 ? "an offer" : `${offers} offers`} with ${freeUnits} free units in ${options.name}'s SDK`,
      async () => (await client.queryOffers()).filter((offer) => offer.freeUnits >= freeUnits).length >= offers,
      { timeoutMs: options.timeoutMs ?? 30_000 },
    );
  } catch (error) {
    await client.close().catch(() => undefined);
    throw error;
  }
  return client;
}
