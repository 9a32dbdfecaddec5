/**
 * createClient for browsers: everything goes through a node's HTTP API (`nodeUrl`); no libp2p, no files.
 */
import { createClientWith, type CreateClientParameters, type SuanliClient } from "./client.js";

/**
 * Creates a Suanli client in a browser. Offers come from the node at `nodeUrl`, requests to
 * providers go through its relay routes, and the user's wallet (an EIP-1193 provider such as
 * `window.ethereum`) signs every request and sends every transaction. Pass the deployment
 * manifest object as `deployment`.
 *
 * @example
 * import { createClient } from "suanli/sdk/browser";
 * import { custom } from "viem";
 *
 * const [address] = await window.ethereum.request({ method: "eth_requestAccounts" });
 * const client = await createClient({
 *   rpcUrl: "https://rpc.example.org",
 *   nodeUrl: "https://node.example.org",
 *   account: address,
 *   walletTransport: custom(window.ethereum),
 *   deployment, // the manifest object: fetch(`${nodeUrl}/...`) or import it
 * });
 * const offers = await client.queryOffers({ gpuType: "A100" });
 */
export function createClient(parameters: CreateClientParameters): Promise<SuanliClient> {
  return createClientWith({}, parameters);
}
