/**
 * The devnet's attestor nodes (`suanli devnet`, accounts 7, 8 and 9 by default): real attestor
 * daemons that challenge every machine they see offered and sign the attestations renters
 * require, so a provider started on the devnet gets attested offers without anything else to run.
 *
 * Each listens on a fixed port (4100 + the account number) with a fixed libp2p identity derived
 * from the account number, like the devnet's well-known wallets: a config can name them before
 * the devnet runs (examples/provider.devnet.json bootstraps from them) and a renter can join the
 * network through them. The keys have no value anywhere.
 */
import { createHash } from "node:crypto";
import { mkdir, open } from "node:fs/promises";
import path from "node:path";
import { generateKeyPairFromSeed, privateKeyToProtobuf } from "@libp2p/crypto/keys";
import { peerIdFromPrivateKey } from "@libp2p/peer-id";
import { devnetPrivateKey } from "../../common/devnet.js";
import { nodeConfigSchema } from "../config/schema.js";
import type { Daemon } from "../daemon.js";
import { runNode } from "../run.js";
import type { Logger } from "../log/logger.js";

/** The port of devnet account `index`'s attestor node. */
export function devnetAttestorPort(index: number): number {
  return 4100 + index;
}

async function devnetPeerKey(index: number) {
  const seed = createHash("sha256").update(`suanli devnet attestor node ${index}`).digest();
  return generateKeyPairFromSeed("Ed25519", new Uint8Array(seed));
}

/** The libp2p address of devnet account `index`'s attestor node, `/ip4/127.0.0.1/tcp/41NN/p2p/<peer id>`. */
export async function devnetAttestorAddr(index: number): Promise<string> {
  return `/ip4/127.0.0.1/tcp/${devnetAttestorPort(index)}/p2p/${peerIdFromPrivateKey(await devnetPeerKey(index)).toString()}`;
}

export type DevnetAttestors = { nodes: { index: number; daemon: Daemon; addr: string }[]; stop(): Promise<void> };

/**
 * Starts one attestor node per devnet account in `indexes` (each must hold ATTESTOR_ROLE), data
 * under `<dataDir>/attestor-<n>`, each bootstrapping from the others.
 *
 * @example
 * const attestors = await startDevnetAttestors({ rpcUrl, deploymentsDir, indexes: [7, 8, 9], dataDir, logger });
 * console.log(attestors.nodes.map((node) => node.addr));
 * await attestors.stop();
 */
export async function startDevnetAttestors(parameters: { rpcUrl: string; deploymentsDir: string; indexes: number[]; dataDir: string; logger: Logger }): Promise<DevnetAttestors> {
  const addrs = await Promise.all(parameters.indexes.map((index) => devnetAttestorAddr(index)));
  const nodes: DevnetAttestors["nodes"] = [];
  const stop = async () => {
    for (const node of nodes.splice(0).reverse()) await node.daemon.stop().catch(() => undefined);
  };
  try {
    for (const [i, index] of parameters.indexes.entries()) {
      const dataDir = path.join(parameters.dataDir, `attestor-${index}`);
      await mkdir(dataDir, { recursive: true, mode: 0o700 });
      // The fixed identity is written where the node looks for its key (0600, as it requires).
      const handle = await open(path.join(dataDir, "peer.key"), "w", 0o600);
      try {
        await handle.writeFile(privateKeyToProtobuf(await devnetPeerKey(index)));
      } finally {
        await handle.close();
      }
      const config = nodeConfigSchema.parse({
        dataDir,
        log: { level: "warn" },
        chain: { rpcUrl: parameters.rpcUrl, deploymentsDir: parameters.deploymentsDir, privateKey: devnetPrivateKey(index), pollingIntervalMs: 250 },
        p2p: {
          listen: [`/ip4/127.0.0.1/tcp/${devnetAttestorPort(index)}`],
          bootstrap: addrs.filter((_, j) => j !== i),
          allowPrivateAddresses: true,
          dht: { enabled: false },
          gossip: { heartbeatIntervalMs: 300, ipColocationWhitelist: ["127.0.0.1"] },
          connections: { inboundPerSecondPerHost: 100 },
        },
        attest: { challenge: { preset: "cpu-devnet" }, runner: { kind: "cpu", workers: 1 }, attestor: { scheduleIntervalMs: 5_000 } },
      });
      const { daemon } = await runNode(config, { attestor: true, api: false }, { logger: parameters.logger.child({ devnetAttestor: index }) });
      nodes.push({ index, daemon, addr: addrs[i]! });
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes, stop };
}
