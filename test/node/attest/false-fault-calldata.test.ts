/**
 * The provider's false-fault disputer reads a landed liveness fault's signatures from the
 * transaction's input (node/attest/disputes/false-faults.ts faultSignaturesIn). A direct submitFault is
 * not the only way a fault lands: a liar that sends it through Multicall3 or a forwarder must not
 * hide its signature from the disputer (the earlier reader decoded direct calls only, and logged
 * anything else), nor bury it under signatures of throwaway keys.
 */
import assert from "node:assert/strict";
import { encodeFunctionData, parseAbi, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { leaseMarketAbi } from "../../../common/abi.js";
import { signFault } from "../../../common/chain/sign.js";
import { devnetAccount } from "../../../common/devnet.js";
import { FaultKind, suanliDomain, type Fault } from "../../../common/eip712.js";
import { SECP256K1_N } from "../../../common/signature.js";
import { faultSignaturesIn } from "../../../node/attest/disputes/false-faults.js";

const domain = suanliDomain(31337, "0x00000000000000000000000000000000000000aa");
const market = domain.verifyingContract;
const liars = [devnetAccount(6), devnetAccount(7)].sort((a, b) => (BigInt(a.address) < BigInt(b.address) ? -1 : 1));
const fault: Fault = { leaseId: 12n, kind: FaultKind.unresponsive, observedAt: 1_700_000_000 };
const wrappers = parseAbi([
  "struct Call3 { address target; bool allowFailure; bytes callData; }",
  "function aggregate3(Call3[] calls) payable returns ((bool success, bytes returnData)[])",
  "function execute(address to, uint256 value, bytes data)",
]);

const submitFault = (signatures: readonly Hex[], which = fault): Hex => encodeFunctionData({ abi: leaseMarketAbi, functionName: "submitFault", args: [which, signatures] });

describe("provider: a landed fault's signatures, read from any transaction that carries them", () => {
  let signatures: Hex[];
  before(async () => {
    signatures = await Promise.all(liars.map((account) => signFault(account, domain, fault)));
  });
  const expected = () => liars.map((account, i) => ({ attestor: account.address, signature: signatures[i]! }));

  it("reads a direct submitFault", () => {
    assert.deepEqual(faultSignaturesIn(domain, fault, submitFault(signatures)), expected());
  });

  it("reads the same call sent through Multicall3's aggregate3 and through a forwarder's execute (the inner selector shifts the words by 4 bytes)", () => {
    const multicall = encodeFunctionData({
      abi: wrappers,
      functionName: "aggregate3",
      args: [[{ target: market, allowFailure: false, callData: submitFault(signatures) }]],
    });
    assert.deepEqual(faultSignaturesIn(domain, fault, multicall), expected());
    const forwarded = encodeFunctionData({ abi: wrappers, functionName: "execute", args: [market, 0n, submitFault(signatures)] });
    assert.deepEqual(faultSignaturesIn(domain, fault, forwarded), expected());
  });

  it("finds the liars under 40 signatures of throwaway keys, and not in another fault's signatures or in high-s twins", async () => {
    const junk = await Promise.all(Array.from({ length: 40 }, async () => signFault(privateKeyToAccount(generatePrivateKey()), domain, fault)));
    const found = faultSignaturesIn(domain, fault, submitFault([...junk, ...signatures]));
    assert.equal(found.length, 42);
    for (const entry of expected())
      assert.deepEqual(
        found.find((held) => held.attestor === entry.attestor),
        entry,
      );

    const other: Fault = { ...fault, leaseId: 13n };
    const otherSignature = await signFault(liars[0]!, domain, other);
    const highS = (signature: Hex): Hex => {
      const s = BigInt(`0x${signature.slice(66, 130)}`);
      const v = parseInt(signature.slice(130), 16);
      return `${signature.slice(0, 66)}${(SECP256K1_N - s).toString(16).padStart(64, "0")}${(v === 27 ? 28 : 27).toString(16)}` as Hex;
    };
    // Any 65 bytes recover to some key; another fault's signature never to its signer's, and a high-s twin to none.
    const misread = faultSignaturesIn(domain, fault, submitFault([otherSignature, highS(signatures[1]!)], other));
    assert.equal(misread.length, 1);
    assert.ok(!liars.some((account) => account.address === misread[0]!.attestor));
    assert.deepEqual(faultSignaturesIn(domain, fault, "0x"), []);
  });
});
