/**
 * A software WebAuthn authenticator for Node tests (docs/aa.md "A passkey owner"): a P-256 key that answers
 * `navigator.credentials.get` as a platform authenticator would, so viem's own `toWebAuthnAccount` signing path runs
 * (its `getFn`). What it returns is what a browser hands a page: authenticatorData (the RP id's SHA-256, flags user
 * present and user verified, a signature counter), clientDataJSON (`webauthn.get`, the challenge in base64url, the
 * origin) and a DER signature over sha256(authenticatorData || sha256(clientDataJSON)), low-S. It counts its
 * signatures: each is one approval a person would give with a fingerprint or a face.
 */
import { createHash, randomBytes } from "node:crypto";
import { p256 } from "@noble/curves/nist.js";
import { bytesToHex, encodeAbiParameters, type Hex } from "viem";
import { toWebAuthnAccount, type WebAuthnAccount } from "viem/account-abstraction";

const sha256 = (data: Uint8Array) => new Uint8Array(createHash("sha256").update(data).digest());
const base64url = (data: Uint8Array) => Buffer.from(data).toString("base64url");
const buffer = (data: Uint8Array) => data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) as ArrayBuffer;

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
  /** How many assertions it has signed (approvals a person would have given). */
  signatures: number;
  /** An assertion over `challenge` made directly (no viem), with overrides to forge bad ones in tests. */
  assert(challenge: Uint8Array, overrides?: { type?: string; origin?: string; flags?: number; signWith?: Uint8Array }): Assertion;
};

export const TEST_RP_ID = "localhost";
export const TEST_ORIGIN = "http://localhost";

/** A new software passkey (a fresh P-256 key, or `secretKey`), registered for rpId "localhost". */
export function softwareAuthenticator(secretKey: Uint8Array = p256.utils.randomSecretKey()): SoftwareAuthenticator {
  const point = p256.getPublicKey(secretKey, false); // 0x04 || x || y
  const id = base64url(randomBytes(16));
  let counter = 0;
  const assertion: SoftwareAuthenticator["assert"] = (challenge, overrides = {}) => {
    counter += 1;
    const flags = overrides.flags ?? FLAGS_UP_UV;
    const counterBytes = new Uint8Array([counter >>> 24, (counter >>> 16) & 0xff, (counter >>> 8) & 0xff, counter & 0xff]);
    const authenticatorData = new Uint8Array([...sha256(new TextEncoder().encode(TEST_RP_ID)), flags, ...counterBytes]);
    const clientDataJSON = JSON.stringify({ type: overrides.type ?? "webauthn.get", challenge: base64url(challenge), origin: overrides.origin ?? TEST_ORIGIN, crossOrigin: false });
    const signed = new Uint8Array([...authenticatorData, ...sha256(new TextEncoder().encode(clientDataJSON))]);
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
    rpId: TEST_RP_ID,
    // What navigator.credentials.get returns: a PublicKeyCredential whose response is an AuthenticatorAssertionResponse.
    async getFn(options) {
      const challenge = options?.publicKey?.challenge;
      if (!(challenge instanceof Uint8Array)) throw new Error("the software authenticator expects a Uint8Array challenge");
      if (options?.publicKey?.rpId !== TEST_RP_ID) throw new Error(`the software authenticator is registered for ${TEST_RP_ID}, not ${options?.publicKey?.rpId}`);
      const made = assertion(challenge);
      authenticator.signatures += 1;
      const der = new p256.Signature(made.r, made.s).toBytes("der");
      return {
        id,
        type: "public-key",
        rawId: buffer(Buffer.from(id, "base64url")),
        authenticatorAttachment: "platform",
        response: {
          authenticatorData: buffer(made.authenticatorData),
          clientDataJSON: buffer(new TextEncoder().encode(made.clientDataJSON)),
          signature: buffer(der),
          userHandle: null,
        },
        getClientExtensionResults: () => ({}),
      } as never;
    },
  });
  return authenticator;
}

/** An assertion encoded as OpenZeppelin's WebAuthn.sol decodes it (`tryDecodeAuth`): the six fields of `WebAuthnAuth`, not a tuple. */
export function encodeAssertion(assertion: Assertion, indexes?: { challengeIndex?: bigint; typeIndex?: bigint }): Hex {
  return encodeAbiParameters(
    [{ type: "bytes32" }, { type: "bytes32" }, { type: "uint256" }, { type: "uint256" }, { type: "bytes" }, { type: "string" }],
    [
      bytesToHex(p256.Point.Fn.toBytes(assertion.r)),
      bytesToHex(p256.Point.Fn.toBytes(assertion.s)),
      indexes?.challengeIndex ?? BigInt(assertion.clientDataJSON.indexOf('"challenge"')),
      indexes?.typeIndex ?? BigInt(assertion.clientDataJSON.indexOf('"type"')),
      bytesToHex(assertion.authenticatorData),
      assertion.clientDataJSON,
    ],
  );
}
