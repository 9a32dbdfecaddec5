/**
 * A software passkey (docs/aa.md "The CLI with a passkey"): a P-256 key held in memory or in a file that answers
 * `navigator.credentials.get` as a platform authenticator would, so that viem's own `toWebAuthnAccount` signing path
 * runs (its `getFn`) where there is no authenticator: the CLI's `--smart-account` with a passkey file (CI, servers)
 * and the tests. It is not a hardware passkey: whoever reads the key signs for the account.
 *
 * What it returns is what a browser hands a page: authenticatorData (the RP id's SHA-256, flags user present and user
 * verified, a signature counter), clientDataJSON (`webauthn.get`, the challenge in base64url, the origin) and a DER
 * signature over sha256(authenticatorData || sha256(clientDataJSON)), low-S. It counts its signatures: each is one
 * approval a person would give with a fingerprint or a face.
 *
 * Pure: @noble and viem only, no Node built-in (the SDK's browser bundle may import it).
 */
import { p256 } from "@noble/curves/nist.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, hexToBytes, type Hex } from "viem";
import { toWebAuthnAccount, type WebAuthnAccount } from "viem/account-abstraction";
import { z } from "zod";

/** The `type` of a passkey file: a WebAuthn credential whose key is P-256 (COSE ES256), the only kind passkeys use. */
export const PASSKEY_FILE_TYPE = "webauthn-p256";

/** An RP id as WebAuthn takes it: a host name (letters, digits, dots, hyphens), no scheme or port. */
const RP_ID = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/;

/**
 * A passkey file (mode 0600, it holds a private key):
 * `{ "type": "webauthn-p256", "rpId": "localhost", "credentialId": "<base64url>", "privateKey": "0x<64 hex>",
 * "publicKey": "0x<128 hex>" }`; `origin` (clientDataJSON's, default `https://<rpId>`, `http://localhost` for
 * localhost) is optional, and `publicKey` (x ‖ y), when given, must be the private key's.
 */
export const passkeyFileSchema = z
  .strictObject({
    type: z.string().refine((value) => value === PASSKEY_FILE_TYPE, {
      error: (issue) => `must be "${PASSKEY_FILE_TYPE}" (a P-256 WebAuthn key), got ${JSON.stringify(issue.input)}`,
    }),
    rpId: z.string().regex(RP_ID, 'must be a host name like "localhost" or "example.com" (the WebAuthn RP id: no scheme, no port)'),
    origin: z
      .string()
      .regex(/^https?:\/\/[^\s/]+$/, 'must be an origin like "https://example.com" (scheme and host, no path)')
      .optional(),
    credentialId: z
      .string()
      .regex(/^[A-Za-z0-9_-]{16,1366}$/, "must be the credential's id in base64url (16 to 1366 characters of A-Z a-z 0-9 _ -)")
      // Base64url of whole bytes is never 1 more than a multiple of 4 long: such an id decodes to nothing.
      .refine((value) => value.length % 4 !== 1, "is not base64url of whole bytes (its length is one more than a multiple of 4)"),
    privateKey: z
      .string()
      .regex(/^0x[0-9a-fA-F]{64}$/, "must be 0x followed by 64 hex digits (the P-256 private key)")
      .refine((value) => p256.utils.isValidSecretKey(hexToBytes(value as Hex)), "is not a P-256 private key (it must be from 1 to the curve's order - 1)"),
    publicKey: z
      .string()
      .regex(/^0x[0-9a-fA-F]{128}$/, "must be 0x followed by 128 hex digits (the public key's x and y)")
      .optional(),
  })
  .check((ctx) => {
    const { privateKey, publicKey } = ctx.value;
    if (!publicKey || !/^0x[0-9a-fA-F]{64}$/.test(privateKey) || !p256.utils.isValidSecretKey(hexToBytes(privateKey as Hex))) return;
    if (publicKey.toLowerCase() !== publicKeyOf(privateKey as Hex)) {
      ctx.issues.push({ code: "custom", path: ["publicKey"], message: "is not the private key's public key (the file was edited or mixed up)", input: publicKey });
    }
  });

export type PasskeyFile = z.output<typeof passkeyFileSchema>;

/** The public key of a P-256 private key as x ‖ y (64 bytes, no 0x04 prefix), lowercase hex. */
function publicKeyOf(privateKey: Hex): Hex {
  return bytesToHex(p256.getPublicKey(hexToBytes(privateKey), false).slice(1));
}

const base64url = (data: Uint8Array) =>
  btoa(String.fromCharCode(...data))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
const fromBase64url = (text: string) => Uint8Array.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
const buffer = (data: Uint8Array) => data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) as ArrayBuffer;
const utf8 = (text: string) => new TextEncoder().encode(text);

/** A new passkey: a fresh P-256 key (Web Crypto's randomness, through noble) and a random 16-byte credential id. */
export function newPasskeyFile(rpId = "localhost"): PasskeyFile {
  const privateKey = bytesToHex(p256.utils.randomSecretKey());
  const id = new Uint8Array(16);
  globalThis.crypto.getRandomValues(id);
  return passkeyFileSchema.parse({ type: PASSKEY_FILE_TYPE, rpId, credentialId: base64url(id), privateKey, publicKey: publicKeyOf(privateKey) });
}

/** Flags of authenticatorData: user present (bit 0), user verified (bit 2). */
const FLAGS_UP_UV = 0x05;

/** One WebAuthn assertion, as the contract's `WebAuthnAuth` takes it apart. */
export type Assertion = { authenticatorData: Uint8Array; clientDataJSON: string; r: bigint; s: bigint };

export type SoftwareAuthenticator = {
  /** The viem WebAuthn account whose `sign({ hash })` asks this authenticator. */
  account: WebAuthnAccount;
  /** The public key's coordinates, as PasskeyAccountFactory takes them. */
  qx: Hex;
  qy: Hex;
  /** How many assertions it has signed through `account` (approvals a person would have given). */
  signatures: number;
  /** An assertion over `challenge` made directly (no viem), with overrides to forge bad ones in tests. */
  assert(challenge: Uint8Array, overrides?: { type?: string; origin?: string; flags?: number; signWith?: Uint8Array }): Assertion;
};

/** The origin a passkey file's assertions name when it gives none. */
export function passkeyOrigin(file: Pick<PasskeyFile, "rpId" | "origin">): string {
  return file.origin ?? (file.rpId === "localhost" ? "http://localhost" : `https://${file.rpId}`);
}

/** The authenticator of a passkey (a file's content, already validated by `passkeyFileSchema`). */
export function softwareAuthenticator(file: PasskeyFile): SoftwareAuthenticator {
  const secretKey = hexToBytes(file.privateKey as Hex);
  const point = p256.getPublicKey(secretKey, false); // 0x04 || x || y
  const origin = passkeyOrigin(file);
  const id = file.credentialId;
  let counter = 0;
  const assertion: SoftwareAuthenticator["assert"] = (challenge, overrides = {}) => {
    counter += 1;
    const flags = overrides.flags ?? FLAGS_UP_UV;
    const counterBytes = new Uint8Array([counter >>> 24, (counter >>> 16) & 0xff, (counter >>> 8) & 0xff, counter & 0xff]);
    const authenticatorData = new Uint8Array([...sha256(utf8(file.rpId)), flags, ...counterBytes]);
    const clientDataJSON = JSON.stringify({ type: overrides.type ?? "webauthn.get", challenge: base64url(challenge), origin: overrides.origin ?? origin, crossOrigin: false });
    const signed = new Uint8Array([...authenticatorData, ...sha256(utf8(clientDataJSON))]);
    const signature = p256.Signature.fromBytes(p256.sign(signed, overrides.signWith ?? secretKey, { prehash: true, lowS: true }));
    return { authenticatorData, clientDataJSON, r: signature.r, s: signature.s };
  };
  const authenticator: SoftwareAuthenticator = {
    account: undefined as unknown as WebAuthnAccount,
    qx: bytesToHex(point.slice(1, 33)),
    qy: bytesToHex(point.slice(33, 65)),
    signatures: 0,
    assert: assertion,
  };
  authenticator.account = toWebAuthnAccount({
    credential: { id, publicKey: bytesToHex(point.slice(1)) },
    rpId: file.rpId,
    // What navigator.credentials.get returns: a PublicKeyCredential whose response is an AuthenticatorAssertionResponse.
    async getFn(options) {
      const challenge = options?.publicKey?.challenge;
      if (!(challenge instanceof Uint8Array)) throw new Error("The software passkey expects a Uint8Array challenge");
      if (options?.publicKey?.rpId !== file.rpId) throw new Error(`The software passkey is registered for ${file.rpId}, not ${options?.publicKey?.rpId}`);
      const made = assertion(challenge);
      authenticator.signatures += 1;
      const der = new p256.Signature(made.r, made.s).toBytes("der");
      return {
        id,
        type: "public-key",
        rawId: buffer(fromBase64url(id)),
        authenticatorAttachment: "platform",
        response: {
          authenticatorData: buffer(made.authenticatorData),
          clientDataJSON: buffer(utf8(made.clientDataJSON)),
          signature: buffer(der),
          userHandle: null,
        },
        getClientExtensionResults: () => ({}),
      } as never;
    },
  });
  return authenticator;
}
