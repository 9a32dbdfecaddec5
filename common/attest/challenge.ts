/**
 * A challenge's identity and signature. The id is the EIP-712 digest of the challenge fields in
 * the deployment's Suanli domain, so it binds attestor (through the signature), provider, machine,
 * claim, seed, sizes and times: a commit or an answer made for one challenge is worthless for any
 * other. The attestor signs the id, so a provider only spends GPU time on challenges from
 * addresses in the on-chain attestor set.
 */
import { hashTypedData, recoverAddress, type Address, type Hex, type LocalAccount, type TypedDataDomain } from "viem";
import { signTyped } from "../chain/sign.js";
import { modelHash } from "../gpu.js";
import type { ChallengeFields, ChallengeMessage } from "./messages.js";
import { ATTEST_PROTOCOL_VERSION } from "./messages.js";

/** EIP-712 type of a challenge. Kept beside the protocol rather than in common/eip712.ts: nothing on-chain reads it. */
export const attestChallengeTypes = {
  // V2: per-unit sub-challenges (rowsPerUnit rows for each unit). The new name and field give v2 ids that no v1 challenge shares.
  AttestChallengeV2: [
    { name: "provider", type: "address" },
    { name: "machineId", type: "uint32" },
    { name: "model", type: "bytes32" },
    { name: "units", type: "uint16" },
    { name: "vramMiB", type: "uint32" },
    { name: "seed", type: "bytes32" },
    { name: "rowsPerUnit", type: "uint32" },
    { name: "cols", type: "uint32" },
    { name: "rounds", type: "uint16" },
    { name: "issuedAtMs", type: "uint64" },
    { name: "deadlineAtMs", type: "uint64" },
    { name: "cutoffAtMs", type: "uint64" },
  ],
} as const;

function typedData(domain: TypedDataDomain, fields: ChallengeFields) {
  return {
    domain,
    types: attestChallengeTypes,
    primaryType: "AttestChallengeV2" as const,
    message: {
      provider: fields.provider,
      machineId: fields.machineId,
      model: modelHash(fields.model),
      units: fields.units,
      vramMiB: fields.vramMiB,
      seed: fields.seed,
      rowsPerUnit: fields.rowsPerUnit,
      cols: fields.cols,
      rounds: fields.rounds,
      issuedAtMs: BigInt(fields.issuedAtMs),
      deadlineAtMs: BigInt(fields.deadlineAtMs),
      cutoffAtMs: BigInt(fields.cutoffAtMs),
    },
  };
}

/** The challenge id: EIP-712 digest of the fields (the attestor address is bound by the signature). */
export function challengeId(domain: TypedDataDomain, fields: ChallengeFields): Hex {
  return hashTypedData(typedData(domain, fields));
}

/** Signs the fields with the attestor's account and returns the full wire message. */
export async function signChallenge(account: Pick<LocalAccount, "address" | "signTypedData">, domain: TypedDataDomain, fields: ChallengeFields): Promise<ChallengeMessage> {
  if (account.address.toLowerCase() !== fields.attestor.toLowerCase()) {
    throw new RangeError("the signing account must be the challenge's attestor");
  }
  const signature = await signTyped(account, typedData(domain, fields));
  return { ...fields, v: ATTEST_PROTOCOL_VERSION, type: "challenge", id: challengeId(domain, fields), signature };
}

export type ChallengeCheck = { ok: true; attestor: Address } | { ok: false; reason: "bad_id" | "bad_signature" };

/** Recomputes the id from the fields and checks the signature recovers to `attestor`. */
export async function verifyChallengeSignature(domain: TypedDataDomain, message: ChallengeMessage): Promise<ChallengeCheck> {
  const { v: _v, type: _type, id, signature, ...fields } = message;
  const expected = challengeId(domain, fields);
  if (expected !== id.toLowerCase()) return { ok: false, reason: "bad_id" };
  let signer: Address;
  try {
    signer = await recoverAddress({ hash: expected, signature });
  } catch {
    return { ok: false, reason: "bad_signature" };
  }
  if (signer.toLowerCase() !== fields.attestor.toLowerCase()) return { ok: false, reason: "bad_signature" };
  return { ok: true, attestor: signer };
}
