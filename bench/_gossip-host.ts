/**
 * A child process of the gossip benchmark (bench/gossip.ts) hosting some of its nodes, so that 50
 * nodes are not 50 libp2p stacks on one event loop: each process runs its nodes on its own
 * thread, as separate machines would. Driven over the IPC channel by the parent:
 *
 *   parent → child  { type: "start", first, count, providerKeys, bootstrap, attestorKey, p2p }
 *   child → parent  { type: "started", nodes: [{ index, addr, peerId }] }
 *   parent → child  { type: "register", providers: [{ privateKey, peerId, machines }] }  (every child's chain view learns every provider)
 *   parent → child  { type: "mesh" }                     → { type: "mesh", minPeers }
 *   parent → child  { type: "publish", index, provider, spec, round } → { type: "published", id }
 *   child → parent  { type: "arrival", id, index, at }    (at: ms since the epoch, sub-millisecond)
 *   parent → child  { type: "stop" }                     → { type: "stopped" }, then exits
 */
import { privateKeyToAccount } from "viem/accounts";
import type { Hex } from "viem";
import { offerKey, offersTopic } from "../common/offers/message.js";
import type { P2pOptions } from "../node/p2p/options.js";
import { MemoryChainView } from "../test/support/memory-chain-view.js";
import { startTestNode, type TestNode } from "../test/support/nodes.js";
import { TEST_CHAIN_ID, attest, machineRecord, type MachineSpec, type Signer } from "../test/support/offer-fixtures.js";

type Start = { type: "start"; first: number; count: number; providerKeys: Record<number, Hex>; bootstrap: string[]; attestorKey: Hex; p2p: Partial<P2pOptions> };
type Register = { type: "register"; providers: { address: Hex; peerId: string; machines: MachineSpec[] }[] };
type Publish = { type: "publish"; index: number; provider: Hex; spec: MachineSpec; round: number };
type Message = Start | Register | Publish | { type: "mesh" } | { type: "stop" };

const send = (message: unknown) => process.send!(message);
const epochMs = () => performance.timeOrigin + performance.now();

const chain = new MemoryChainView();
const nodes = new Map<number, TestNode>();
let attestor: Signer | undefined;

process.on("message", (raw: Message) => {
  handle(raw).catch((error: unknown) => {
    send({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  });
});
// The parent going away ends this process too (no orphaned nodes).
process.on("disconnect", () => process.exit(0));

async function handle(message: Message): Promise<void> {
  switch (message.type) {
    case "start": {
      const account = privateKeyToAccount(message.attestorKey);
      attestor = { privateKey: message.attestorKey, account, address: account.address };
      chain.addAttestor(account.address);
      const started: { index: number; addr: string; peerId: string }[] = [];
      for (let k = 0; k < message.count; k++) {
        const index = message.first + k;
        const providerKey = message.providerKeys[index];
        const node = await startTestNode({
          chain,
          dht: true,
          p2p: message.p2p,
          bootstrap: message.bootstrap,
          provider: providerKey ? privateKeyToAccount(providerKey) : undefined,
        });
        nodes.set(index, node);
        node.offers.book.on("offer", (entry) => send({ type: "arrival", id: `${entry.key}#${entry.seq}`, index, at: epochMs() }));
        started.push({ index, addr: node.addr, peerId: node.host.peerId.toString() });
      }
      send({ type: "started", nodes: started });
      return;
    }
    case "register":
      for (const provider of message.providers) {
        chain.registerProvider(provider.address, provider.peerId, 10n ** 12n);
        for (const spec of provider.machines) chain.declareMachine(spec.machineId, machineRecord(provider.address, spec));
      }
      send({ type: "registered" });
      return;
    case "mesh": {
      const topic = offersTopic(TEST_CHAIN_ID);
      send({ type: "mesh", minPeers: Math.min(...[...nodes.values()].map((node) => node.pubsub.getMeshPeers(topic).length)) });
      return;
    }
    case "publish": {
      const node = nodes.get(message.index)!;
      const spec = message.spec;
      const published = await node.offers.publisher!.set({
        machine: { ...spec },
        terms: { pricePerUnitSecond: BigInt(1_000 + message.round), minDuration: 60, maxDuration: 86_400, collateralBps: 1_000, startWindow: 300 },
        capacity: { freeUnits: spec.units - (message.round % spec.units) },
        attestations: [attest(attestor!, message.provider, spec)],
      });
      send({ type: "published", id: published ? `${offerKey(published.offer.provider, published.offer.machineId)}#${published.seq}` : null });
      return;
    }
    case "stop":
      await Promise.all([...nodes.values()].map((node) => node.stop({ removeDir: true })));
      send({ type: "stopped" });
      process.exit(0);
  }
}
