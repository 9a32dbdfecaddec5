/**
 * What a client needs from where it runs. The Node entry (sdk/node.ts) provides all of it; the
 * browser entry (sdk/browser.ts) none, so a browser bundle never includes libp2p's TCP transport
 * or Node's file system.
 */
import type { Address, Chain, PublicClient, Transport } from "viem";
import type { Deployment, DeploymentBinding } from "../../common/deployment.js";
import type { MatchingOptionsInput } from "../../common/matching/options.js";
import type { OfferFeed } from "./feed.js";
import type { ProviderLink } from "./link.js";
import type { TaskStorage } from "./store.js";

export type ClientPlatform = {
  /** Joins the network over libp2p: the live offer feed and direct links to providers. */
  startP2p?(parameters: {
    chainId: number;
    market: Address;
    registry: Address;
    publicClient: PublicClient<Transport, Chain>;
    bootstrap: string[];
    matching: MatchingOptionsInput | undefined;
  }): Promise<{ feed: OfferFeed; link: ProviderLink }>;
  /** Reads deployments/<chainId>.json from `dir` (a default folder when undefined). */
  readDeployment?(dir: string | undefined, chainId: number): Promise<Deployment>;
  /** Task records kept in a file. */
  fileStorage?(file: string, binding: DeploymentBinding): TaskStorage;
};
