import { mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Command } from "commander";
import { DEVNET_MNEMONIC, devnetAccount } from "../../../common/devnet.js";
import { connectChain } from "../../chain/clients.js";
import { deployContracts } from "../../chain/deploy.js";
import { startEmbeddedChain } from "../../chain/embedded.js";
import { DEFAULT_DEPLOYMENTS_DIR, writeDeployment } from "../../chain/manifest.js";
import { nodeConfigSchema } from "../../config/schema.js";
import { startDevnetAttestors, type DevnetAttestors } from "../../devnet/attestors.js";
import { startDevnetBundler, type Bundler } from "../../devnet/bundler.js";
import { DEVNET_ATTESTOR_INDEX, startDemoProviders, type DemoProviders } from "../../demo/devnet-providers.js";
import { freePort } from "../../demo/processes.js";
import { loadNodeKey } from "../../gateway/key.js";
import { SPONSOR_KEY_FILE } from "../../sponsor/start.js";
import { createLogger } from "../../log/logger.js";
import { CliError, emit, ExitCode, progress } from "../output.js";
import { runNode, type RunningNode } from "../../run.js";
import { waitForShutdown } from "../../signals.js";

/** What the devnet's SponsorPaymaster gets in its EntryPoint deposit: 100 ETH of the deployer's 10,000. */
const DEVNET_SPONSOR_DEPOSIT_WEI = 100n * 10n ** 18n;

function portOption(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new CliError(`${flag} must be an integer from 0 to 65535, got "${value}"`, ExitCode.usage);
  }
  return port;
}

/** The sponsor key of the node whose data dir is `dir` (made there, 0600, when it has none): the node loads the same one. */
async function sponsorKeyIn(dir: string) {
  await mkdir(dir, { recursive: true });
  return loadNodeKey(dir, SPONSOR_KEY_FILE, "sponsor");
}

/** A port given as 0 becomes a free one, picked now (its URL is needed before the service starts). */
async function freeIfZero(port: number | undefined): Promise<number | undefined> {
  return port === 0 ? freePort() : port;
}

type DevnetFlags = {
  port: string;
  deployments: string;
  apiPort?: string;
  p2pPort?: string;
  dataDir?: string;
  demoOffers?: boolean;
  attestors: string;
  attestorNodes?: string;
  bundler: boolean;
  bundlerPort: string;
  sponsor: boolean;
  sponsorPort?: string;
  json?: boolean;
};

export function registerDevnet(program: Command): void {
  program
    .command("devnet")
    .description("start a local chain on 127.0.0.1 with the Suanli contracts deployed, optionally a node serving the HTTP API, and keep it running")
    .option("--port <port>", "JSON-RPC port", "8545")
    .option("--deployments <dir>", "where to write the deployment manifest", DEFAULT_DEPLOYMENTS_DIR)
    .option("--api-port <port>", "also run a Suanli node on the devnet serving the HTTP API, explorer and renter console on 127.0.0.1:<port>")
    .option("--p2p-port <port>", "with --api-port: the node's libp2p TCP port on 127.0.0.1 (default: any free port)")
    .option("--data-dir <dir>", "where the attestor nodes, the API node and demo providers keep their data (default: a temporary folder, removed at exit)")
    .option("--demo-offers", "with --api-port: also run three provider nodes that register on-chain and publish signed, attested offers")
    .option("--attestors <accounts>", 'devnet accounts granted ATTESTOR_ROLE, comma-separated ("" for none)', "7,8,9")
    .option(
      "--attestor-nodes <accounts>",
      'devnet accounts whose attestor nodes run here, on 127.0.0.1:41NN (NN the account number) with fixed peer ids, challenging and attesting every offered machine (default: all of --attestors; "" for none)',
    )
    .option("--bundler-port <port>", "the ERC-4337 bundler's JSON-RPC port (Alto, held to 127.0.0.1 by a loopback preload; 0: any free port)", "4337")
    .option(
      "--sponsor-port <port>",
      "with --api-port: the port of the API node's gas sponsor (ERC-7677 paymaster service, docs/aa.md; 0: any free port) (default: 8095; any free port with --api-port 0)",
    )
    .option("--no-sponsor", "with --api-port: run no gas sponsor and deploy no SponsorPaymaster (smart accounts then pay their gas in ETH)")
    .option("--no-bundler", "run no ERC-4337 bundler (EntryPoint v0.8 and SimpleAccountFactory are deployed all the same)")
    .option("--json", "print the devnet description as JSON")
    .action(async (options: DevnetFlags) => {
      const attestorIndexes = options.attestors.trim() === "" ? [] : options.attestors.split(",").map((part) => Number(part.trim()));
      if (attestorIndexes.some((index) => !Number.isInteger(index) || index < 0 || index > 999)) {
        throw new CliError(`--attestors takes devnet account numbers like "7,8,9", got "${options.attestors}"`, ExitCode.usage);
      }
      const nodeIndexes =
        options.attestorNodes === undefined ? [...attestorIndexes] : options.attestorNodes.trim() === "" ? [] : options.attestorNodes.split(",").map((part) => Number(part.trim()));
      for (const index of nodeIndexes) {
        if (!attestorIndexes.includes(index)) {
          throw new CliError(`--attestor-nodes takes accounts among --attestors (${options.attestors || "none"}): account "${index}" would not hold ATTESTOR_ROLE`, ExitCode.usage);
        }
      }
      if (options.demoOffers && !attestorIndexes.includes(DEVNET_ATTESTOR_INDEX)) attestorIndexes.push(DEVNET_ATTESTOR_INDEX);
      const port = portOption(options.port, "--port")!;
      // A free port picked now when 0: the sponsor's CORS names the console's origin before the node starts.
      const apiPort = await freeIfZero(portOption(options.apiPort, "--api-port"));
      const p2pPort = portOption(options.p2pPort, "--p2p-port");
      const bundlerPort = portOption(options.bundlerPort, "--bundler-port")!;
      // The API node sponsors smart accounts' gas (docs/aa.md "Gas without ETH"): a renter with tUSD and no ETH rents.
      const sponsorPort =
        apiPort !== undefined && options.sponsor ? await freeIfZero(portOption(options.sponsorPort ?? (options.apiPort === "0" ? "0" : "8095"), "--sponsor-port")) : undefined;
      for (const [flag, given] of [
        ["--demo-offers", options.demoOffers],
        ["--p2p-port", options.p2pPort],
        ["--sponsor-port", options.sponsorPort],
      ] as const) {
        if (given !== undefined && given !== false && apiPort === undefined) throw new CliError(`${flag} needs --api-port`, ExitCode.usage);
      }
      const json = Boolean(options.json);
      progress(json, "Starting the embedded chain...");
      const chain = await startEmbeddedChain({ port });
      let node: RunningNode | undefined;
      let demo: DemoProviders | undefined;
      let shutdownSignal: Promise<NodeJS.Signals> | undefined;
      let attestors: DevnetAttestors | undefined;
      let bundler: Bundler | undefined;
      let tempDir: string | undefined;
      const shutdown = async () => {
        await demo?.stop();
        await node?.stop();
        await attestors?.stop();
        await bundler?.stop();
        await chain.close();
        if (tempDir) await rm(tempDir, { recursive: true, force: true });
      };
      try {
        const clients = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0) });
        let cleared = false;
        const dataDirOf = async () => {
          if (!options.dataDir) return (tempDir ??= await mkdtemp(path.join(tmpdir(), "suanli-devnet-")));
          const dir = path.resolve(options.dataDir);
          if (!cleared) {
            // Each devnet is a new chain: its own nodes' databases of the previous one are stale
            // (and would be refused as another deployment's); identities and logs are kept.
            cleared = true;
            const entries = await readdir(dir).catch(() => [] as string[]);
            for (const entry of entries) {
              if (/^(node|attestor-\d+|provider-\d+)$/.test(entry)) await rm(path.join(dir, entry, "db"), { recursive: true, force: true });
            }
          }
          return dir;
        };
        // The API node's sponsor key, made now in its data dir: the paymaster is deployed with it as its signer.
        const sponsorKey = sponsorPort !== undefined ? await sponsorKeyIn(path.join(await dataDirOf(), "node")) : undefined;
        const deployment = await deployContracts({
          publicClient: clients.publicClient,
          walletClient: clients.walletClient!,
          // The demo's attestations are signed by a devnet wallet that needs the role.
          attestors: attestorIndexes.map((index) => devnetAccount(index).address),
          // ERC-4337 for smart-account renters (docs/aa.md).
          accountAbstraction: true,
          ...(sponsorKey ? { sponsor: { signer: sponsorKey.address, depositWei: DEVNET_SPONSOR_DEPOSIT_WEI } } : {}),
        });
        const manifest = await writeDeployment(options.deployments, deployment);
        const accounts = Array.from({ length: 10 }, (_, i) => devnetAccount(i).address);

        let apiUrl: string | undefined;
        let nodeAddrs: string[] = [];
        const logger = createLogger({ level: "warn" });
        if (options.bundler) {
          progress(json, "Starting the ERC-4337 bundler (Alto)...");
          bundler = await startDevnetBundler({ rpcUrl: chain.rpcUrl, entryPoint: deployment.contracts.entryPoint!, ...(bundlerPort ? { port: bundlerPort } : {}) });
        }
        if (nodeIndexes.length) {
          progress(json, `Starting attestor nodes (accounts ${nodeIndexes.join(", ")})...`);
          attestors = await startDevnetAttestors({ rpcUrl: chain.rpcUrl, deploymentsDir: options.deployments, indexes: nodeIndexes, dataDir: await dataDirOf(), logger });
        }
        if (apiPort !== undefined) {
          progress(json, "Starting a node with the HTTP API...");
          const dataDir = await dataDirOf();
          const config = nodeConfigSchema.parse({
            dataDir: path.join(dataDir, "node"),
            log: { level: "warn" },
            chain: { rpcUrl: chain.rpcUrl, deploymentsDir: options.deployments, pollingIntervalMs: 250 },
            p2p: {
              listen: [`/ip4/127.0.0.1/tcp/${p2pPort ?? 0}`],
              bootstrap: attestors?.nodes.map((attestor) => attestor.addr) ?? [],
              allowPrivateAddresses: true,
              gossip: { ipColocationWhitelist: ["127.0.0.1"] },
              connections: { inboundPerSecondPerHost: 100 },
            },
            // The console's passkey sign-in sends user operations to the devnet's Alto (docs/console.md).
            api: {
              enabled: true,
              host: "127.0.0.1",
              port: apiPort,
              console: { ...(bundler ? { bundlerUrl: bundler.url } : {}), ...(sponsorPort !== undefined ? { paymasterUrl: `http://127.0.0.1:${sponsorPort}` } : {}) },
            },
            // Its CORS lets the console's page (either name of this host) call it, and no other page.
            ...(sponsorPort !== undefined
              ? { sponsor: { enabled: true, host: "127.0.0.1", port: sponsorPort, corsOrigins: [`http://localhost:${apiPort}`, `http://127.0.0.1:${apiPort}`] } }
              : {}),
          });
          node = await runNode(config, { api: true }, { logger });
          apiUrl = node.api!.url;
          nodeAddrs = node.daemon.p2p.host.getMultiaddrs().map(String);
          if (options.demoOffers) {
            progress(json, "Starting demo providers (registering on-chain, publishing offers)...");
            demo = await startDemoProviders({
              rpcUrl: chain.rpcUrl,
              deploymentsDir: options.deployments,
              deployment,
              dataDir,
              bootstrap: nodeAddrs[0]!,
              intervalMs: 5000,
              logger,
            });
          }
        }

        shutdownSignal = waitForShutdown(); // before the ready line: a SIGTERM right after it stops the devnet cleanly
        emit(
          json,
          {
            rpcUrl: chain.rpcUrl,
            chainId: deployment.chainId,
            manifest,
            contracts: deployment.contracts,
            accounts,
            attestors: attestorIndexes.map((index) => devnetAccount(index).address),
            attestorNodes: attestors?.nodes.map((attestor) => ({ account: attestor.index, address: devnetAccount(attestor.index).address, addr: attestor.addr })) ?? [],
            apiUrl: apiUrl ?? null,
            bundlerUrl: bundler?.url ?? null,
            sponsorUrl: node?.sponsor?.url ?? null,
            sponsorAddress: node?.sponsor?.address ?? null,
            node: node ? { peerId: node.daemon.p2p.host.peerId.toString(), addrs: nodeAddrs } : null,
            demoProviders: demo ? demo.providers.map((provider) => provider.account!.address) : [],
          },
          () =>
            [
              `Devnet running at ${chain.rpcUrl} (chain ${deployment.chainId})`,
              ...(attestors?.nodes.length
                ? [
                    "Attestor nodes (challenge and attest every offered machine; bootstrap from any):",
                    ...attestors.nodes.map((attestor) => `  #${attestor.index} ${attestor.addr}`),
                  ]
                : []),
              ...(bundler ? [`ERC-4337 bundler (Alto, safe mode off: docs/aa.md) at ${bundler.url} for EntryPoint ${deployment.contracts.entryPoint}`] : []),
              ...(node?.sponsor ? [`Gas sponsor (ERC-7677 paymaster service) at ${node.sponsor.url}: smart accounts with tUSD and no ETH rent (docs/aa.md)`] : []),
              ...(apiUrl ? [`HTTP API at ${apiUrl}/v1/ (OpenAPI: ${apiUrl}/openapi.json), explorer at ${apiUrl}/explorer/, renter console at ${apiUrl}/console/`] : []),
              ...(node ? [`Node ${node.daemon.p2p.host.peerId} (bootstrap other nodes with ${nodeAddrs[0]})`] : []),
              ...(demo
                ? [
                    `Demo providers publishing offers: ${demo.providers.map((provider) => provider.account!.address).join(", ")}`,
                    "  (offers to browse only: they run no provider agent, so they take no reservations; run `npx suanli provider start` for one you can rent)",
                  ]
                : []),
              `Contracts (manifest ${manifest}):`,
              ...Object.entries(deployment.contracts).map(([role, address]) => `  ${role.padEnd(21)} ${address}`),
              `Funded accounts (mnemonic "${DEVNET_MNEMONIC}"):`,
              ...accounts.map((address, i) => `  #${i} ${address}${attestorIndexes.includes(i) ? " (attestor)" : ""}`),
              "Press Ctrl-C to stop.",
            ].join("\n"),
        );
      } catch (error) {
        await shutdown().catch(() => undefined);
        throw error;
      }
      await (shutdownSignal ?? waitForShutdown());
      await shutdown();
    });
}
