import assert from "node:assert/strict";
import fc from "fast-check";
import { bytesToHex, hashTypedData, keccak256, recoverAddress, type Address, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { TypedDataRecoverer, recoverDigestSigner, signDigest } from "../../common/eip712-recover.js";
import { suanliDomain, suanliTypes } from "../../common/eip712.js";
import { keccak256Bytes, keccakReady } from "../../common/keccak.js";

const market: Address = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const address = fc.uint8Array({ minLength: 20, maxLength: 20 }).map((b) => `0x${Buffer.from(b).toString("hex")}` as Address);
const bytes32 = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => `0x${Buffer.from(b).toString("hex")}` as Hex);
const uint = (bits: number) => fc.bigInt({ min: 0n, max: (1n << BigInt(bits)) - 1n });
const uintN = (bits: number) => fc.integer({ min: 0, max: 2 ** bits - 1 });

describe("fast EIP-712 digests", () => {
  it("equal viem's hashTypedData for random Offers, Attestations, Completions and RenterRequests", () => {
    const chainId = 31337;
    const recoverer = new TypedDataRecoverer(chainId, market);
    const domain = suanliDomain(chainId, market);
    const offer = fc.record({
      provider: address,
      machineId: uintN(32),
      model: bytes32,
      pricePerUnitSecond: uint(96),
      minBidPerUnitSecond: uint(96),
      minDuration: uintN(32),
      maxDuration: uintN(32),
      collateralBps: uintN(16),
      startWindow: uintN(32),
      nonce: uint(64),
      expiry: uintN(32),
      renter: address,
    });
    const attestation = fc.record({
      provider: address,
      machineId: uintN(32),
      model: bytes32,
      units: uintN(16),
      vramMiB: uintN(32),
      throughput: uint(64),
      issuedAt: uintN(32),
      expiry: uintN(32),
      challengeId: bytes32,
      root: bytes32,
      gpus: bytes32,
      cc: bytes32,
      failures: uintN(16),
      lastFailureAt: uintN(32),
    });
    const completion = fc.record({ leaseId: uint(256), exitCode: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), outputDigest: bytes32, unitSeconds: uint(64) });
    const renterRequest = fc.record({
      leaseId: uint(256),
      provider: address,
      action: fc.string({ maxLength: 40 }),
      bodyHash: bytes32,
      issuedAt: uintN(32),
      nonce: bytes32,
    });
    const check = (primaryType: "Offer" | "Attestation" | "Completion" | "RenterRequest") => (message: Record<string, unknown>) => {
      const expected = hashTypedData({ domain, types: suanliTypes, primaryType, message } as Parameters<typeof hashTypedData>[0]);
      assert.equal(recoverer.digest(primaryType, message), expected);
    };
    fc.assert(fc.property(offer, check("Offer")), { numRuns: 150 });
    fc.assert(fc.property(attestation, check("Attestation")), { numRuns: 100 });
    fc.assert(fc.property(completion, check("Completion")), { numRuns: 100 });
    fc.assert(fc.property(renterRequest, check("RenterRequest")), { numRuns: 100 });
  });

  it("refuses values that do not fit their field", () => {
    const recoverer = new TypedDataRecoverer(1, market);
    assert.throws(
      () =>
        recoverer.digest("Attestation", {
          provider: market,
          machineId: 2 ** 32,
          model: `0x${"00".repeat(32)}`,
          units: 1,
          vramMiB: 1,
          throughput: 1n,
          challengeId: `0x${"00".repeat(32)}` as const,
          root: `0x${"00".repeat(32)}` as const,
          gpus: `0x${"00".repeat(32)}` as const,
          cc: `0x${"00".repeat(32)}` as const,
          failures: 0,
          lastFailureAt: 0,
          issuedAt: 1,
          expiry: 1,
        }),
      RangeError,
    );
  });

  it("recovers what libsecp256k1 and viem accounts sign, and rejects malleable signatures", async () => {
    const key = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d" as const;
    const account = privateKeyToAccount(key);
    const digest = new TypedDataRecoverer(1, market).digest("Fault", { leaseId: 7n, kind: 1, observedAt: 99 });
    const fast = signDigest(digest, key);
    assert.equal(fast, await account.sign({ hash: digest }));
    assert.equal(recoverDigestSigner(digest, fast), account.address);
    // The same signature with s replaced by n - s (and v flipped) is valid ECDSA, but malleable.
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const s = BigInt(`0x${fast.slice(66, 130)}`);
    const flipped = `${fast.slice(0, 66)}${(n - s).toString(16).padStart(64, "0")}${fast.endsWith("1b") ? "1c" : "1b"}` as Hex;
    assert.equal(recoverDigestSigner(digest, flipped), undefined);
  });
});

describe("fast keccak and signer recovery", () => {
  it("hash exactly as viem's keccak256", async () => {
    const input = fc.uint8Array({ minLength: 0, maxLength: 700 });
    await keccakReady;
    fc.assert(
      fc.property(input, (bytes) => assert.equal(bytesToHex(keccak256Bytes(bytes)), keccak256(bytes))),
      { numRuns: 200 },
    );
  });

  it("recover the checksummed address viem recovers, for random keys and digests", async () => {
    await keccakReady;
    const recoverer = new TypedDataRecoverer(31337, market);
    const key = fc
      .uint8Array({ minLength: 32, maxLength: 32 })
      .filter((b) => b.some((x) => x !== 0) && BigInt(`0x${Buffer.from(b).toString("hex")}`) < 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n);
    await fc.assert(
      fc.asyncProperty(key, bytes32, async (privateKey, digest) => {
        const hexKey = `0x${Buffer.from(privateKey).toString("hex")}` as Hex;
        const signature = signDigest(digest, hexKey);
        const expected = privateKeyToAccount(hexKey).address;
        assert.equal(await recoverAddress({ hash: digest, signature }), expected);
        assert.equal(recoverDigestSigner(digest, signature), expected);
      }),
      { numRuns: 60 },
    );
    // Typed data: the same signer through recoverSigner as through digest + recover.
    const account = privateKeyToAccount("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");
    const attestation = {
      provider: account.address,
      machineId: 3,
      model: `0x${"11".repeat(32)}` as Hex,
      units: 8,
      vramMiB: 81_920,
      throughput: 2n ** 60n + 7n,
      challengeId: `0x${"00".repeat(32)}` as const,
      root: `0x${"00".repeat(32)}` as const,
      gpus: `0x${"00".repeat(32)}` as const,
      cc: `0x${"00".repeat(32)}` as const,
      failures: 0,
      lastFailureAt: 0,
      issuedAt: 1,
      expiry: 2,
    };
    const signature = await account.signTypedData({ domain: suanliDomain(31337, market), types: suanliTypes, primaryType: "Attestation", message: attestation });
    assert.equal(recoverer.recoverSigner("Attestation", attestation, signature), account.address);
    assert.equal(recoverer.recover(recoverer.digest("Attestation", attestation), signature), account.address);
  });

  it("accept s up to half the group order and nothing above, nor s = 0", async () => {
    const digest = `0x${"42".repeat(32)}` as Hex;
    const r = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"; // a valid x coordinate
    const halfN = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;
    const withS = (s: bigint) => `0x${r}${s.toString(16).padStart(64, "0")}1b` as Hex;
    assert.equal(recoverDigestSigner(digest, withS(halfN)), await recoverAddress({ hash: digest, signature: withS(halfN) }));
    assert.equal(recoverDigestSigner(digest, withS(halfN + 1n)), undefined);
    assert.equal(recoverDigestSigner(digest, withS(0n)), undefined);
    assert.equal(recoverDigestSigner(digest, withS(1n)), await recoverAddress({ hash: digest, signature: withS(1n) }));
  });

  it("encode large and small integers alike (float fast path and BigInt path)", () => {
    const chainId = 31337;
    const recoverer = new TypedDataRecoverer(chainId, market);
    const domain = suanliDomain(chainId, market);
    for (const throughput of [0n, 1n, 255n, 256n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 64n - 1n]) {
      for (const machineId of [1, 255, 256, 2 ** 31, 2 ** 32 - 1]) {
        const message = {
          provider: market,
          machineId,
          model: `0x${"ab".repeat(32)}` as Hex,
          units: 8,
          vramMiB: 65_536,
          throughput,
          issuedAt: 1_700_000_000,
          expiry: 1_700_003_600,
          challengeId: `0x${"cd".repeat(32)}` as Hex,
          root: `0x${"ef".repeat(32)}` as Hex,
          gpus: `0x${"01".repeat(32)}` as Hex,
          cc: `0x${"02".repeat(32)}` as Hex,
          failures: 0,
          lastFailureAt: 0,
        };
        assert.equal(recoverer.digest("Attestation", message), hashTypedData({ domain, types: suanliTypes, primaryType: "Attestation", message }));
      }
    }
    assert.throws(
      () =>
        recoverer.digest("Attestation", {
          provider: market,
          machineId: 1,
          model: `0x${"00".repeat(32)}`,
          units: 2 ** 16,
          vramMiB: 1,
          throughput: 1n,
          challengeId: `0x${"00".repeat(32)}` as const,
          root: `0x${"00".repeat(32)}` as const,
          gpus: `0x${"00".repeat(32)}` as const,
          cc: `0x${"00".repeat(32)}` as const,
          failures: 0,
          lastFailureAt: 0,
          issuedAt: 1,
          expiry: 1,
        }),
      RangeError,
    );
    assert.throws(
      () =>
        recoverer.digest("Attestation", {
          provider: market,
          machineId: -1,
          model: `0x${"00".repeat(32)}`,
          units: 1,
          vramMiB: 1,
          throughput: 1n,
          challengeId: `0x${"00".repeat(32)}` as const,
          root: `0x${"00".repeat(32)}` as const,
          gpus: `0x${"00".repeat(32)}` as const,
          cc: `0x${"00".repeat(32)}` as const,
          failures: 0,
          lastFailureAt: 0,
          issuedAt: 1,
          expiry: 1,
        }),
      RangeError,
    );
    assert.throws(
      () =>
        recoverer.digest("Attestation", {
          provider: market,
          machineId: 1,
          model: `0x${"00".repeat(32)}`,
          units: 1,
          vramMiB: 1,
          throughput: 2n ** 64n,
          challengeId: `0x${"00".repeat(32)}` as const,
          root: `0x${"00".repeat(32)}` as const,
          gpus: `0x${"00".repeat(32)}` as const,
          cc: `0x${"00".repeat(32)}` as const,
          failures: 0,
          lastFailureAt: 0,
          issuedAt: 1,
          expiry: 1,
        }),
      RangeError,
    );
  });
});
