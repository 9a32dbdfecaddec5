/**
 * Protocol ids of Suanli's libp2p protocols. Versioned: a breaking change to a message format
 * gets a new major version and nodes serve old and new ids side by side while the network
 * upgrades. Gossip topics carry the chain id (`offersTopic(chainId)` in common/offers/message.ts);
 * request/response bodies that depend on a chain carry it in the body.
 */

/** Kademlia DHT namespace: Suanli nodes find each other without joining the public IPFS DHT. */
export const KAD_PROTOCOL = "/suanli/kad/1.0.0";

/** A node that just joined asks a peer for the offers it holds, page by page. */
export const OFFERS_SYNC_PROTOCOL = "/suanli/offers-sync/1.0.0";

/** A renter asks a provider to hold units; the provider answers with a signed acceptance or a reason. */
export const RESERVE_PROTOCOL = "/suanli/reserve/1.0.0";

/** The renter sends the task spec once its lease is open. */
export const TASK_PROTOCOL = "/suanli/task/1.0.0";

/** Lease status and heartbeats (usage, GPU metrics). */
export const STATUS_PROTOCOL = "/suanli/status/1.0.0";

/** Task logs. */
export const LOGS_PROTOCOL = "/suanli/logs/1.0.0";

/** Attestor challenges (proof of capacity): challenge, open and result, one exchange each. */
export const ATTEST_PROTOCOL = "/suanli/attest/1.0.0";

/** The user agent a Suanli node announces through identify. */
export const SUANLI_AGENT = "suanli/0.1.0";

/** The renter asks the provider to stop a lease's task (then closes the lease on-chain). */
export const CANCEL_PROTOCOL = "/suanli/cancel/1.0.0";

/** Attestors probe providers that hold active leases; the provider answers with a signed Heartbeat. */
export const LIVENESS_PROTOCOL = "/suanli/liveness/1.0.0";

/** Attestors exchange signed faults so one of them can submit a quorum on-chain. */
export const FAULT_PROTOCOL = "/suanli/fault/1.0.0";

/**
 * A fault proposer asks a peer which attestor it speaks for (a signed peer binding,
 * common/attest/attestor-peer.ts) before sending it a proposal: proposals go to staked attestors only.
 */
export const ATTESTOR_IDENTITY_PROTOCOL = "/suanli/attestor-identity/1.0.0";

/**
 * Anyone asks an attestor to challenge a machine now (a provider that just joined, an operator's
 * `npx suanli attestor challenge`); the answer is the outcome, with the attestation on a pass.
 */
export const ATTEST_REQUEST_PROTOCOL = "/suanli/attest-request/1.0.0";

/** The renter downloads a task's output folder (list, then read from a resume point). */
export const OUTPUT_PROTOCOL = "/suanli/output/1.0.0";

/** The renter runs a command in a running task's environment, streaming its output. */
export const EXEC_PROTOCOL = "/suanli/exec/1.0.0";

/** The renter opens a TCP connection to a port its task declared. */
export const FORWARD_PROTOCOL = "/suanli/forward/1.0.0";
