/**
 * Sealed secrets: a renter's secret env values travel encrypted to the provider's public
 * encryption key, so relays (a node's HTTP API), logs and stores only ever see ciphertext.
 *
 * - Construction: HPKE (RFC 9180) base mode, DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-128-GCM,
 *   from @hpke/core (WebCrypto only: the same code in Node and browsers). Nothing hand-rolled.
 * - Binding: each ciphertext's AAD is `chainId:leaseId:NAME`, so it opens only for the lease and
 *   the variable it was sealed for (a relay cannot move it to another lease or variable).
 * - The key: each provider node derives a P-256 key pair from a 32-byte seed in its data dir and
 *   signs the public key and the time it expires with its wallet (EIP-191 personal message,
 *   below). It rotates the key (a new seed per epoch, node/provider/agent/sealing.ts), publishes
 *   the current one with its offers and sends it in every reserve acceptance; the SDK seals only to
 *   a key whose signature recovers to the provider the lease is with (a relay that swaps the key
 *   is caught) and that has not expired (a stale key, one the provider may have deleted, is never
 *   used).
 *
 * Wire form of a sealed value: `{ "sealed": "0x" + hex(enc ‖ ciphertext), "secret": true }`.
 */
import { Aes128Gcm, CipherSuite, DhkemP256HkdfSha256, HkdfSha256 } from "@hpke/core";
import { bytesToHex, hexToBytes, recoverMessageAddress, type Address, type Hex } from "viem";
import { z } from "zod";
import { signatureSchema } from "./schemas.js";

const suite = new CipherSuite({ kem: new DhkemP256HkdfSha256(), kdf: new HkdfSha256(), aead: new Aes128Gcm() });
const INFO = new TextEncoder().encode("suanli/sealed-env/1");
/** An uncompressed P-256 point is 65 bytes: the HPKE `enc` prefix of every sealed value. */
const ENC_BYTES = 65;
const PUBLIC_KEY_PATTERN = /^0x04[0-9a-fA-F]{128}$/;

/** Uncompressed P-256 public key, 0x04 followed by 128 hex digits. */
export const sealingPublicKeySchema = z.string().regex(PUBLIC_KEY_PATTERN, "expected an uncompressed P-256 public key (0x04 followed by 128 hex digits)");

/** A provider's sealing key as it travels: the public key, when it expires, and the wallet's signature over both. */
export const sealingKeySchema = z.strictObject({
  publicKey: sealingPublicKeySchema,
  /** Unix seconds after which a renter must not seal to this key (the provider may have deleted it). */
  expiresAt: z
    .number()
    .int()
    .min(1)
    .max(2 ** 40),
  /** EIP-191 signature by the provider's wallet over sealingKeyStatement(). */
  signature: signatureSchema,
});
export type SealingKey = z.output<typeof sealingKeySchema>;

/** A sealed env value: hex of HPKE enc ‖ ciphertext. Sized for a 32 KiB secret. */
export const sealedValueSchema = z
  .string()
  .regex(/^0x[0-9a-f]+$/, "expected 0x followed by lowercase hex")
  .min(2 + 2 * (ENC_BYTES + 16))
  .max(2 + 2 * (ENC_BYTES + 16 + 32 * 1024));

/** The text a provider's wallet signs to bind its sealing key, until `expiresAt` (unix seconds), to itself on one chain. */
export function sealingKeyStatement(chainId: number, provider: Address, publicKey: string, expiresAt: number): string {
  return `Suanli sealing key\nchain: ${chainId}\nprovider: ${provider.toLowerCase()}\nkey: ${publicKey.toLowerCase()}\nexpires: ${expiresAt}`;
}

/** Whether `key` (its public key and expiry) is signed by `provider`'s wallet for `chainId`. Says nothing of the expiry itself: see sealingKeyProblem. */
export async function verifySealingKey(key: SealingKey, provider: Address, chainId: number): Promise<boolean> {
  try {
    const signer = await recoverMessageAddress({ message: sealingKeyStatement(chainId, provider, key.publicKey, key.expiresAt), signature: key.signature as Hex });
    return signer.toLowerCase() === provider.toLowerCase();
  } catch {
    return false;
  }
}

/**
 * What keeps a renter from sealing to `key` now (`nowSeconds`, unix): "unsigned" (not the
 * provider's wallet's signature for this chain, or a field changed since), "expired" (the provider
 * has rotated past it and may have deleted it), or undefined when it may be used.
 */
export async function sealingKeyProblem(key: SealingKey, provider: Address, chainId: number, nowSeconds: number): Promise<"unsigned" | "expired" | undefined> {
  if (!(await verifySealingKey(key, provider, chainId))) return "unsigned";
  if (key.expiresAt <= nowSeconds) return "expired";
  return undefined;
}

export type SealContext = { chainId: number; leaseId: bigint; name: string };

function aadOf(context: SealContext): Uint8Array {
  return new TextEncoder().encode(`${context.chainId}:${context.leaseId}:${context.name}`);
}

/** Seals `plaintext` to the provider's public key for one lease and variable. */
export async function sealSecret(publicKey: string, plaintext: string, context: SealContext): Promise<string> {
  const recipientPublicKey = await suite.kem.deserializePublicKey(hexToBytes(publicKey as Hex));
  const { ct, enc } = await suite.seal({ recipientPublicKey, info: INFO }, new TextEncoder().encode(plaintext), aadOf(context));
  const out = new Uint8Array(enc.byteLength + ct.byteLength);
  out.set(new Uint8Array(enc), 0);
  out.set(new Uint8Array(ct), enc.byteLength);
  return bytesToHex(out);
}

/** A provider's key pair for opening sealed values. */
export type SealingKeyPair = { publicKey: string; open(sealed: string, context: SealContext): Promise<string> };

/** The key pair derived from a 32-byte seed (HPKE DeriveKeyPair): the same seed gives the same key. */
export async function sealingKeyPairFromSeed(seed: Uint8Array): Promise<SealingKeyPair> {
  if (seed.byteLength < 32) throw new RangeError("the sealing key seed must be at least 32 bytes");
  const pair = await suite.kem.deriveKeyPair(seed);
  const publicKey = bytesToHex(new Uint8Array(await suite.kem.serializePublicKey(pair.publicKey)));
  return {
    publicKey,
    async open(sealed, context) {
      const bytes = hexToBytes(sealed as Hex);
      if (bytes.byteLength <= ENC_BYTES) throw new Error("the sealed value is too short");
      const plaintext = await suite.open({ recipientKey: pair, enc: bytes.slice(0, ENC_BYTES), info: INFO }, bytes.slice(ENC_BYTES), aadOf(context));
      return new TextDecoder("utf-8", { fatal: true }).decode(plaintext);
    },
  };
}
