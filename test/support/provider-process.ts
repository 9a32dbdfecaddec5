/**
 * A provider node in its own process, for tests that must kill a provider abruptly (SIGKILL):
 * a real daemon that answers the attest and liveness protocols with the wallet it is given.
 * Run with `node --import tsx test/support/provider-process.ts '<json>'`; it prints one line
 * `READY {"peerId":…,"addrs":[…]}` once it listens, then runs until killed.
 */
import { mountProviderAttestation } from "../../node/attest/provider-service.js";
import { CpuRunner } from "../../node/attest/runner/cpu.js";
import { nodeConfigSchema } from "../../node/config/schema.js";
import { startDaemon } from "../../node/daemon.js";
import { silentLogger } from "../../node/log/logger.js";

type Input = { dataDir: string; rpcUrl: string; deploymentsDir: string; privateKey: string };

const input = JSON.parse(process.argv[2] ?? "{}") as Input;
const config = nodeConfigSchema.parse({
  dataDir: input.dataDir,
  log: { level: "silent" },
  chain: { rpcUrl: input.rpcUrl, deploymentsDir: input.deploymentsDir, privateKey: input.privateKey, pollingIntervalMs: 100 },
  p2p: {
    listen: ["/ip4/127.0.0.1/tcp/0"],
    allowPrivateAddresses: true,
    dht: { enabled: false },
    gossip: { heartbeatIntervalMs: 200, ipColocationWhitelist: ["127.0.0.1"] },
    connections: { inboundPerSecondPerHost: 1000 },
  },
});
const daemon = await startDaemon(config, { publishesOffers: true, logger: silentLogger() });
const runner = new CpuRunner({ workers: 1 });
daemon.attach(await mountProviderAttestation(daemon, { runner, machines: [] }));
process.once("SIGTERM", () => {
  void daemon.stop().then(() => runner.close()).finally(() => process.exit(0));
});
process.stdout.write(`READY ${JSON.stringify({ peerId: daemon.p2p.host.peerId.toString(), addrs: daemon.p2p.host.getMultiaddrs().map(String) })}\n`);
