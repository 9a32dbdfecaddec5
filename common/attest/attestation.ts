/**
 * Hardware attestations: the EIP-712 `Attestation` (common/eip712.ts) an attestor signs when a
 * machine passes a challenge (common/chain/sign.ts `signAttestation`), and the checks the offer book and the matching engine run on the
 * attestations an offer carries.
 *
 * `throughput` is the measured int8 rate in operations per second (a multiply-add counts as two),
 * over the whole machine (all units), measured from challenge issue to commit receipt.
 */
import { hashTypedData, recoverAddress, type Address, type Hex, type TypedDataDomain } from "viem";
import { suanliTypes, type Attestation } from "../eip712.js";
import type { SignedAttestation } from "../offers/message.js";
import { isRevoked, type MachineNotices } from "./failure-notice.js";

export type { SignedAttestation };

/**
 * How long an attestation counts from its issue, whatever expiry its attestor signed (issue 35
 * item 9): a day, the attestors' own default lifetime (`attestationTtlSeconds`). An attestation
 * signed with a longer expiry (a week, by a careless or a colluding attestor) stops counting a day
 * after the challenge it records, in every offer book and so in matching (attestedUntil).
 */
export const MAX_ATTESTATION_AGE_SECONDS = 86_400;

function typedData(domain: TypedDataDomain, attestation: Attestation) {
  return { domain, types: suanliTypes, primaryType: "Attestation" as const, message: attestation };
}

/** The EIP-712 digest an attestor signs. */
export function attestationDigest(domain: TypedDataDomain, attestation: Attestation): Hex {
  return hashTypedData(typedData(domain, attestation));
}

/** Why an attestation was rejected (stable codes). */
export type AttestationRejection = "expired" | "not_yet_valid" | "bad_signature" | "not_attestor" | "mismatch" | "revoked";

export type AttestationVerdict = { valid: true; attestor: Address } | { valid: false; reason: AttestationRejection; attestor?: Address };

export type VerifyAttestationOptions = {
  /** suanliDomain(chainId, marketAddress) of the deployment. */
  domain: TypedDataDomain;
  /** The on-chain attestor set (ATTESTOR_ROLE), typically a cached read. */
  isAttestor: (address: Address) => boolean | Promise<boolean>;
  /** Current unix time in seconds. */
  now: number;
  /** Tolerated clock difference for `issuedAt` in the future. Default 300 s. */
  maxClockSkewSeconds?: number;
  /** When given, the attestation must be about exactly this machine (and units / VRAM when set). */
  expected?: { provider: Address; machineId: number; model: Hex; units?: number; vramMiB?: number };
  /** Recovers the signer of a digest; defaults to viem's. Nodes pass a native secp256k1 one for speed. */
  recover?: (digest: Hex, signature: Hex) => Address | Promise<Address>;
  /**
   * The failure notices held about the machine (common/attest/failure-notice.ts): an attestation
   * issued before a failure its own attestor announced later is `revoked`.
   */
  notices?: MachineNotices;
};

/**
 * Checks one signed attestation: not expired (`now < expiry` and at most MAX_ATTESTATION_AGE_SECONDS old), not issued in the future beyond
 * the skew, about the expected machine, signed by an address in the attestor set, not revoked by a
 * later failure notice of the same attestor (`options.notices`). Cheap checks run
 * before signature recovery.
 *
 * @example
 * import { verifyAttestation } from "suanli/common/attest/attestation";
 * const verdict = await verifyAttestation(signed, { domain, now: Math.floor(Date.now() / 1000), isAttestor: (a) => attestors.has(a) });
 * if (!verdict.valid) console.log(verdict.reason);
 */
export async function verifyAttestation(signed: SignedAttestation, options: VerifyAttestationOptions): Promise<AttestationVerdict> {
  const { attestation, signature } = signed;
  const skew = options.maxClockSkewSeconds ?? 300;
  if (options.now >= Math.min(attestation.expiry, attestation.issuedAt + MAX_ATTESTATION_AGE_SECONDS)) return { valid: false, reason: "expired" };
  if (attestation.issuedAt > options.now + skew || attestation.issuedAt >= attestation.expiry) return { valid: false, reason: "not_yet_valid" };
  const expected = options.expected;
  if (expected) {
    const same =
      attestation.provider.toLowerCase() === expected.provider.toLowerCase() &&
      attestation.machineId === expected.machineId &&
      attestation.model.toLowerCase() === expected.model.toLowerCase() &&
      (expected.units === undefined || attestation.units === expected.units) &&
      (expected.vramMiB === undefined || attestation.vramMiB === expected.vramMiB);
    if (!same) return { valid: false, reason: "mismatch" };
  }
  const digest = attestationDigest(options.domain, attestation);
  let attestor: Address;
  try {
    attestor = options.recover ? await options.recover(digest, signature) : await recoverAddress({ hash: digest, signature });
  } catch {
    return { valid: false, reason: "bad_signature" };
  }
  if (!(await options.isAttestor(attestor))) return { valid: false, reason: "not_attestor", attestor };
  if (isRevoked(options.notices, attestor, attestation.issuedAt)) return { valid: false, reason: "revoked", attestor };
  return { valid: true, attestor };
}

export type QuorumResult = {
  /** True when at least `quorum` distinct attestors vouch for the machine. */
  met: boolean;
  /** Distinct attestors whose attestation is valid, in input order. */
  attestors: Address[];
  /** The lowest valid measured throughput (ops/s); undefined when none is valid. */
  minThroughput: bigint | undefined;
  /** Attestations that did not count, with the reason (`duplicate` for a second one by the same attestor). */
  rejected: { index: number; reason: AttestationRejection | "duplicate" }[];
};

/**
 * Checks a list of attestations for one machine against the attestor set and a quorum. Each
 * attestor counts once. What the offer book and matcher call for an offer's `attestations`.
 */
export async function checkAttestationQuorum(list: readonly SignedAttestation[], options: VerifyAttestationOptions & { quorum: number }): Promise<QuorumResult> {
  const attestors: Address[] = [];
  const seen = new Set<string>();
  const rejected: QuorumResult["rejected"] = [];
  let minThroughput: bigint | undefined;
  for (const [index, signed] of list.entries()) {
    const verdict = await verifyAttestation(signed, options);
    if (!verdict.valid) {
      rejected.push({ index, reason: verdict.reason });
      continue;
    }
    const key = verdict.attestor.toLowerCase();
    if (seen.has(key)) {
      rejected.push({ index, reason: "duplicate" });
      continue;
    }
    seen.add(key);
    attestors.push(verdict.attestor);
    const throughput = signed.attestation.throughput;
    if (minThroughput === undefined || throughput < minThroughput) minThroughput = throughput;
  }
  return { met: attestors.length >= Math.max(1, options.quorum), attestors, minThroughput, rejected };
}
