import assert from "node:assert/strict";
import { keccak256, toBytes } from "viem";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { readCompletionReport, signCompletion, verifyCompletion } from "../../common/attest/completion.js";
import { readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { suanliDomain } from "../../common/eip712.js";
import { DURATION, openActiveLease, PRICE, TEST_MACHINE } from "../support/attest.js";
import { fund, registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";

describe("result attestation: the renter checks the provider's signed completion report", function () {
  this.timeout(60_000);
  let devnet: Devnet;
  before(async () => {
    devnet = await startDevnet();
  });
  after(async () => devnet?.close());

  it("accepts the lease provider's report that matches the chain and rejects every other", async () => {
    const market = devnet.deployment.contracts.market!;
    const domain = suanliDomain(devnet.deployment.chainId, market);
    const provider = await devnet.wallet(1);
    const renter = await devnet.wallet(5);
    const [machineId] = await registerProvider(devnet, provider, { peerId: "12D3KooWCompletionProvider", stake: 10_000_000n, machines: [TEST_MACHINE] });
    await fund(devnet, renter, PRICE * BigInt(DURATION));
    await send(renter, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [market, PRICE * BigInt(DURATION)] });
    const leaseId = await openActiveLease(devnet, renter, 1, machineId!);
    const { provider: leaseProvider } = await readLease(devnet.admin.publicClient, market, leaseId);

    // Before the provider reports on-chain there is nothing to compare with.
    assert.equal(await readCompletionReport(devnet.admin.publicClient, market, leaseId, devnet.deployment.deploymentBlock), null);

    const report = { leaseId, exitCode: 0, outputDigest: keccak256(toBytes("the output")), unitSeconds: 1_234n };
    const signed = await signCompletion(devnetAccount(1), domain, report);
    const early = await verifyCompletion(signed, { domain, provider: leaseProvider });
    assert.deepEqual(early, { valid: true, report, signer: devnetAccount(1).address, onChain: false });
    const notReported = await verifyCompletion(signed, { domain, provider: leaseProvider, onChain: null });
    assert.equal(notReported.valid === false && notReported.reason, "not_reported");

    await send(provider, { address: market, abi: leaseMarketAbi, functionName: "complete", args: [leaseId, report.exitCode, report.outputDigest, report.unitSeconds] });
    const onChain = await readCompletionReport(devnet.admin.publicClient, market, leaseId, devnet.deployment.deploymentBlock);
    assert.deepEqual(onChain, { exitCode: 0, outputDigest: report.outputDigest, unitSeconds: 1_234n });

    // The report as it travels (JSON, bigints as strings) verifies against the chain.
    const wire = JSON.parse(JSON.stringify(signed, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v))) as Parameters<typeof verifyCompletion>[0];
    const verdict = await verifyCompletion(wire, { domain, provider: leaseProvider, onChain });
    assert.equal(verdict.valid, true);
    assert.equal(verdict.valid && verdict.onChain, true);

    // Signed by someone else than the lease's provider.
    const byRenter = await signCompletion(devnetAccount(5), domain, report);
    const wrongSigner = await verifyCompletion(byRenter, { domain, provider: leaseProvider, onChain });
    assert.equal(wrongSigner.valid === false && wrongSigner.reason, "wrong_signer");
    // A field changed after signing.
    const tampered = await verifyCompletion({ ...signed, report: { ...report, exitCode: 1 } }, { domain, provider: leaseProvider, onChain });
    assert.equal(tampered.valid === false && tampered.reason, "wrong_signer");
    // Signed for another deployment (domain) of the contracts.
    const elsewhere = await signCompletion(devnetAccount(1), suanliDomain(1, market), report);
    assert.equal((await verifyCompletion(elsewhere, { domain, provider: leaseProvider })).valid, false);
    // Properly signed, but not what the provider reported on-chain.
    const otherDigest = await signCompletion(devnetAccount(1), domain, { ...report, outputDigest: keccak256(toBytes("other output")) });
    const mismatch = await verifyCompletion(otherDigest, { domain, provider: leaseProvider, onChain });
    assert.equal(mismatch.valid === false && mismatch.reason, "onchain_mismatch");
    // Not a report at all.
    const malformed = await verifyCompletion({ report: { ...report, exitCode: 2 ** 40 }, signature: signed.signature }, { domain, provider: leaseProvider });
    assert.equal(malformed.valid === false && malformed.reason, "malformed");
  });
});
