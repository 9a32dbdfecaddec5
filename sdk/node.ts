/**
 * createClient for Node: libp2p over TCP, deployment manifests and task records from files.
 */
import { parseDeployment, type Deployment } from "../common/deployment.js";
import { ClientConfigError, createClientWith, type CreateClientParameters, type SuanliClient } from "./client.js";
import type { ClientPlatform } from "./internal/platform.js";
import { fileTaskStorage } from "./internal/file-storage.js";

const nodePlatform: ClientPlatform = {
  async startP2p(parameters) {
    // Loaded only when used: a client with `nodeUrl` never starts libp2p.
    const { startP2pFeed } = await import("./internal/feed.js");
    const { p2pLink } = await import("./internal/link.js");
    const feed = await startP2pFeed(parameters);
    return { feed, link: p2pLink(feed.host!) };
  },
  async readDeployment(dir, chainId): Promise<Deployment> {
    const { readFile } = await import("node:fs/promises");
    const path = await import("node:path");
    const { fileURLToPath } = await import("node:url");
    const folder = dir ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../deployments");
    const file = path.join(folder, `${chainId}.json`);
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch {
      throw new ClientConfigError(`No deployment manifest for chain ${chainId} at ${file}`, {
        metaMessages: ["Pass `deployment` (the manifest object or its folder); on a devnet, `npm run devnet` writes deployments/31337.json."],
      });
    }
    const deployment = parseDeployment(JSON.parse(text), file);
    if (deployment.chainId !== chainId) throw new ClientConfigError(`${file} is for chain ${deployment.chainId}, but the RPC serves chain ${chainId}`);
    return deployment;
  },
  fileStorage: fileTaskStorage,
  async taskIo() {
    // Loaded only when used, and only here: they need node:fs, node:net and libp2p streams.
    const [{ downloadOutput }, { execTask }, { forwardPort }] = await Promise.all([
      import("./actions/downloadOutput.js"),
      import("./actions/execTask.js"),
      import("./actions/forwardPort.js"),
    ]);
    return { downloadOutput, execTask, forwardPort };
  },
  async dataActions() {
    const [{ pinData }, { removeData }, { listData }] = await Promise.all([import("./actions/pinData.js"), import("./actions/removeData.js"), import("./actions/listData.js")]);
    return { pinData, removeData, listData };
  },
};

/**
 * Creates a Suanli client. In Node it joins the network through `bootstrap` (libp2p), keeps the
 * live offers it validates in a local matching engine, and talks to providers directly; the
 * wallet signs every request and pays deposits. With `nodeUrl` it uses that node's HTTP API
 * instead, as in a browser.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * import { privateKeyToAccount } from "viem/accounts";
 *
 * const client = await createClient({
 *   rpcUrl: "http://127.0.0.1:8545",
 *   account: privateKeyToAccount(process.env.SUANLI_KEY as `0x${string}`),
 *   bootstrap: ["/ip4/127.0.0.1/tcp/4001/p2p/12D3KooW..."],
 * });
 * const { taskId } = await client.submitTask({ gpuType: "A100", gpuCount: 1, duration: 600,
 *   maxPricePerGpuHour: "2.5", bundleUrl, sha256, command: "python train.py" });
 * for await (const line of client.logs(taskId)) console.log(line.text);
 * console.log(await client.wait(taskId));
 * await client.close();
 */
export function createClient(parameters: CreateClientParameters): Promise<SuanliClient> {
  return createClientWith(nodePlatform, parameters);
}
