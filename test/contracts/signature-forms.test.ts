/**
 * Off-chain and on-chain signature verdicts agree. An offer is signed by @noble/curves (an
 * implementation independent of both viem's accounts and the node's libsecp256k1 recovery) and
 * encoded in every convention found in the wild: v = 27/28, v = 0/1 (y parity), 64-byte EIP-2098
 * compact, high-s (malleated), and broken ones. For each form the node's verdict (the offer
 * message schema plus TypedDataRecoverer, what common/offers/validate.ts runs), the pure check
 * the SDK and browsers can use (common/signature.ts) and the fault recovery of common/attest must
 * equal the contract's: openLease simulated on a real hardhat chain succeeds or reverts with
 * InvalidSignature.
 */
import assert from "node:assert/strict";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { BaseError, ContractFunctionRevertedError, bytesToHex, getAddress, hexToBytes, type Hex } from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { recoverFaultSigner } from "../../common/attest/liveness.js";
import { TypedDataRecoverer } from "../../common/eip712-recover.js";
import { signatureSchema } from "../../common/schemas.js";
import { SECP256K1_N, contractSignatureProblem, isContractSignature } from "../../common/signature.js";
import { connect, deploySuanli, makeOffer, terms, type Connection } from "./support/suanli.js";

/** Hardhat's default accounts (deploySuanli: index 1 is the provider of machine 1). */
const MNEMONIC = "test test test test test test test test test test test junk";

function privateKey(index: number): Uint8Array {
  const key = mnemonicToAccount(MNEMONIC, { addressIndex: index }).getHdKey().privateKey;
  if (!key) throw new Error("no private key");
  return key;
}

const word = (value: bigint) => value.toString(16).padStart(64, "0");

/** Every encoding of a signature of `digest` by `key` that some library produces or an attacker could send. */
function forms(digest: Hex, key: Uint8Array): { name: string; signature: Hex }[] {
  const signed = secp256k1.Signature.fromBytes(secp256k1.sign(hexToBytes(digest), key, { prehash: false, lowS: true, format: "recovered" }), "recovered");
  const { r, s } = signed;
  const parity = signed.recovery!;
  const high = SECP256K1_N - s;
  const rs = `0x${word(r)}${word(s)}`;
  const byte = (v: number) => v.toString(16).padStart(2, "0");
  return [
    { name: "r, s, v = 27/28", signature: `${rs}${byte(27 + parity)}` as Hex },
    { name: "r, s, v = 0/1", signature: `${rs}${byte(parity)}` as Hex },
    { name: "r, s, v = 27/28 flipped", signature: `${rs}${byte(28 - parity)}` as Hex },
    { name: "r, s, v = 29/30", signature: `${rs}${byte(29 + parity)}` as Hex },
    { name: "r, s, v = 35 + parity (EIP-155 style)", signature: `${rs}${byte(35 + parity)}` as Hex },
    { name: "64-byte EIP-2098 compact (r, yParity|s)", signature: `0x${word(r)}${word((BigInt(parity) << 255n) | s)}` as Hex },
    { name: "64-byte r, s without v", signature: rs as Hex },
    { name: "high s (n - s), v flipped to 27/28", signature: `0x${word(r)}${word(high)}${byte(28 - parity)}` as Hex },
    { name: "high s (n - s), v flipped to 0/1", signature: `0x${word(r)}${word(high)}${byte(1 - parity)}` as Hex },
    { name: "high s (n - s), v unchanged", signature: `0x${word(r)}${word(high)}${byte(27 + parity)}` as Hex },
    { name: "s = 0", signature: `0x${word(r)}${word(0n)}${byte(27 + parity)}` as Hex },
    { name: "r = 0", signature: `0x${word(0n)}${word(s)}${byte(27 + parity)}` as Hex },
    { name: "r = r + n (does not fit r < n)", signature: `0x${word(r + SECP256K1_N < 1n << 256n ? r + SECP256K1_N : SECP256K1_N)}${word(s)}${byte(27 + parity)}` as Hex },
    { name: "66 bytes (a trailing zero)", signature: `${rs}${byte(27 + parity)}00` as Hex },
    { name: "no signature", signature: "0x" },
  ];
}

describe("signature forms: off-chain verdicts equal the contracts'", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  async function suanliFixture() {
    return deploySuanli(connection);
  }
  const load = () => connection.networkHelpers.loadFixture(suanliFixture);

  /** The contract's verdict: openLease (simulated, nothing mined) accepts the signature or reverts with InvalidSignature. */
  async function onChainAccepts(s: Awaited<ReturnType<typeof load>>, offer: Awaited<ReturnType<typeof makeOffer>>, signature: Hex): Promise<boolean> {
    try {
      await s.market.simulate.openLease([offer, signature, terms()], { account: s.renter!.account.address });
      return true;
    } catch (error) {
      const reverted = error instanceof BaseError ? error.walk((e) => e instanceof ContractFunctionRevertedError) : null;
      assert.ok(reverted instanceof ContractFunctionRevertedError, `openLease failed for another reason than a revert: ${String(error)}`);
      assert.equal(reverted.data?.errorName, "InvalidSignature", `openLease reverted with ${reverted.data?.errorName}, not InvalidSignature`);
      return false;
    }
  }

  it("offers: the node's validator and the SDK's check accept exactly the forms openLease accepts", async () => {
    const s = await load();
    const providerKey = privateKey(1);
    assert.equal(mnemonicToAccount(MNEMONIC, { addressIndex: 1 }).address, getAddress(s.provider!.account.address));
    const recoverer = new TypedDataRecoverer(s.chainId, s.market.address);
    const verdicts: string[] = [];
    // Several offers, and more until both recovery parities (and so both v values) occurred: six
    // random offers share one parity 1 time in 32; 64 offers, 1 in 2⁶³.
    const parities = new Set<number>();
    for (let round = 0; round < 64 && (round < 6 || parities.size < 2); round++) {
      const offer = await makeOffer(s);
      const digest = recoverer.digest("Offer", offer);
      const compact = secp256k1.sign(hexToBytes(digest), providerKey, { prehash: false, format: "recovered" });
      parities.add(compact[0]!);
      for (const { name, signature } of forms(digest, providerKey)) {
        const chain = await onChainAccepts(s, offer, signature);
        const node = signatureSchema.safeParse(signature).success && recoverer.recoverSigner("Offer", offer, signature) === getAddress(offer.provider);
        const pure = isContractSignature(signature);
        assert.equal(node, chain, `${name}: the node says ${node ? "valid" : "invalid"}, openLease says ${chain ? "valid" : "invalid"}`);
        // The pure check is necessary, not sufficient (it recovers no key): it may only refuse what the chain refuses.
        if (chain) assert.ok(pure, `${name}: accepted on-chain but refused by contractSignatureProblem`);
        if (!pure) assert.equal(chain, false, `${name}: refused by contractSignatureProblem (${contractSignatureProblem(signature)}) but accepted on-chain`);
        if (round === 0) verdicts.push(`${name}: ${chain ? "accepted" : "refused"}`);
      }
    }
    assert.deepEqual([...parities].sort(), [0, 1], "both recovery parities were exercised");
    // What a user reading the docs expects: only the 65-byte, v = 27/28, low-s form is valid.
    assert.deepEqual(
      verdicts.filter((line) => line.endsWith("accepted")),
      ["r, s, v = 27/28: accepted"],
    );
  });

  it("faults: recovery refuses every form the contracts refuse, and recovers the attestor for the one they accept", async () => {
    const s = await load();
    const recoverer = new TypedDataRecoverer(s.chainId, s.market.address);
    const attestor = mnemonicToAccount(MNEMONIC, { addressIndex: 5 });
    const fault = { leaseId: 1n, kind: 1, observedAt: 1_000 };
    const digest = recoverer.digest("Fault", fault);
    for (const { name, signature } of forms(digest, privateKey(5))) {
      // Flipping v recovers some other key: valid in form, but not the attestor's signature.
      const expected = name === "r, s, v = 27/28" ? attestor.address : name === "r, s, v = 27/28 flipped" ? "someone else" : undefined;
      const verdict = (recovered: string | undefined) => (recovered === undefined || recovered === attestor.address ? recovered : "someone else");
      assert.equal(verdict(recoverer.recoverSigner("Fault", fault, signature)), expected, `${name} (TypedDataRecoverer)`);
      assert.equal(verdict(await recoverFaultSigner(s.domain, fault, signature)), expected, `${name} (recoverFaultSigner)`);
    }
  });

  it("contractSignatureProblem says what is wrong", () => {
    const r = word(1n);
    assert.match(contractSignatureProblem(`0x${r}${word(1n)}`)!, /64 bytes/);
    assert.match(contractSignatureProblem(`0x${r}${word(1n)}00`)!, /v = 0/);
    assert.match(contractSignatureProblem(`0x${r}${word(SECP256K1_N / 2n + 1n)}1b`)!, /high-s/);
    assert.match(contractSignatureProblem(`0x${word(0n)}${word(1n)}1c`)!, /r is not/);
    assert.match(contractSignatureProblem("0xzz")!, /not hex/);
    assert.equal(contractSignatureProblem(bytesToHex(new Uint8Array([...new Uint8Array(31), 1, ...new Uint8Array(31), 1, 27]))), undefined);
  });
});
