import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { devnetAccount } from "../../common/devnet.js";
import { sealingKeyPairFromSeed, sealingKeyProblem, sealingKeyStatement, sealSecret, verifySealingKey } from "../../common/sealed.js";
import { taskSpecSchema } from "../../common/protocols/task-spec.js";
import { sealSpec } from "../../sdk/actions/submitTask.js";

/** Sealed secrets (common/sealed.ts): HPKE to the provider's wallet-signed key, bound to lease and variable. */
describe("sealed secrets", () => {
  const provider = devnetAccount(1);
  const chainId = 31337;

  const now = Math.floor(Date.now() / 1000);

  async function providerKey(expiresAt = now + 3600) {
    const pair = await sealingKeyPairFromSeed(randomBytes(32));
    const signature = await provider.signMessage({ message: sealingKeyStatement(chainId, provider.address, pair.publicKey, expiresAt) });
    return { pair, key: { publicKey: pair.publicKey, expiresAt, signature } };
  }

  it("opens only for the lease, variable and key it was sealed for", async () => {
    const { pair } = await providerKey();
    const sealed = await sealSecret(pair.publicKey, "hf_secret", { chainId, leaseId: 7n, name: "HF_TOKEN" });
    assert.ok(!sealed.includes(Buffer.from("hf_secret").toString("hex")));
    assert.equal(await pair.open(sealed, { chainId, leaseId: 7n, name: "HF_TOKEN" }), "hf_secret");
    await assert.rejects(pair.open(sealed, { chainId, leaseId: 8n, name: "HF_TOKEN" }));
    await assert.rejects(pair.open(sealed, { chainId, leaseId: 7n, name: "OTHER" }));
    await assert.rejects(pair.open(sealed, { chainId: 1, leaseId: 7n, name: "HF_TOKEN" }));
    const other = await sealingKeyPairFromSeed(randomBytes(32));
    await assert.rejects(other.open(sealed, { chainId, leaseId: 7n, name: "HF_TOKEN" }));
    // Two seals of the same value differ (fresh ephemeral key each time).
    assert.notEqual(sealed, await sealSecret(pair.publicKey, "hf_secret", { chainId, leaseId: 7n, name: "HF_TOKEN" }));
  });

  it("the SDK seals only to a key signed by the lease's provider, and never sends a secret without one", async () => {
    const { pair, key } = await providerKey();
    assert.equal(await verifySealingKey(key, provider.address, chainId), true);
    assert.equal(await verifySealingKey(key, devnetAccount(2).address, chainId), false, "another provider's key");
    assert.equal(await verifySealingKey(key, provider.address, 1), false, "another chain");
    const spec = taskSpecSchema.parse({ image: "x", command: "true", env: { PLAIN: "p", TOKEN: { value: "t0ken", secret: true } } });
    const sealed = await sealSpec(spec, key, provider.address, chainId, 5n);
    assert.equal(sealed.env.PLAIN, "p");
    const token = sealed.env.TOKEN as { sealed: string; secret: true };
    assert.equal(await pair.open(token.sealed, { chainId, leaseId: 5n, name: "TOKEN" }), "t0ken");
    assert.deepEqual(taskSpecSchema.parse(sealed).env.TOKEN, token, "the sealed spec is a valid wire spec");
    await assert.rejects(sealSpec(spec, undefined, provider.address, chainId, 5n), /no sealing key/);
    const swapped = { ...key, publicKey: (await sealingKeyPairFromSeed(randomBytes(32))).publicKey };
    await assert.rejects(sealSpec(spec, swapped, provider.address, chainId, 5n), /not signed by its wallet/);
    const noSecrets = taskSpecSchema.parse({ image: "x", command: "true", env: { PLAIN: "p" } });
    assert.equal(await sealSpec(noSecrets, undefined, provider.address, chainId, 5n), noSecrets);
  });
});

describe("sealed secrets: stale and unsigned keys (issue #33 item 9)", () => {
  const provider = devnetAccount(1);
  const chainId = 31337;
  // Read when each test starts, not when the file loads: a CI lane loads every file first and
  // may run this one minutes later, past a key made to expire 60 s after `now`.
  let now = 0;
  beforeEach(() => {
    now = Math.floor(Date.now() / 1000);
  });
  const spec = taskSpecSchema.parse({ image: "x", command: "true", env: { TOKEN: { value: "t0ken", secret: true } } });

  async function signedKey(expiresAt: number, signer = provider) {
    const pair = await sealingKeyPairFromSeed(randomBytes(32));
    const signature = await signer.signMessage({ message: sealingKeyStatement(chainId, provider.address, pair.publicKey, expiresAt) });
    return { publicKey: pair.publicKey, expiresAt, signature };
  }

  it("refuses to seal to a key past its expiry, saying it expired and when, and sends nothing", async () => {
    const stale = await signedKey(now - 60);
    assert.equal(await verifySealingKey(stale, provider.address, chainId), true, "a genuine key of the provider's");
    assert.equal(await sealingKeyProblem(stale, provider.address, chainId, now), "expired");
    await assert.rejects(sealSpec(spec, stale, provider.address, chainId, 5n), (error: Error & { metaMessages?: string[] }) => {
      assert.equal(error.name, "ProviderRequestError");
      assert.match(error.message, new RegExp(`expired at ${new Date(stale.expiresAt * 1000).toISOString().replace(/[.]/g, "\\.")}: the task's secrets were not sent`));
      assert.ok(error.metaMessages?.some((hint) => /rotate/.test(hint)));
      return true;
    });
    // The same key just before its expiry is used.
    const fresh = await signedKey(now + 60);
    assert.equal(await sealingKeyProblem(fresh, provider.address, chainId, now), undefined);
    assert.notEqual(await sealSpec(spec, fresh, provider.address, chainId, 5n), spec);
  });

  it("refuses a key whose expiry was stretched by someone on the way, or signed by another wallet, as unsigned", async () => {
    const key = await signedKey(now - 60);
    const stretched = { ...key, expiresAt: now + 86_400 };
    assert.equal(await sealingKeyProblem(stretched, provider.address, chainId, now), "unsigned");
    await assert.rejects(
      sealSpec(spec, stretched, provider.address, chainId, 5n),
      (error: Error) => error.name === "ProviderRequestError" && /not signed by its wallet/.test(error.message),
    );
    const byStranger = await signedKey(now + 3600, devnetAccount(3));
    assert.equal(await sealingKeyProblem(byStranger, provider.address, chainId, now), "unsigned");
    await assert.rejects(sealSpec(spec, byStranger, provider.address, chainId, 5n), /not signed by its wallet/);
  });
});
