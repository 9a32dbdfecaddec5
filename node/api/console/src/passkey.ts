/**
 * "Sign in with a passkey" (docs/console.md, docs/aa.md "A passkey owner"): the renter is the
 * deployment's PasskeyAccount of a WebAuthn credential (a P-256 key in the phone, the laptop's
 * secure enclave or a security key), its user operations sent to the node's bundler, their gas paid
 * by the deployment's sponsor. The page keeps the credential's id and public key in localStorage
 * (public data: a WebAuthn credential's public key can only be read when it is created, and the
 * account's address derives from it); the private key never leaves the authenticator.
 */
import { createWebAuthnCredential, toWebAuthnAccount, type WebAuthnAccount } from "viem/account-abstraction";
import { z } from "zod";
import type { ConsoleConfig } from "../../../../common/api/console.js";

const STORAGE_KEY = "suanli.console.passkey";

/** What the page remembers of a passkey: public data only. */
const rememberedSchema = z.strictObject({
  /** The credential id, base64url (what `navigator.credentials.get` asks the authenticator for). */
  id: z
    .string()
    .min(16)
    .max(1400)
    .regex(/^[A-Za-z0-9_-]+$/, "expected a base64url credential id"),
  /** The P-256 public key, x ‖ y (64 bytes, hex), as viem's createWebAuthnCredential gives it. */
  publicKey: z.string().regex(/^0x[0-9a-fA-F]{128}$/, "expected 64 bytes of hex (x ‖ y)"),
  createdAt: z.string().max(40),
});
export type RememberedPasskey = z.output<typeof rememberedSchema>;

/** Why this page cannot offer a passkey here, or undefined when it can. */
export function passkeyUnavailable(config: ConsoleConfig): string | undefined {
  if (!config.rpcUrl) return "This node publishes no chain RPC URL for browsers (api.console.rpcUrl).";
  if (!config.bundlerUrl) return "This node names no ERC-4337 bundler for passkey accounts: its operator sets api.console.bundlerUrl (docs/console.md).";
  if (!config.deployment.contracts.passkeyAccountFactory || !config.deployment.contracts.entryPoint)
    return "This deployment has no passkey accounts (no PasskeyAccountFactory in its manifest: docs/aa.md).";
  // A passkey account signs no provider requests itself: without SessionKeys it could not ask a provider anything.
  if (!config.deployment.contracts.sessions) return "This deployment has no SessionKeys contract, which a passkey account needs to sign its requests (docs/sessions.md).";
  if (!window.isSecureContext || !window.PublicKeyCredential) return "This browser offers no passkeys here (WebAuthn needs a secure page: https, or http://localhost).";
  // WebAuthn's relying party is a domain name: an IP address is refused ("This is an invalid domain").
  if (/^[\d.]+$|^\[/.test(window.location.hostname))
    return `Passkeys need a host name, not the address ${window.location.hostname}: open this page as http://localhost:${window.location.port}${window.location.pathname}.`;
  return undefined;
}

/** The passkey this browser remembers for this page's origin; a malformed record is forgotten. */
export function rememberedPasskey(): RememberedPasskey | undefined {
  const raw = window.localStorage.getItem(STORAGE_KEY);
  if (!raw) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    value = undefined;
  }
  const parsed = rememberedSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  window.localStorage.removeItem(STORAGE_KEY);
  return undefined;
}

/** Creates a passkey (the authenticator asks its user) for this page's host and remembers it. */
export async function createPasskey(): Promise<RememberedPasskey> {
  const credential = await createWebAuthnCredential({ name: `Suanli renter ${new Date().toISOString().slice(0, 10)}` });
  const remembered = rememberedSchema.parse({ id: credential.id, publicKey: credential.publicKey, createdAt: new Date().toISOString() });
  window.localStorage.setItem(STORAGE_KEY, JSON.stringify(remembered));
  return remembered;
}

export function forgetPasskey(): void {
  window.localStorage.removeItem(STORAGE_KEY);
}

/** The smart account's owner: each user operation is one assertion of this passkey (one prompt). */
export const passkeyOwner = (passkey: RememberedPasskey): WebAuthnAccount => toWebAuthnAccount({ credential: { id: passkey.id, publicKey: passkey.publicKey as `0x${string}` } });
