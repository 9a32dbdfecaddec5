/**
 * The validation pipeline of offer messages, run on every message a node receives (gossip, the
 * offers-sync protocol) and on every message it publishes. Checks run cheapest first, so junk
 * costs almost nothing and only well-formed, fresh, newer messages reach the signature checks
 * and the chain:
 *
 *   1. size cap                     6. EIP-712 signature of the Offer (cached per signed offer)
 *   2. JSON                         7. peer signature by the message's libp2p key
 *   3. zod schema                   8. chain: provider registered, its on-chain peer id, nonce
 *   4. consistency of the fields       not revoked, free stake, machine declared as described
 *   5. expiry, then sequence        9. attestations: fields, signature, attestor role, expiry
 *
 * Each failure has a reason and an action: `reject` for a message nobody honest would send (the
 * gossip layer lowers the sender's peer score), `ignore` for one that is merely stale or that
 * this node cannot check right now (the chain is unreachable, the book is full).
 *
 * Node only (libsodium through the native `sodium-native` package for Ed25519, about twice as
 * fast as node:crypto's OpenSSL here, and libsecp256k1 for recovery): the node and the SDK in
 * Node use it; a browser reads offers already validated by a node's HTTP API.
 */
import { createRequire } from "node:module";
import { peerIdFromString } from "@libp2p/peer-id";
import { LRUCache } from "lru-cache";
import type { Address, Hex } from "viem";
import { TypedDataRecoverer } from "../eip712-recover.js";
import { verifySealingKey, type SealingKey } from "../sealed.js";
import { ANY_RENTER } from "../eip712.js";
import { canonicalGpuName, modelHash } from "../gpu.js";
import { throughputBand, type ThroughputBand } from "../attest/params.js";
import type { FailureNoticeIndex } from "../attest/failure-notice.js";
import { attestationStateOf, type AttestationState } from "./attestation-state.js";
import type { ChainView, MachineRecord, ProviderRecord } from "./chain-view.js";
export { MAX_OUTSIDER_ATTESTATIONS, type AttestationState } from "./attestation-state.js";
import { OFFER_MESSAGE_MAX_BYTES, offerKey, offerMessageSchema, offerSigningText, type OfferMessage, type SignedAttestation } from "./message.js";

export type OfferAction = "reject" | "ignore";

/** LeaseMarket.MIN_START_WINDOW: an offer with a shorter start window can never be opened. */
export const MIN_START_WINDOW_SECONDS = 10;

/** Why a message was not accepted. Stable strings: metrics and tests use them. */
export const OFFER_REJECT_REASONS = {
  too_large: "reject",
  not_json: "reject",
  schema: "reject",
  private_offer: "reject",
  unknown_model: "reject",
  model_mismatch: "reject",
  inconsistent: "reject",
  expired: "ignore",
  expiry_too_far: "reject",
  published_in_future: "reject",
  stale_seq: "ignore",
  bad_signature: "reject",
  wrong_signer: "reject",
  bad_peer_id: "reject",
  bad_peer_signature: "reject",
  unregistered: "reject",
  peer_id_mismatch: "reject",
  nonce_revoked: "reject",
  understaked: "reject",
  machine_undeclared: "reject",
  machine_not_owned: "reject",
  machine_mismatch: "reject",
  bad_attestation: "reject",
  chain_unavailable: "ignore",
  book_full: "ignore",
} as const satisfies Record<string, OfferAction>;
export type OfferRejectReason = keyof typeof OFFER_REJECT_REASONS;

export type ValidatedOffer = {
  key: string;
  message: OfferMessage;
  /** The message as received (its canonical form verifies the peer signature). */
  raw: string;
  attestation: AttestationState;
};

export type OfferValidation = { ok: true; offer: ValidatedOffer } | { ok: false; reason: OfferRejectReason; action: OfferAction; detail: string };

export type OfferValidatorOptions = {
  chainId: number;
  /** LeaseMarket address: the EIP-712 verifying contract. */
  market: Address;
  chain: ChainView;
  /** Unix seconds now (tests move it). */
  now?: () => number;
  /** Offers expiring further ahead than this are refused (they would outlive their provider). */
  maxTtlSec?: number;
  /** How far ahead of our clock `publishedAt` may be. */
  maxClockSkewSec?: number;
  /** Free stake a provider needs beyond the collateral of its smallest lease; at least 1 means "staked". */
  minFreeStake?: bigint;
  /** Entries of each verification cache (signed offers, attestations, peer keys). */
  cacheSize?: number;
  maxMessageBytes?: number;
  /**
   * Least fraction of the class's datasheet int8 rate an attested throughput must show to count
   * (the floor of the throughput band; the ceiling always applies). Default 0: the attestors'
   * deadlines enforce the floor; a deployment that knows its attestors' profile sets it.
   */
  minAttestedEfficiency?: number;
  /** The failure notices this node holds (node/offers/failure-notices.ts): they revoke attestations and count as failures. */
  notices?: FailureNoticeIndex;
};

const decoder = new TextDecoder("utf-8", { fatal: true });
// keccak256 of each canonical model name, computed once (the names are a short fixed list).
const modelHashes = new Map<string, Hex>();
function cachedModelHash(name: string): Hex {
  let hash = modelHashes.get(name);
  if (!hash) modelHashes.set(name, (hash = modelHash(name)));
  return hash;
}
// DER prefix of an Ed25519 SubjectPublicKeyInfo; the 32 raw key bytes follow.
type Sodium = { crypto_sign_verify_detached(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean };
// CommonJS with a native binding (prebuilt in the package, nothing compiled or downloaded at install).
const sodium = createRequire(import.meta.url)("sodium-native") as Sodium;

export type OfferFailure = Extract<OfferValidation, { ok: false }>;

/** A refusal with the action its reason implies. */
export function offerFailure(reason: OfferRejectReason, detail: string): OfferFailure {
  return { ok: false, reason, action: OFFER_REJECT_REASONS[reason], detail };
}

/**
 * The collateral the smallest lease an offer allows would lock: one unit for `minDuration`
 * at the offer's price, times the collateral ratio (rounded up). A provider whose free stake
 * cannot cover it could not honour the offer at all.
 */
export function minimumLeaseCollateral(message: Pick<OfferMessage, "offer">): bigint {
  const { pricePerUnitSecond, minDuration, collateralBps } = message.offer;
  const deposit = pricePerUnitSecond * BigInt(Math.max(minDuration, 1));
  return (deposit * BigInt(collateralBps) + 9_999n) / 10_000n;
}

/** Whether an offer counts as attested at `now`. */
export function isAttested(state: AttestationState, now: number): boolean {
  return state.attestedUntil !== null && state.attestedUntil > now;
}

/**
 * The attestation knowledge the matching engine takes (`offerEntryFromMessage(message,
 * { attestation, ... })`) from a book entry's verified state: null unless the quorum holds at
 * `now`, so an offer whose attestations expired, or were never by attestors, ranks as unattested.
 */
export function engineAttestation(state: AttestationState, now: number): { attestedAt: number; expiry: number; ccExpiry?: number } | null {
  if (!isAttested(state, now)) return null;
  const ccUntil = state.ccUntil ?? null;
  return { attestedAt: state.attestedAt ?? now, expiry: state.attestedUntil!, ...(ccUntil !== null && ccUntil > now ? { ccExpiry: ccUntil } : {}) };
}

/** Whether a quorum's attestations verified the offer's GPUs by confidential-computing evidence at `now`. */
export function isCcVerified(state: AttestationState, now: number): boolean {
  return state.ccUntil !== undefined && state.ccUntil !== null && state.ccUntil > now;
}

/**
 * Validates offer messages. One instance per node: it holds the verification caches, so an
 * unchanged Offer or attestation is never verified twice.
 *
 * @example
 * const validator = new OfferValidator({ chainId, market, chain: new CachedChainView(view) });
 * const result = await validator.validate(bytes, (key) => book.heldSeq(key));
 * if (result.ok) book.upsert(result.offer);
 */
export class OfferValidator {
  readonly chainId: number;
  readonly chain: ChainView;
  private readonly recoverer: TypedDataRecoverer;
  private readonly now: () => number;
  private readonly maxTtlSec: number;
  private readonly maxClockSkewSec: number;
  private readonly minFreeStake: bigint;
  private readonly maxMessageBytes: number;
  /** signature + canonical Offer → recovered signer ("" when unrecoverable). */
  private readonly offerSigners: LRUCache<string, string>;
  /** signature + canonical Attestation → recovered signer ("" when unrecoverable). */
  private readonly attestationSigners: LRUCache<string, string>;
  private readonly minAttestedEfficiency: number;
  private readonly notices: FailureNoticeIndex | undefined;
  /** Throughput bands by `model|units` (a short list of classes). */
  private readonly bands = new Map<string, ThroughputBand>();
  /** peer id → Ed25519 key object, or null when the peer id carries no Ed25519 key. */
  /** The raw 32-byte Ed25519 public key of each peer id seen (null: not an Ed25519 id). */
  private readonly peerKeys: LRUCache<string, { key: Uint8Array | null }>;

  constructor(options: OfferValidatorOptions) {
    this.chainId = options.chainId;
    this.chain = options.chain;
    this.recoverer = new TypedDataRecoverer(options.chainId, options.market);
    this.now = options.now ?? (() => Math.floor(Date.now() / 1000));
    this.maxTtlSec = options.maxTtlSec ?? 86_400;
    this.maxClockSkewSec = options.maxClockSkewSec ?? 30;
    this.minFreeStake = options.minFreeStake ?? 1n;
    this.maxMessageBytes = options.maxMessageBytes ?? OFFER_MESSAGE_MAX_BYTES;
    const efficiency = options.minAttestedEfficiency ?? 0;
    if (!(efficiency >= 0 && efficiency <= 1)) throw new RangeError(`minAttestedEfficiency must be within [0, 1], got ${efficiency}`);
    this.minAttestedEfficiency = efficiency;
    this.notices = options.notices;
    const max = options.cacheSize ?? 50_000;
    this.offerSigners = new LRUCache({ max });
    this.attestationSigners = new LRUCache({ max });
    this.peerKeys = new LRUCache({ max: Math.min(max, 10_000) });
  }

  /**
   * Runs the whole pipeline on a received message. `heldSeq` tells the sequence number already
   * held for a book key (undefined if none): anything not newer is ignored before any signature
   * is checked.
   */
  async validate(data: Uint8Array | string, heldSeq?: (key: string) => number | undefined): Promise<OfferValidation> {
    // 1. size
    const size = typeof data === "string" ? Buffer.byteLength(data) : data.byteLength;
    if (size > this.maxMessageBytes) return offerFailure("too_large", `${size} bytes; at most ${this.maxMessageBytes}`);
    // 2. JSON
    let raw: string;
    let json: unknown;
    try {
      raw = typeof data === "string" ? data : decoder.decode(data);
      json = JSON.parse(raw);
    } catch {
      return offerFailure("not_json", "not UTF-8 JSON");
    }
    // 3. schema
    const parsed = offerMessageSchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      return offerFailure("schema", `${issue.path.join(".") || "(root)"}: ${issue.message}`);
    }
    const message = parsed.data;
    const { offer, machine, capacity } = message;

    // 4. consistency of the message with itself
    if (offer.renter !== ANY_RENTER) return offerFailure("private_offer", "gossiped offers must be open to any renter");
    const canonical = canonicalGpuName(machine.model);
    if (canonical !== machine.model) return offerFailure("unknown_model", `${machine.model} is not a canonical GPU model name`);
    if (cachedModelHash(machine.model) !== offer.model) return offerFailure("model_mismatch", "offer.model is not keccak256(machine.model)");
    if (offer.minDuration > offer.maxDuration) return offerFailure("inconsistent", "minDuration > maxDuration");
    if (offer.startWindow < MIN_START_WINDOW_SECONDS) {
      return offerFailure("inconsistent", `startWindow ${offer.startWindow} s is below the market's minimum of ${MIN_START_WINDOW_SECONDS} s`);
    }
    if (capacity.freeUnits > machine.units || capacity.onDemandUnits + capacity.interruptibleUnits + capacity.freeUnits > machine.units) {
      return offerFailure("inconsistent", "capacity exceeds the machine's units");
    }

    // 5. expiry, then sequence
    const now = this.now();
    if (offer.expiry <= now) return offerFailure("expired", `expired at ${offer.expiry}`);
    if (offer.expiry > now + this.maxTtlSec) return offerFailure("expiry_too_far", `expiry more than ${this.maxTtlSec} s ahead`);
    if (message.publishedAt > now + this.maxClockSkewSec) return offerFailure("published_in_future", `publishedAt ${message.publishedAt} is ahead of ${now}`);
    const key = offerKey(offer.provider, offer.machineId, message.tier ?? 0);
    const held = heldSeq?.(key);
    if (held !== undefined && message.seq <= held) return offerFailure("stale_seq", `seq ${message.seq} not newer than held ${held}`);

    // 6. EIP-712 signature of the Offer
    const signer = this.offerSigner(message);
    if (signer === undefined) return offerFailure("bad_signature", "the offer signature is malformed or recovers to no key");
    if (signer !== offer.provider) return offerFailure("wrong_signer", `signed by ${signer}, not ${offer.provider}`);

    // 7. peer signature
    const peerKey = this.peerKey(message.peerId);
    if (!peerKey) return offerFailure("bad_peer_id", "peerId must be an Ed25519 libp2p peer id");
    // Buffer, not TextEncoder or viem's hexToBytes: both allocate far more per message. The
    // schema guarantees peerSignature is 0x and 128 hex digits.
    if (!sodium.crypto_sign_verify_detached(Buffer.from(message.peerSignature.slice(2), "hex"), Buffer.from(offerSigningText(message), "utf8"), peerKey)) {
      return offerFailure("bad_peer_signature", "peerSignature does not verify under peerId");
    }

    // 7b. the sealing key, when published: signed by the provider's wallet for this chain
    if (message.sealingKey && !(await this.sealingKeyValid(message.sealingKey, offer.provider))) {
      return offerFailure("bad_signature", "sealingKey.signature is not the provider's wallet signature of its sealing key on this chain");
    }

    // 8. chain
    let provider: ProviderRecord | undefined;
    let declared: MachineRecord | undefined;
    let revoked: boolean;
    try {
      [provider, declared, revoked] = await Promise.all([
        this.chain.getProvider(offer.provider),
        this.chain.getMachine(offer.machineId),
        this.chain.isNonceRevoked(offer.provider, offer.nonce),
      ]);
    } catch (error) {
      return offerFailure("chain_unavailable", (error as Error)?.message ?? String(error));
    }
    const chainFailure = this.checkChain(message, provider, declared, revoked);
    if (chainFailure) return chainFailure;

    // 9. attestations
    let attestation: AttestationState;
    try {
      const result = await this.checkAttestations(message, now);
      if ("reason" in result) return offerFailure(result.reason, result.detail);
      attestation = result;
    } catch (error) {
      return offerFailure("chain_unavailable", (error as Error)?.message ?? String(error));
    }

    return { ok: true, offer: { key, message, raw, attestation } };
  }

  /** Sealing keys already checked (a provider re-announces the same key with every offer). */
  private readonly sealingKeys = new LRUCache<string, boolean>({ max: 4096 });

  private async sealingKeyValid(key: SealingKey, provider: Address): Promise<boolean> {
    // Every signed field is in the cache key: a copy with another expiry is checked on its own.
    const cacheKey = `${provider.toLowerCase()}:${key.publicKey.toLowerCase()}:${key.expiresAt}:${key.signature.toLowerCase()}`;
    let valid = this.sealingKeys.get(cacheKey);
    if (valid === undefined) {
      valid = await verifySealingKey(key, provider, this.chainId);
      this.sealingKeys.set(cacheKey, valid);
    }
    return valid;
  }

  /**
   * Re-checks a held offer against the chain as it is now (after an event invalidated the
   * cache). Returns the failure, or undefined if the offer still stands. Throws if the chain
   * cannot be read.
   */
  async recheck(message: OfferMessage): Promise<OfferFailure | undefined> {
    const { offer } = message;
    const [provider, declared, revoked] = await Promise.all([
      this.chain.getProvider(offer.provider),
      this.chain.getMachine(offer.machineId),
      this.chain.isNonceRevoked(offer.provider, offer.nonce),
    ]);
    return this.checkChain(message, provider, declared, revoked);
  }

  /** Recomputes the attestation state of a held message (after the attestor set changed). */
  async attestationState(message: OfferMessage): Promise<AttestationState> {
    const result = await this.checkAttestations(message, this.now());
    return "reason" in result ? { attestors: [], attestedUntil: null, attestedAt: null } : result;
  }

  private checkChain(message: OfferMessage, provider: ProviderRecord | undefined, declared: MachineRecord | undefined, revoked: boolean): OfferFailure | undefined {
    const { offer, machine } = message;
    if (!provider || !provider.registered) return offerFailure("unregistered", `${offer.provider} is not a registered provider`);
    if (provider.peerId !== message.peerId) return offerFailure("peer_id_mismatch", "peerId is not the provider's registered peer id");
    if (revoked) return offerFailure("nonce_revoked", `nonce ${offer.nonce} was revoked`);
    const needed = minimumLeaseCollateral(message);
    const required = needed > this.minFreeStake ? needed : this.minFreeStake;
    if (provider.freeStake < required) return offerFailure("understaked", `free stake ${provider.freeStake} < ${required}`);
    if (!declared) return offerFailure("machine_undeclared", `machine ${offer.machineId} is not declared on-chain`);
    if (declared.owner !== offer.provider) return offerFailure("machine_not_owned", `machine ${offer.machineId} belongs to ${declared.owner}`);
    const mismatch =
      declared.model !== offer.model
        ? "model"
        : declared.units !== machine.units
          ? "units"
          : declared.vramMiB !== machine.vramMiB
            ? "vramMiB"
            : declared.interconnect !== machine.interconnect
              ? "interconnect"
              : declared.region !== machine.region
                ? "region"
                : declared.cluster.toLowerCase() !== machine.cluster.toLowerCase()
                  ? "cluster"
                  : undefined;
    if (mismatch) return offerFailure("machine_mismatch", `machine.${mismatch} differs from the on-chain declaration`);
    return undefined;
  }

  private checkAttestations(message: OfferMessage, now: number): Promise<AttestationState | { reason: OfferRejectReason; detail: string }> {
    return attestationStateOf(message, now, {
      chain: this.chain,
      signerOf: (signed) => this.attestationSigner(signed),
      band: (model, units) => this.band(model, units),
      notices: this.notices,
    });
  }

  private band(model: string, units: number): ThroughputBand | undefined {
    const key = `${model}|${units}`;
    let band = this.bands.get(key);
    if (!band) {
      band = throughputBand(model, units, this.minAttestedEfficiency);
      if (band) this.bands.set(key, band);
    }
    return band;
  }

  private offerSigner(message: OfferMessage): Address | undefined {
    const o = message.offer;
    // The signature plus every signed field: a cache hit is the same signature over the same Offer.
    const cacheKey = `${message.signature}|${o.provider}|${o.machineId}|${o.model}|${o.pricePerUnitSecond}|${o.minBidPerUnitSecond}|${o.minDuration}|${o.maxDuration}|${o.collateralBps}|${o.startWindow}|${o.nonce}|${o.expiry}|${o.renter}`;
    const cached = this.offerSigners.get(cacheKey);
    if (cached !== undefined) return (cached || undefined) as Address | undefined;
    const signer = this.recoverer.recoverSigner("Offer", message.offer, message.signature);
    this.offerSigners.set(cacheKey, signer ?? "");
    return signer;
  }

  private attestationSigner(signed: SignedAttestation): Address | undefined {
    const a = signed.attestation;
    // Every signed field: a field left out would let a copy with that field changed reuse the cached signer.
    const cacheKey = `${signed.signature}|${a.provider}|${a.machineId}|${a.model}|${a.units}|${a.vramMiB}|${a.throughput}|${a.issuedAt}|${a.expiry}|${a.challengeId}|${a.root}|${a.gpus}|${a.cc}|${a.failures}|${a.lastFailureAt}`;
    const cached = this.attestationSigners.get(cacheKey);
    if (cached !== undefined) return (cached || undefined) as Address | undefined;
    const signer = this.recoverer.recoverSigner("Attestation", signed.attestation, signed.signature);
    this.attestationSigners.set(cacheKey, signer ?? "");
    return signer;
  }

  private peerKey(peerId: string): Uint8Array | null {
    const cached = this.peerKeys.get(peerId);
    if (cached) return cached.key;
    let key: Uint8Array | null = null;
    try {
      const id = peerIdFromString(peerId);
      if (id.type === "Ed25519") key = id.publicKey.raw;
    } catch {
      key = null;
    }
    this.peerKeys.set(peerId, { key });
    return key;
  }

  /** Sizes of the verification caches (bounded by `cacheSize`). */
  cacheSizes(): { offers: number; attestations: number; peerKeys: number } {
    return { offers: this.offerSigners.size, attestations: this.attestationSigners.size, peerKeys: this.peerKeys.size };
  }
}
