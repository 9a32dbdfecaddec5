/**
 * A provider node for tests: a real daemon (devnet chain, libp2p on 127.0.0.1, level in a temp
 * dir) with the provider agent, a declared inventory and the process runtime, tuned for speed
 * (short grace periods, fast polling and claims).
 */
import { devnetPrivateKey } from "../../common/devnet.js";
import { createLogger } from "../../node/log/logger.js";
import { startProviderAgent, type ProviderAgent, type ProviderAgentOptions } from "../../node/provider/agent.js";
import { startTestDaemon } from "./daemons.js";
import { fund, type Devnet } from "./devnet.js";
import { providerPeer, type ProviderPeer } from "./renter.js";
import { merge } from "./merge.js";

export type TestProvider = {
  daemon: Awaited<ReturnType<typeof startTestDaemon>>;
  agent: ProviderAgent;
  peer: ProviderPeer;
  close(options?: { keepData?: boolean }): Promise<void>;
};

/** The provider config the tests share; `overrides` is merged key by key. */
export function testProviderConfig(index: number, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return merge(
    {
      chain: { privateKey: devnetPrivateKey(index) },
      provider: {
        inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 2, region: "eu-west" }] },
        prices: { "A100-80GB": { pricePerUnitSecond: "100" } },
        // Test tasks run the test's own node binary and read bundles from 127.0.0.1 or files:
        // sandboxing is tested in provider-sandbox.test.ts, the fetch policy in provider-fetch-policy.test.ts.
        runtime: { sandbox: "none" },
        fetch: { allowFileUrls: true, allowNetworks: ["127.0.0.1"] },
        grace: { taskStopMs: 300, idleStopMs: 300, preemptionNoticeMs: 1_000 },
        chain: { stakeTarget: "1000" },
        terms: { startWindowSeconds: 300, minDurationSeconds: 1 },
        claims: { intervalMs: 300, minAmount: "1" },
        leases: { reconcileIntervalMs: 200, cancelGraceSeconds: 1 },
      },
    },
    overrides,
  );
}

/** Funds devnet account `index` (for the stake) and starts a provider node on it. */
export async function startTestProvider(
  devnet: Devnet,
  index: number,
  overrides: Record<string, unknown> = {},
  options: { fundTokens?: bigint; agent?: ProviderAgentOptions } = {},
): Promise<TestProvider> {
  const wallet = await devnet.wallet(index);
  const tokens = options.fundTokens ?? 2_000_000_000n;
  if (tokens > 0n) await fund(devnet, wallet, tokens);
  const daemon = await startTestDaemon(devnet, testProviderConfig(index, overrides), {
    publishesOffers: true,
    // SUANLI_TEST_LOG=debug shows the node's logs while debugging a test.
    logger: createLogger({ level: (process.env.SUANLI_TEST_LOG as "debug" | undefined) ?? "silent" }),
  });
  try {
    const agent = await startProviderAgent(daemon, options.agent);
    return {
      daemon,
      agent,
      peer: providerPeer(wallet.account.address, daemon.p2p.host.getMultiaddrs().map(String)),
      close: (closeOptions) => daemon.close(closeOptions),
    };
  } catch (error) {
    await daemon.close();
    throw error;
  }
}
