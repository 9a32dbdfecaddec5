import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { devnetAccount } from "../../common/devnet.js";
import { sealingKeyPairFromSeed, sealingKeyStatement, sealSecret, verifySealingKey } from "../../common/sealed.js";
import { taskSpecSchema } from "../../common/protocols/task-spec.js";
import { sealSpec } from "../../sdk/actions/submitTask.js";

/** Sealed secrets (common/sealed.ts): HPKE to the provider's wallet-signed key, bound to lease and variable. */
describe("sealed secrets", () => {
  const provider = devnetAccount(1);
  const chainId = 31337;

  async function providerKey() {
    const pair = await sealingKeyPairFromSeed(randomBytes(32));
    const signature = await provider.signMessage({ message: sealingKeyStatement(chainId, provider.address, pair.publicKey) });
    return { pair, key: { publicKey: pair.publicKey, signature } };
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
