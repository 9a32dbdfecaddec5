/**
 * What a client needs from where it runs. The Node entry (sdk/node.ts) provides all of it; the
 * browser entry (sdk/browser.ts) none, so a browser bundle never includes libp2p's TCP transport,
 * Node's file system or sockets.
 */
import type { Address, Chain, PublicClient, Transport } from "viem";
import type { Deployment, DeploymentBinding } from "../../common/deployment.js";
import type { MatchingOptionsInput } from "../../common/matching/options.js";
import type { OfferFeed } from "./feed.js";
import type { ProviderLink } from "./link.js";
import type { NodeDataActions } from "./checkpoint-copies.js";
import type { TaskStorage } from "./store.js";

/** The task I/O actions (output download, exec, port forwarding): libp2p streams, files and sockets. */
export type TaskIoActions = {
  downloadOutput: typeof import("../actions/downloadOutput.js").downloadOutput;
  execTask: typeof import("../actions/execTask.js").execTask;
  forwardPort: typeof import("../actions/forwardPort.js").forwardPort;
};

export type ClientPlatform = {
  /** Joins the network over libp2p: the live offer feed and direct links to providers. */
  startP2p?(parameters: {
    chainId: number;
    market: Address;
    registry: Address;
    publicClient: PublicClient<Transport, Chain>;
    bootstrap: string[];
    /** Follow offers over gossip; false: pull the book with offers-sync when needed. */
    gossip: boolean;
    matching: MatchingOptionsInput | undefined;
  }): Promise<{ feed: OfferFeed; link: ProviderLink }>;
  /** Reads deployments/<chainId>.json from `dir` (a default folder when undefined). */
  readDeployment?(dir: string | undefined, chainId: number): Promise<Deployment>;
  /** Task records kept in a file. */
  fileStorage?(file: string, binding: DeploymentBinding): TaskStorage;
  /**
   * Loads the task I/O actions. Node only: they write files (node:fs), listen on local ports
   * (node:net) and speak libp2p streams, none of which a browser bundle may pull in; without it,
   * `exec` and `forward` throw TaskIoUnsupportedError at once (`downloadOutput` goes through the node's relay).
   */
  taskIo?(): Promise<TaskIoActions>;
  /** Loads the node data actions (pin, list, remove on a node's HTTP API) that copy checkpoints to the renter's node. Node only (they use node:fs). */
  dataActions?(): Promise<NodeDataActions>;
};
