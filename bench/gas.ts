/**
 * `npm run bench -- gas [--json]`: gasUsed (from transaction receipts) of the Suanli contract
 * operations on Hardhat's in-process network, deployed by the real deploy script.
 *
 * Steady state: before anything is measured, a full lease cycle has run, so the renter and the
 * provider already hold token balances, the market already holds deposits, the provider's
 * reputation counters are nonzero and the provider's offer-nonce bitmap word is in use. A fresh
 * account's first transfer or first counter costs ~17,000 gas more (a zero-to-nonzero storage
 * write); that is a one-time cost, not what every lease pays. The first-time rows measure it: a
 * renter's first openLeaseWithPermit (its permit nonce goes from zero) and a new provider's first
 * lease (open, activate, complete on the machine it just added).
 *
 * `--trace openLease,claim` prints, for each transaction of those functions, where its gas went
 * (storage reads and writes, logs and calls; bench/_trace.ts).
 */
import { network } from "hardhat";
import { zeroAddress, type Address, type Hash, type Hex } from "viem";
import { attestorStakingAbi, leaseMarketAbi, providerRegistryAbi, sessionKeysAbi, testTokenAbi } from "../common/abi.js";
import { disputeCommitArgs, signCommit } from "../common/attest/commit.js";
import { signProbeReceipt } from "../common/attest/liveness.js";
import { orderFaultSignatures } from "../common/chain/market.js";
import { signAttestation, signFault, signOffer, signSettlement } from "../common/chain/sign.js";
import { signPermit } from "../common/chain/tx.js";
import { suanliDomain, type Offer } from "../common/eip712.js";
import { modelHash } from "../common/gpu.js";
import { deployContracts } from "../node/chain/deploy.js";
import { machineCommitFixture } from "../test/support/machine-commit.js";

/** Targets from issue #19 (a benchmark, not a test: the table says whether each is met). */
const TARGETS: Record<string, number> = {
  openLease: 130_000,
  openLeaseWithPermit: 165_000,
  activate: 30_000,
  claim: 45_000,
  "claimMany (per lease, 10 leases)": 15_000,
  "close (renter)": 70_000,
  "complete (provider)": 85_000,
  "whole lease (open + activate + complete)": 245_000,
};

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const traceAt = args.indexOf("--trace");
  const traced = new Set(traceAt >= 0 ? (args[traceAt + 1] ?? "").split(",").filter(Boolean) : []);
  const { viem, networkHelpers } = await network.create();
  const publicClient = await viem.getPublicClient();
  const wallets = await viem.getWalletClients();
  if (wallets.length < 8) throw new Error(`the gas bench needs 8 funded accounts; the network has ${wallets.length}`);
  type AnyWallet = (typeof wallets)[number];
  const [deployer, provider, renter, attestorA, attestorB, newcomer, permitRenter, newRenter] = wallets as [
    AnyWallet,
    AnyWallet,
    AnyWallet,
    AnyWallet,
    AnyWallet,
    AnyWallet,
    AnyWallet,
    AnyWallet,
  ];
  const deployment = await deployContracts({
    publicClient,
    walletClient: deployer,
    params: { faultQuorum: 2, preemptionNotice: 30, unbondingDelay: 60 },
    attestors: [attestorA.account.address, attestorB.account.address],
  });
  const token = deployment.contracts.token;
  const registry = deployment.contracts.registry!;
  const market = deployment.contracts.market!;
  const domain = suanliDomain(await publicClient.getChainId(), market);
  const A100 = modelHash("A100-80GB");
  const maxUint = 2n ** 256n - 1n;

  type Wallet = typeof provider;
  async function send(
    wallet: Wallet,
    address: Address,
    abi: typeof leaseMarketAbi | typeof providerRegistryAbi | typeof testTokenAbi | typeof attestorStakingAbi | typeof sessionKeysAbi,
    functionName: string,
    args: readonly unknown[],
  ): Promise<bigint> {
    const hash: Hash = await wallet.writeContract({ address, abi, functionName, args, account: wallet.account } as never);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (traced.has(functionName)) await (await import("./_trace.js")).traceSummary(publicClient as never, hash, `${functionName}: gasUsed ${receipt.gasUsed}`);
    if (receipt.status !== "success") throw new Error(`${functionName} reverted`);
    return receipt.gasUsed;
  }
  const reg = (wallet: Wallet, fn: string, args: readonly unknown[]) => send(wallet, registry, providerRegistryAbi, fn, args);
  const mkt = (wallet: Wallet, fn: string, args: readonly unknown[]) => send(wallet, market, leaseMarketAbi, fn, args);
  const tok = (wallet: Wallet, fn: string, args: readonly unknown[]) => send(wallet, token, testTokenAbi, fn, args);

  // Actors hold balances and allowances already (steady state).
  for (const wallet of [provider, renter, newcomer]) {
    await tok(wallet, "faucet", [wallet.account.address, 1_000_000n * 10n ** 6n]);
    await tok(wallet, "approve", [registry, maxUint]);
    await tok(wallet, "approve", [market, maxUint]);
  }
  await reg(provider, "register", ["12D3KooWBenchProvider", "https://provider.example/meta.json"]);
  await reg(provider, "stake", [500_000n * 10n ** 6n]);
  await reg(provider, "addMachine", [A100, 1024, 81_920, 1, "eu-west", `0x${"00".repeat(32)}`]);
  await reg(provider, "addMachine", [A100, 2, 81_920, 1, "eu-west", `0x${"00".repeat(32)}`]);
  const big = 1;
  const small = 2;

  let nonce = 1n;
  async function offer(machineId: number, overrides: Partial<Offer> = {}, signer: Wallet = provider): Promise<{ offer: Offer; signature: Hex }> {
    const now = Number((await publicClient.getBlock()).timestamp);
    const o: Offer = {
      provider: signer.account.address,
      machineId,
      model: A100,
      pricePerUnitSecond: 100n,
      minBidPerUnitSecond: 40n,
      minDuration: 60,
      maxDuration: 30 * 24 * 3600,
      collateralBps: 5_000,
      startWindow: 600,
      nonce: nonce++,
      expiry: now + 3600,
      renter: zeroAddress,
      ...overrides,
    };
    return { offer: o, signature: await signOffer(signer, domain, o) };
  }
  const terms = (units: number, extra: Partial<{ interruptible: boolean; bidPerUnitSecond: bigint; preempt: bigint[] }> = {}) => ({
    units,
    duration: 3600,
    maxPricePerUnitSecond: 1_000n,
    interruptible: false,
    bidPerUnitSecond: 0n,
    preempt: [] as bigint[],
    ...extra,
  });
  const publicOffer = await offer(big, { expiry: Number((await publicClient.getBlock()).timestamp) + 30 * 24 * 3600 });
  async function openLease(t = terms(2), o = publicOffer): Promise<{ leaseId: bigint; gas: bigint }> {
    const leaseId = (await publicClient.readContract({ address: market, abi: leaseMarketAbi, functionName: "nextLeaseId" })) as bigint;
    const gas = await mkt(renter, "openLease", [o.offer, o.signature, t]);
    return { leaseId, gas };
  }
  async function openActive(t = terms(2), o = publicOffer) {
    const { leaseId } = await openLease(t, o);
    await mkt(provider, "activate", [leaseId]);
    return leaseId;
  }

  // Warm-up: a full cycle (claim, completion, renter-bound nonce use) and a lease that stays open.
  const warm = await openActive();
  // Past the fault window, so the claim and the completion both pay (they pay until now - 600).
  await networkHelpers.time.increase(660);
  await mkt(provider, "claim", [warm]);
  await mkt(provider, "complete", [warm, 0, `0x${"11".repeat(32)}`, 120n]);
  const warmBound = await offer(big, { renter: renter.account.address });
  await openActive(terms(1), warmBound);

  const gas: Record<string, bigint> = {};
  gas["register+stake"] = (await reg(newcomer, "register", ["12D3KooWNewcomer", "https://newcomer.example/meta.json"])) + (await reg(newcomer, "stake", [100_000n * 10n ** 6n]));
  gas.addMachine = await reg(newcomer, "addMachine", [A100, 8, 81_920, 1, "us-east", `0x${"00".repeat(32)}`]);

  const opened = await openLease();
  gas.openLease = opened.gas;
  gas["openLease (renter-bound offer)"] = (await openLease(terms(2), await offer(big, { renter: renter.account.address }))).gas;
  // A renter with tokens but no allowance: the EIP-2612 permit rides along with the open.
  async function openWithPermit(wallet: Wallet): Promise<bigint> {
    const deposit = 2n * 100n * 3600n;
    const deadline = BigInt(Number((await publicClient.getBlock()).timestamp) + 3600);
    const permit = await signPermit({ publicClient, walletClient: wallet }, { owner: wallet.account, token, spender: market, value: deposit, deadline, chainId: domain.chainId });
    if (!permit) throw new Error("the test token has no EIP-2612 permit");
    return mkt(wallet, "openLeaseWithPermit", [publicOffer.offer, publicOffer.signature, terms(2), permit]);
  }
  await tok(permitRenter, "faucet", [permitRenter.account.address, 10_000_000n]);
  await tok(permitRenter, "transfer", [renter.account.address, 1n]);
  // First-time: the renter's permit nonce goes from zero to one (a fresh storage slot in the token).
  gas["openLeaseWithPermit (renter's first permit)"] = await openWithPermit(permitRenter);
  gas.openLeaseWithPermit = await openWithPermit(permitRenter);
  gas.activate = await mkt(provider, "activate", [opened.leaseId]);
  // A claim pays until now - 600 (the fault window's pay stays in escrow): 20 minutes in, it pays 10.
  await networkHelpers.time.increase(1200);
  gas.claim = await mkt(provider, "claim", [opened.leaseId]);

  const batch: bigint[] = [];
  for (let i = 0; i < 10; i++) batch.push(await openActive());
  await networkHelpers.time.increase(1200);
  gas["claimMany (per lease, 10 leases)"] = (await mkt(provider, "claimMany", [batch])) / 10n;

  await networkHelpers.time.increase(60);
  gas["close (renter)"] = await mkt(renter, "close", [opened.leaseId]);
  gas["claim after close (settles)"] = await mkt(provider, "claim", [opened.leaseId]);

  const toComplete = await openActive();
  await networkHelpers.time.increase(1200);
  gas["complete (provider)"] = await mkt(provider, "complete", [toComplete, 0, `0x${"22".repeat(32)}`, 1200n]);

  const faulty = await openActive();
  await networkHelpers.time.increase(600);
  const observedAt = Number((await publicClient.getBlock()).timestamp) - 100;
  const fault = { leaseId: faulty, kind: 1, observedAt };
  const signatures = orderFaultSignatures(
    await Promise.all([attestorA, attestorB].map(async (w) => ({ signer: w.account.address, signature: await signFault(w, domain, fault) }))),
  );
  gas["submitFault (quorum 2)"] = await mkt(deployer, "submitFault", [fault, signatures]);

  const smallOffer = await offer(small);
  const interrupted = await openActive(terms(2, { interruptible: true, bidPerUnitSecond: 50n }), smallOffer);
  await networkHelpers.time.increase(300);
  gas["openLease preempting 1 interruptible"] = (await openLease(terms(2, { preempt: [interrupted] }), smallOffer)).gas;

  const terminated = await openActive();
  await networkHelpers.time.increase(600);
  gas["terminate (provider)"] = await mkt(provider, "terminate", [terminated]);

  const missed = (await openLease()).leaseId;
  await networkHelpers.time.increase(601);
  gas["cancel (missed start)"] = await mkt(renter, "cancel", [missed]);

  const extended = await openActive();
  const consent = await offer(big);
  gas["extend"] = await mkt(renter, "extend", [extended, 600, consent.offer, consent.signature]);
  await networkHelpers.time.increase(300);
  gas["shrink"] = await mkt(renter, "shrink", [extended, 1]);

  const settled = await openActive();
  await networkHelpers.time.increase(600);
  const deadline = Number((await publicClient.getBlock()).timestamp) + 600;
  const settlement = { leaseId: settled, providerAmount: 100_000n, deadline };
  gas["settle (co-signed)"] = await mkt(deployer, "settle", [settlement, await signSettlement(renter, domain, settlement), await signSettlement(provider, domain, settlement)]);

  {
    // A whole on-demand lease: open, activate, 20 minutes of service, completion (the provider paid its first 10
    // minutes, the renter refunded; the last 600 s of pay are held with the collateral until the release claim).
    const whole = await openLease();
    const activated = await mkt(provider, "activate", [whole.leaseId]);
    await networkHelpers.time.increase(1200);
    const completed = await mkt(provider, "complete", [whole.leaseId, 0, `0x${"33".repeat(32)}`, 1200n]);
    gas["whole lease (open + activate + complete)"] = whole.gas + activated + completed;
    // The completion holds the collateral and the unused deposit for the fault window (issue #34, finding 1);
    // a claim after it releases both (the provider's node sends it; the renter's SDK may).
    await networkHelpers.time.increase(600);
    const released = await mkt(provider, "claim", [whole.leaseId]);
    gas["claim after complete (releases the hold)"] = released;
    gas["whole lease with the hold's release (open + activate + complete + claim)"] = whole.gas + activated + completed + released;
  }
  {
    // First-time: a new renter (tokens and allowance, nothing else) on a new provider's first machine. Its
    // reputation and the renter's payments start from zero.
    await tok(newRenter, "faucet", [newRenter.account.address, 10_000_000n]);
    await tok(newRenter, "approve", [market, maxUint]);
    const fresh = await offer(3, {}, newcomer);
    const leaseId = (await publicClient.readContract({ address: market, abi: leaseMarketAbi, functionName: "nextLeaseId" })) as bigint;
    const opened = await mkt(newRenter, "openLease", [fresh.offer, fresh.signature, terms(2)]);
    const activated = await mkt(newcomer, "activate", [leaseId]);
    await networkHelpers.time.increase(1200);
    const completed = await mkt(newcomer, "complete", [leaseId, 0, `0x${"44".repeat(32)}`, 1200n]);
    gas["first lease of a new provider and renter: openLease"] = opened;
    gas["first lease of a new provider and renter: complete"] = completed;
    gas["first lease of a new provider and renter (open + activate + complete)"] = opened + activated + completed;
  }

  {
    // AttestorStaking (attached by the deploy script, which staked both attestors): a top-up, then a dispute
    // of a forged attestation (no provider commit: slashed) and of an honest one (answered with the commit), then a
    // false liveness fault disputed with the attestor's own receipt.
    const staking = (await publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" })) as Address;
    const stk = (wallet: Wallet, fn: string, args: readonly unknown[]) => send(wallet, staking, attestorStakingAbi, fn, args);
    for (const wallet of [attestorA, provider]) {
      await tok(wallet, "faucet", [wallet.account.address, 100_000n * 10n ** 6n]);
      await tok(wallet, "approve", [staking, maxUint]);
    }
    gas["AttestorStaking: stake (top-up)"] = await stk(attestorA, "stake", [1_000n * 10n ** 6n]);
    const now = Number((await publicClient.getBlock()).timestamp);
    // An 8-unit machine's attestations and the v2 commit behind the honest one: one root and one GPU UUID per unit.
    const made = (tag: string) => machineCommitFixture({ tag: `bench-${tag}`, provider: provider.account.address, machineId: big, model: A100, issuedAt: now });
    const forged = made("forged").attestation;
    const { attestation: honest, commit: fields } = made("honest");
    const forgedSigned = await signAttestation(attestorA, domain, forged);
    const honestSigned = await signAttestation(attestorA, domain, honest);
    gas["AttestorStaking: disputeAttestation"] = await stk(provider, "disputeAttestation", [forged, forgedSigned.signature]);
    await stk(provider, "disputeAttestation", [honest, honestSigned.signature]);
    const commit = await signCommit(provider, domain, fields);
    gas["AttestorStaking: answerDispute (8 units)"] = await stk(attestorA, "answerDispute", [honest, disputeCommitArgs(fields), commit]);
    await networkHelpers.time.increase(3_600);
    const forgedId = (await publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "attestationDigest", args: [forged] })) as Hex;
    gas["AttestorStaking: resolveDispute (slash)"] = await stk(deployer, "resolveDispute", [forgedId]);
    gas["AttestorStaking: claim"] = await stk(provider, "claim", [provider.account.address]);
    // A false liveness fault: the attestor counted the provider's heartbeat 2.5 s after the fault's observedAt and
    // signed the fault anyway; the provider (owed nothing now, so its credit is a new slot) proves it with both.
    const lied = Number((await publicClient.getBlock()).timestamp) - 10;
    const fault = { leaseId: 1n, kind: 1, observedAt: lied };
    const receipt = { leaseId: 1n, challenge: `0x${"5a".repeat(32)}` as Hex, receivedAtMs: BigInt(lied) * 1000n + 2_500n };
    const [faultSignature, receiptSignature] = [await signFault(attestorA, domain, fault), await signProbeReceipt(attestorA, domain, receipt)];
    gas["AttestorStaking: disputeFault"] = await stk(provider, "disputeFault", [fault, faultSignature, receipt, receiptSignature]);
  }

  {
    // SessionKeys (issue 38): a renter revokes one session-key delegation (a new slot), then every delegation it
    // issued so far (its first revokeAll: a new slot too). Nodes only read isRevoked, which costs no gas.
    const sessions = deployment.contracts.sessions!;
    gas["SessionKeys: revoke"] = await send(renter, sessions, sessionKeysAbi, "revoke", [`0x${"5e".repeat(32)}`]);
    gas["SessionKeys: revokeAll"] = await send(renter, sessions, sessionKeysAbi, "revokeAll", []);
    // A smart-account renter approves a delegation by a call instead of a signature (a new slot).
    gas["SessionKeys: approve"] = await send(renter, sessions, sessionKeysAbi, "approve", [`0x${"5f".repeat(32)}`]);
  }

  const rows = Object.entries(gas).map(([operation, used]) => {
    const target = TARGETS[operation];
    return { operation, gas: Number(used), target: target ?? null, met: target === undefined ? null : Number(used) <= target };
  });
  const width = Math.max(...rows.map((r) => r.operation.length));
  console.log(`${"operation".padEnd(width)}  ${"gasUsed".padStart(9)}  ${"target".padStart(9)}`);
  for (const row of rows) {
    const target = row.target === null ? "" : `${row.target.toLocaleString("en-US")} ${row.met ? "ok" : "MISSED"}`;
    console.log(`${row.operation.padEnd(width)}  ${row.gas.toLocaleString("en-US").padStart(9)}  ${target.padStart(9)}`);
  }
  return Object.fromEntries(rows.map((r) => [r.operation, r.gas]));
}
