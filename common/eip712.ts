/**
 * EIP-712 definitions shared by the contracts' tests, the node and the SDK. One domain for every
 * Suanli message: name "Suanli", version "1", the chain id and the LeaseMarket address as the
 * verifying contract, so a signature is valid on one deployment of one chain only.
 *
 * Field widths match the Solidity structs in contracts/ (they are packed there to save gas).
 * Amounts are token base units; prices are per unit-second; timestamps are unix seconds.
 */
import type { Address, Hex, TypedDataDomain } from "viem";

export const EIP712_NAME = "Suanli";
export const EIP712_VERSION = "1";

/**
 * The EIP-712 domain of a deployment. `market` is the LeaseMarket address.
 *
 * @example
 * import { suanliDomain } from "suanli/sdk";
 * const info = await (await fetch(`${nodeUrl}/v1/info`)).json();
 * const domain = suanliDomain(info.chainId, info.contracts.market);
 */
export function suanliDomain(chainId: number, market: Address): TypedDataDomain & { chainId: number; verifyingContract: Address } {
  return { name: EIP712_NAME, version: EIP712_VERSION, chainId, verifyingContract: market };
}

/**
 * Suanli's EIP-712 types (Offer, ReserveRequest, RenterRequest, Attestation...), for signing with
 * any wallet.
 *
 * @example
 * import { suanliDomain, suanliTypes } from "suanli/sdk";
 * const signature = await walletClient.signTypedData({ account, domain: suanliDomain(chainId, market),
 *   types: { ReserveRequest: suanliTypes.ReserveRequest }, primaryType: "ReserveRequest", message: request });
 */
export const suanliTypes = {
  /**
   * A provider's offer for one machine. With `renter` = 0 it is public (gossiped, usable by
   * anyone); with a renter address it is that renter's reservation acceptance (short expiry).
   * The lease's start deadline is the open time plus `startWindow`.
   * `minBidPerUnitSecond` = 0 means the machine sells no interruptible capacity.
   */
  Offer: [
    { name: "provider", type: "address" },
    { name: "machineId", type: "uint32" },
    { name: "model", type: "bytes32" },
    { name: "pricePerUnitSecond", type: "uint96" },
    { name: "minBidPerUnitSecond", type: "uint96" },
    { name: "minDuration", type: "uint32" },
    { name: "maxDuration", type: "uint32" },
    { name: "collateralBps", type: "uint16" },
    { name: "startWindow", type: "uint32" },
    { name: "nonce", type: "uint64" },
    { name: "expiry", type: "uint32" },
    { name: "renter", type: "address" },
  ],
  /** An attestor's statement that a lease's provider failed at `observedAt`. A quorum ends the lease. */
  Fault: [
    { name: "leaseId", type: "uint256" },
    { name: "kind", type: "uint8" },
    { name: "observedAt", type: "uint32" },
  ],
  /** Both parties agree the provider gets `providerAmount` in total for the lease; the rest goes back to the renter. */
  Settlement: [
    { name: "leaseId", type: "uint256" },
    { name: "providerAmount", type: "uint96" },
    { name: "deadline", type: "uint32" },
  ],
  /** An attestor's statement that a machine passed a proof-of-capacity challenge. Checked off-chain. */
  Attestation: [
    { name: "provider", type: "address" },
    { name: "machineId", type: "uint32" },
    { name: "model", type: "bytes32" },
    { name: "units", type: "uint16" },
    { name: "vramMiB", type: "uint32" },
    { name: "throughput", type: "uint64" },
    { name: "issuedAt", type: "uint32" },
    { name: "expiry", type: "uint32" },
    /** The challenge passed (its EIP-712 id: binds the attestor's seed, claim and times) and the root the provider signed. */
    { name: "challengeId", type: "bytes32" },
    { name: "root", type: "bytes32" },
    /** keccak256 of the GPU UUIDs the provider's runner named in its signed commit (zero when it named none). */
    { name: "gpus", type: "bytes32" },
    /**
     * keccak256 of the GPUs the attestor verified by their confidential-computing evidence, one per
     * unit in unit order (common/attest/cc.ts ccIdentitiesHash); zero when it verified none.
     */
    { name: "cc", type: "bytes32" },
    /**
     * Failed challenges of the machine in the attestor's failure history when it signed (the last
     * `attest.attestor.failureHistorySeconds`, a week by default; only time clears them, a pass
     * does not): a machine that passed after retries says so (node/attest/challenge/failure-history.ts).
     */
    { name: "failures", type: "uint16" },
    /** When the latest of them ended (unix seconds); 0 with none. */
    { name: "lastFailureAt", type: "uint32" },
  ],
  /**
   * An attestor's notice that a machine failed one of its challenges (`reason`: the failure code,
   * common/attest/messages.ts FAILURE_REASONS), gossiped to every offer book: the attestor's
   * attestations of the machine issued before `observedAt` stop counting, and the notice counts
   * toward the machine's failure history (common/attest/failure-notice.ts). Checked off-chain.
   */
  AttestationFailure: [
    { name: "attestor", type: "address" },
    { name: "provider", type: "address" },
    { name: "machineId", type: "uint32" },
    { name: "reason", type: "string" },
    { name: "challengeId", type: "bytes32" },
    { name: "observedAt", type: "uint32" },
  ],
  /** The provider's signed result of a lease, sent to the renter and mirrored on-chain by `complete`. */
  Completion: [
    { name: "leaseId", type: "uint256" },
    { name: "exitCode", type: "int32" },
    { name: "outputDigest", type: "bytes32" },
    { name: "unitSeconds", type: "uint64" },
  ],
  /**
   * A provider's record of one snapshot of a task's checkpoint folder (docs/data.md): the lease,
   * its sequence number (1, 2, ...), the UnixFS root CID, the bytes of file content and when it
   * was taken (unix ms). The renter's SDK keeps the newest one the lease's provider signed.
   */
  Checkpoint: [
    { name: "leaseId", type: "uint256" },
    { name: "seq", type: "uint64" },
    { name: "cid", type: "string" },
    { name: "bytes", type: "uint64" },
    { name: "time", type: "uint64" },
  ],
  /**
   * A renter's authorization of one request about a lease (task spec, logs, status, cancel),
   * bound to the provider, the request body and a fresh nonce; providers refuse stale or replayed ones.
   */
  RenterRequest: [
    { name: "leaseId", type: "uint256" },
    { name: "provider", type: "address" },
    { name: "action", type: "string" },
    { name: "bodyHash", type: "bytes32" },
    { name: "issuedAt", type: "uint32" },
    { name: "nonce", type: "bytes32" },
  ],
  /**
   * A renter's delegation of its requests to a session key (common/sessions.ts): the key may sign
   * RenterRequests (and ReserveRequests, with action "reserve") for `actions`, on `leaseIds` (empty:
   * every lease of the renter), from `issuedAt` until `expiresAt`. Revocable on-chain (SessionKeys).
   */
  SessionDelegation: [
    { name: "renter", type: "address" },
    { name: "sessionKey", type: "address" },
    { name: "actions", type: "string[]" },
    { name: "leaseIds", type: "uint256[]" },
    { name: "issuedAt", type: "uint64" },
    { name: "expiresAt", type: "uint64" },
    { name: "salt", type: "bytes32" },
  ],
  /**
   * A renter's public endpoint on a gateway (docs/endpoints.md): `gateway` (the gateway's own key)
   * may serve `port` of the task on `leaseIds` at `/e/<endpointId>/`, to anyone when `public`,
   * otherwise to bearers of tokens signed by `tokenSigner`, until `expiresAt` (unix seconds).
   * Each lease is a replica; `healthPath` (empty: none) is what the gateway asks each one for to
   * know it is ready.
   */
  Endpoint: [
    { name: "renter", type: "address" },
    { name: "gateway", type: "address" },
    { name: "leaseIds", type: "uint256[]" },
    { name: "port", type: "uint16" },
    { name: "healthPath", type: "string" },
    { name: "public", type: "bool" },
    { name: "tokenSigner", type: "address" },
    { name: "expiresAt", type: "uint64" },
    { name: "salt", type: "bytes32" },
  ],
  /** A renter asking a provider to hold units before opening a lease. */
  ReserveRequest: [
    { name: "renter", type: "address" },
    { name: "provider", type: "address" },
    { name: "machineId", type: "uint32" },
    { name: "units", type: "uint16" },
    { name: "duration", type: "uint32" },
    { name: "interruptible", type: "bool" },
    { name: "bidPerUnitSecond", type: "uint96" },
    { name: "issuedAt", type: "uint32" },
    { name: "nonce", type: "bytes32" },
  ],
  /** A provider's answer to an attestor's liveness probe of a lease. */
  Heartbeat: [
    { name: "leaseId", type: "uint256" },
    { name: "challenge", type: "bytes32" },
    { name: "respondedAt", type: "uint32" },
  ],
  /**
   * An attestor's receipt of a heartbeat it counted as an answer (at `receivedAtMs` on its clock),
   * handed to the provider. With the attestor's signature of a liveness Fault whose window it
   * falls in, it is slashable evidence (AttestorStaking.disputeFault).
   */
  ProbeReceipt: [
    { name: "leaseId", type: "uint256" },
    { name: "challenge", type: "bytes32" },
    { name: "receivedAtMs", type: "uint64" },
  ],
} as const;

export type SuanliPrimaryType = keyof typeof suanliTypes;

export type Offer = {
  provider: Address;
  machineId: number;
  model: Hex;
  pricePerUnitSecond: bigint;
  minBidPerUnitSecond: bigint;
  minDuration: number;
  maxDuration: number;
  collateralBps: number;
  startWindow: number;
  nonce: bigint;
  expiry: number;
  renter: Address;
};

export type Fault = { leaseId: bigint; kind: number; observedAt: number };
export type ProbeReceipt = { leaseId: bigint; challenge: Hex; receivedAtMs: bigint };
export type Settlement = { leaseId: bigint; providerAmount: bigint; deadline: number };
export type Attestation = {
  provider: Address;
  machineId: number;
  model: Hex;
  units: number;
  vramMiB: number;
  throughput: bigint;
  issuedAt: number;
  expiry: number;
  challengeId: Hex;
  root: Hex;
  gpus: Hex;
  cc: Hex;
  failures: number;
  lastFailureAt: number;
};
export type AttestationFailure = { attestor: Address; provider: Address; machineId: number; reason: string; challengeId: Hex; observedAt: number };
export type Completion = { leaseId: bigint; exitCode: number; outputDigest: Hex; unitSeconds: bigint };
export type Checkpoint = { leaseId: bigint; seq: bigint; cid: string; bytes: bigint; time: bigint };
export type RenterRequest = { leaseId: bigint; provider: Address; action: string; bodyHash: Hex; issuedAt: number; nonce: Hex };
export type SessionDelegation = {
  renter: Address;
  sessionKey: Address;
  actions: readonly string[];
  leaseIds: readonly bigint[];
  issuedAt: bigint;
  expiresAt: bigint;
  salt: Hex;
};
export type Endpoint = {
  renter: Address;
  gateway: Address;
  leaseIds: readonly bigint[];
  port: number;
  healthPath: string;
  public: boolean;
  tokenSigner: Address;
  expiresAt: bigint;
  salt: Hex;
};
export type ReserveRequest = {
  renter: Address;
  provider: Address;
  machineId: number;
  units: number;
  duration: number;
  interruptible: boolean;
  bidPerUnitSecond: bigint;
  issuedAt: number;
  nonce: Hex;
};
export type Heartbeat = { leaseId: bigint; challenge: Hex; respondedAt: number };

/** Fault kinds (the `kind` of a Fault). */
export const FaultKind = {
  /** The provider stopped answering liveness probes beyond the QoS window. */
  unresponsive: 1,
  /** The machine failed a proof-of-capacity challenge while leased. */
  capacity: 2,
} as const;

/** `0x000...0`: an Offer's `renter` when anyone may use it. */
export const ANY_RENTER: Address = "0x0000000000000000000000000000000000000000";
