import assert from "node:assert/strict";
import { multiaddr } from "@multiformats/multiaddr";
import { providerRegistryAbi } from "../../common/abi.js";
import { devnetPrivateKey } from "../../common/devnet.js";
import { offerKey } from "../../common/offers/message.js";
import { registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";
import { startTestDaemon } from "../support/daemons.js";
import { waitFor } from "../support/wait.js";

const ZERO32 = `0x${"0".repeat(64)}` as const;

describe("nodes over the real registry: offers validated on-chain", function () {
  this.timeout(90_000);
  let devnet: Devnet;
  before(async () => {
    devnet = await startDevnet();
  });
  after(async () => devnet?.close());

  it("an offer of a registered, staked provider reaches another node; deregistration evicts it", async () => {
    const provider = await startTestDaemon(devnet, { chain: { privateKey: devnetPrivateKey(1) } }, { publishesOffers: true });
    const renterNode = await startTestDaemon(devnet, { p2p: { bootstrap: [provider.p2p.host.getMultiaddrs()[0]!.toString()] } });
    try {
      const wallet = await devnet.wallet(1);
      const [machineId] = await registerProvider(devnet, wallet, {
        peerId: provider.p2p.host.peerId.toString(),
        stake: 100_000_000n,
        machines: [{ model: "A100-80GB", units: 4, vramMiB: 81_920 }],
      });
      await renterNode.p2p.host.dial(multiaddr(provider.p2p.host.getMultiaddrs()[0]!.toString()));
      await provider.offers.publisher!.set({
        machine: { machineId: machineId!, model: "A100-80GB", units: 4, vramMiB: 81_920, interconnect: "nvlink", region: "eu-west", cluster: ZERO32 },
        terms: { pricePerUnitSecond: 300n, minDuration: 60, maxDuration: 86_400, collateralBps: 2_000, startWindow: 120 },
        capacity: { freeUnits: 4 },
      });
      const key = offerKey(wallet.account.address, machineId!);
      const entry = await waitFor("the offer on the renter's node", () => renterNode.offers.book.get(key), { timeoutMs: 15_000 });
      assert.equal(entry.message.offer.pricePerUnitSecond, 300n);
      assert.equal(entry.message.machine.model, "A100-80GB");

      // Deregistration on-chain: the renter's node hears it through its chain watcher and evicts.
      const registry = devnet.deployment.contracts.registry!;
      await send(wallet, { address: registry, abi: providerRegistryAbi, functionName: "removeMachine", args: [machineId!] });
      await send(wallet, { address: registry, abi: providerRegistryAbi, functionName: "deregister", args: [] });
      await waitFor("eviction after deregistration", () => renterNode.offers.book.get(key) === undefined, { timeoutMs: 15_000 });
    } finally {
      await renterNode.close();
      await provider.close();
    }
  });
});
