/**
 * The software WebAuthn authenticator for Node tests (docs/aa.md "A passkey owner"): the product's own
 * (common/software-passkey.ts, which the CLI's passkey files use too), registered for rpId "localhost", with a fresh
 * P-256 key or `secretKey`. It counts its signatures: each is one approval a person would give.
 */
import { p256 } from "@noble/curves/nist.js";
import { bytesToHex, encodeAbiParameters, type Hex } from "viem";
import { newPasskeyFile, softwareAuthenticator as fromPasskey, type Assertion, type SoftwareAuthenticator } from "../../common/software-passkey.js";

export type { Assertion, SoftwareAuthenticator };

export const TEST_RP_ID = "localhost";
export const TEST_ORIGIN = "http://localhost";

/** A new software passkey (a fresh P-256 key, or `secretKey`), registered for rpId "localhost". */
export function softwareAuthenticator(secretKey?: Uint8Array): SoftwareAuthenticator {
  const file = newPasskeyFile(TEST_RP_ID);
  const { publicKey: _derived, ...rest } = file;
  return fromPasskey(secretKey ? { ...rest, privateKey: bytesToHex(secretKey), origin: TEST_ORIGIN } : { ...file, origin: TEST_ORIGIN });
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
