/**
 * Real Suanli nodes for tests: the node's own config schema, a temp data dir, libp2p on
 * 127.0.0.1 with a random port, the devnet chain from ./devnet.ts.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { nodeConfigSchema, type NodeConfig } from "../../node/config/schema.js";
import { startApi, type ApiModule } from "../../node/api/start.js";
import { startGateway, type GatewayModule } from "../../node/gateway/start.js";
import { startSponsor, type SponsorModule } from "../../node/sponsor/start.js";
import { startDaemon, type Daemon, type StartDaemonOptions } from "../../node/daemon.js";
import { silentLogger } from "../../node/log/logger.js";
import type { Devnet } from "./devnet.js";
import { merge } from "./merge.js";

export type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? DeepPartial<T[K]> : T[K] };

/**
 * A node config for tests: devnet chain, loopback p2p, fast polling, quiet logs. The data dir is a
 * new temporary folder unless the overrides name one (a test that restarts a node on its folder):
 * an unused temporary folder would be left in /tmp by every such start.
 */
export async function testNodeConfig(devnet: Devnet, overrides: Record<string, unknown> = {}): Promise<NodeConfig> {
  const dataDir = typeof overrides.dataDir === "string" ? overrides.dataDir : await mkdtemp(path.join(tmpdir(), "suanli-node-"));
  const base = {
    dataDir,
    log: { level: process.env.SUANLI_TEST_LOG ?? "silent" },
    chain: { rpcUrl: devnet.rpcUrl, deploymentsDir: devnet.deploymentsDir, pollingIntervalMs: 100 },
    p2p: {
      listen: ["/ip4/127.0.0.1/tcp/0"],
      allowPrivateAddresses: true,
      dht: { enabled: false },
      gossip: { heartbeatIntervalMs: 200, ipColocationWhitelist: ["127.0.0.1"] },
      connections: { inboundPerSecondPerHost: 1000 },
    },
    offers: { sweepIntervalMs: 200 },
  };
  return nodeConfigSchema.parse(merge(base, overrides));
}

/**
 * Starts a daemon on a test config, with the HTTP API when the config enables it (as `runNode`
 * does); `close` stops it and removes its data dir unless kept.
 */
export async function startTestDaemon(
  devnet: Devnet,
  overrides: Record<string, unknown> = {},
  options: StartDaemonOptions = {},
): Promise<
  Daemon & { api: ApiModule | undefined; gateway: GatewayModule | undefined; sponsor: SponsorModule | undefined; close(options?: { keepData?: boolean }): Promise<void> }
> {
  const config = await testNodeConfig(devnet, overrides);
  // A start that fails removes the temporary data dir it made (never a folder the test named).
  const removeOwnDir = () => (config.dataDir === overrides.dataDir ? Promise.resolve() : rm(config.dataDir, { recursive: true, force: true }));
  const daemon = await startDaemon(config, { logger: silentLogger(), ...options }).catch(async (error: unknown) => {
    await removeOwnDir();
    throw error;
  });
  let api: ApiModule | undefined;
  let gateway: GatewayModule | undefined;
  let sponsor: SponsorModule | undefined;
  try {
    if (config.api.enabled) daemon.attach((api = await startApi(daemon)));
    if (config.gateway.enabled) daemon.attach((gateway = await startGateway(daemon)));
    if (config.sponsor.enabled) daemon.attach((sponsor = await startSponsor(daemon)));
  } catch (error) {
    await daemon.stop();
    await removeOwnDir();
    throw error;
  }
  return Object.assign(daemon, {
    api,
    gateway,
    sponsor,
    async close({ keepData = false }: { keepData?: boolean } = {}) {
      await daemon.stop();
      if (!keepData) await rm(config.dataDir, { recursive: true, force: true });
    },
  });
}
