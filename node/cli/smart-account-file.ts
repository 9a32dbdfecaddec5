/**
 * The owner file of `--smart-account FILE` (docs/aa.md "The CLI with a passkey"): either a key file (0x + 64 hex digits:
 * its key owns a SimpleAccount) or a passkey file (JSON, `"type": "webauthn-p256"`: its P-256 key owns a
 * PasskeyAccount, signing as a software passkey), told apart by content. And `wallet passkey new`'s writer.
 */
import { readFile, stat, writeFile } from "node:fs/promises";
import type { LocalAccount } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { WebAuthnAccount } from "viem/account-abstraction";
import { newPasskeyFile, passkeyFileSchema, softwareAuthenticator, PASSKEY_FILE_TYPE, type PasskeyFile } from "../../common/software-passkey.js";
import { describeIssues } from "../../common/validation.js";

const KEY_PATTERN = /^0x[0-9a-fA-F]{64}$/;

/** What a smart account's owner file holds: its kind and the viem account that signs for it. */
export type SmartAccountOwner = { kind: "key"; owner: LocalAccount } | { kind: "passkey"; owner: WebAuthnAccount; passkey: PasskeyFile };

/** Reads and checks `--smart-account FILE`; every problem found (none when it returns an owner) goes to `problem`. */
export async function readSmartAccountOwner(file: string, problem: (message: string) => void, flag = "--smart-account"): Promise<SmartAccountOwner | undefined> {
  let text: string;
  let mode: number;
  try {
    [text, mode] = await Promise.all([readFile(file, "utf8"), stat(file).then((stat) => stat.mode)]);
  } catch (error) {
    problem(`Cannot read ${flag} ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
    return undefined;
  }
  const content = text.trim();
  if (KEY_PATTERN.test(content)) return { kind: "key", owner: privateKeyToAccount(content as `0x${string}`) };
  if (!content.startsWith("{")) {
    problem(
      `${flag} ${file} is neither a key file (0x followed by 64 hex digits) nor a passkey file (JSON with "type": "${PASSKEY_FILE_TYPE}", made by \`suanli wallet passkey new --out FILE\`)`,
    );
    return undefined;
  }
  let json: unknown;
  try {
    json = JSON.parse(content);
  } catch (error) {
    // Where, never what: JSON.parse's message quotes the text around the fault, which may be the private key.
    const where = /line \d+ column \d+|position \d+/.exec((error as Error).message)?.[0];
    problem(`${flag} ${file} is not valid JSON${where ? ` (at ${where})` : ""}: a passkey file is one JSON object, as \`suanli wallet passkey new\` writes it`);
    return undefined;
  }
  const parsed = passkeyFileSchema.safeParse(json);
  let bad = false;
  if (!parsed.success) {
    const issues = describeIssues(passkeyFileSchema, parsed.error).map((issue) => `${issue.path || "(the file)"} ${issue.message}`);
    problem(`${flag} ${file} is not a valid passkey file: ${issues.join("; ")}`);
    bad = true;
  }
  // A passkey file holds a private key: like ssh's, refused when others may read or change it.
  if ((mode & 0o077) !== 0) {
    problem(`${flag} ${file} is open to other users (mode ${(mode & 0o777).toString(8).padStart(4, "0")}): a passkey file holds a private key; run chmod 600 ${file}`);
    bad = true;
  }
  if (bad || !parsed.success) return undefined;
  return { kind: "passkey", owner: softwareAuthenticator(parsed.data).account, passkey: parsed.data };
}

/**
 * Writes a new passkey file at `file` (mode 0600, never over an existing file: a lost key is a lost account) and returns
 * its content.
 */
export async function writeNewPasskeyFile(file: string, rpId: string): Promise<PasskeyFile> {
  const passkey = newPasskeyFile(rpId);
  await writeFile(file, `${JSON.stringify(passkey, null, 2)}\n`, { mode: 0o600, flag: "wx" });
  return passkey;
}
