/**
 * The node's two-step check of delegated requests (node/sessions/delegations.ts) on a real devnet
 * with SessionKeys and a real SimpleAccount (ERC-4337 v0.8, deployed by its factory):
 * - the local step reads nothing from the chain, so a stranger's delegation (or one naming a
 *   renter who is not the lease's) costs the node no chain read; the chain step reads SessionKeys
 *   once per delegation and caches it;
 * - a smart-account renter that cannot sign (SimpleAccount has no ERC-1271) delegates by calling
 *   SessionKeys.approve from its account in a user operation (through Alto), and sends the
 *   delegation with signature `0x`: refused before the approval, accepted after, refused again once
 *   the account revokes it; a plain address claiming such a delegation costs one code read and is
 *   refused;
 * - the provider's verifier (RenterRequestVerifier) asks the chain only after the renter matched.
 */
import assert from "node:assert/strict";
import { encodeFunctionData, http, parseEther, type Address, type PublicClient } from "viem";
import { createBundlerClient, type SmartAccount } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { sessionKeysAbi } from "../../common/abi.js";
import { devnetAccount } from "../../common/devnet.js";
import { suanliDomain } from "../../common/eip712.js";
import { signLeaseRequest } from "../../common/protocols/lease.js";
import { delegationHash, SessionDelegationError, signSessionDelegation, type SignedDelegation } from "../../common/sessions.js";
import { RenterRequestVerifier } from "../../node/provider/agent/renter-auth.js";
import { startDevnetBundler, type Bundler } from "../../node/devnet/bundler.js";
import { DelegationVerifier } from "../../node/sessions/delegations.js";
import { toSimpleAccount } from "../../sdk/internal/simple-account.js";
import { startDevnet, type Devnet } from "../support/devnet.js";

/** Both steps of the check, for a delegation whose renter the caller has already matched. */
async function renterOf(delegations: DelegationVerifier, delegation: SignedDelegation, expected: Parameters<DelegationVerifier["local"]>[1]): Promise<Address> {
  const pending = await delegations.local(delegation, expected);
  await delegations.confirm(pending);
  return pending.renter;
}

/** A publicClient whose reads are counted by method. */
function counting(client: PublicClient) {
  const calls: string[] = [];
  const wrapped = {
    readContract: ((parameters: Parameters<PublicClient["readContract"]>[0]) => {
      calls.push(`readContract:${parameters.functionName}`);
      return client.readContract(parameters);
    }) as PublicClient["readContract"],
    getCode: ((parameters: Parameters<PublicClient["getCode"]>[0]) => {
      calls.push("getCode");
      return client.getCode(parameters);
    }) as PublicClient["getCode"],
    call: ((parameters: Parameters<PublicClient["call"]>[0]) => {
      calls.push("call");
      return client.call(parameters);
    }) as PublicClient["call"],
  };
  return { calls, client: wrapped };
}

describe("session delegations on the chain: the local step reads nothing; smart-account renters approve on-chain", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let bundler: Bundler;
  let sessions: Address;
  let domain: ReturnType<typeof suanliDomain>;
  const key = privateKeyToAccount(generatePrivateKey());

  before(async () => {
    devnet = await startDevnet({ accountAbstraction: true });
    bundler = await startDevnetBundler({ rpcUrl: devnet.rpcUrl, entryPoint: devnet.deployment.contracts.entryPoint! });
    sessions = devnet.deployment.contracts.sessions!;
    domain = suanliDomain(devnet.deployment.chainId, devnet.deployment.contracts.market!);
  });
  after(async () => {
    await bundler?.stop();
    await devnet?.close();
  });

  const verifier = (client: ReturnType<typeof counting>["client"]) => new DelegationVerifier({ domain, publicClient: client, sessions, cacheMs: 1 });

  it("a key-signed delegation: the local step makes no chain read; the chain step reads SessionKeys.check once and caches it", async () => {
    const { calls, client } = counting(devnet.admin.publicClient as PublicClient);
    const delegations = new DelegationVerifier({ domain, publicClient: client, sessions });
    const renter = devnetAccount(5);
    const signed = await signSessionDelegation((p) => renter.signTypedData(p), domain, { renter: renter.address, sessionKey: key.address, actions: ["status"] });
    const pending = await delegations.local(signed, { requestSigner: key.address, action: "status", leaseId: 9n });
    assert.deepEqual([pending.renter, pending.signed, calls.length], [renter.address, true, 0]);
    await delegations.confirm(pending);
    await delegations.confirm(pending);
    assert.deepEqual(calls, ["readContract:check"]);
  });

  it("the provider's verifier: a stranger's delegation on someone else's lease is refused with no chain read at all", async () => {
    const { calls, client } = counting(devnet.admin.publicClient as PublicClient);
    const delegations = new DelegationVerifier({ domain, publicClient: client, sessions });
    const provider = devnetAccount(1).address;
    const requests = new RenterRequestVerifier({ domain, provider, delegations });
    const stranger = privateKeyToAccount(generatePrivateKey());
    const leaseRenter = devnetAccount(5).address;
    for (let i = 0; i < 5; i++) {
      // Each with a fresh salt: nothing a cache could answer.
      const theirs = await signSessionDelegation((p) => stranger.signTypedData(p), domain, { renter: stranger.address, sessionKey: key.address, actions: ["status"] });
      const auth = { ...(await signLeaseRequest((p) => key.signTypedData(p), domain, { leaseId: 7n, provider, action: "status", body: {} })), delegation: theirs };
      // The lease's renter is known (the provider's record): the match fails before the chain step.
      await assert.rejects(requests.verify(auth, { leaseId: 7n, action: "status", body: {}, renter: leaseRenter }), { name: "RenterAuthError" });
    }
    assert.deepEqual(calls, [], "no chain read for a stranger");
  });

  it("a SimpleAccount renter delegates by SessionKeys.approve in a user operation: refused before, accepted after, refused once it revokes; a plain address cannot use 0x", async () => {
    const { publicClient, walletClient } = devnet.admin;
    const owner = privateKeyToAccount(generatePrivateKey());
    const account: SmartAccount = await toSimpleAccount({ client: publicClient, owner, factory: devnet.deployment.contracts.accountFactory! });
    const renter = await account.getAddress();
    await publicClient.waitForTransactionReceipt({ hash: await walletClient!.sendTransaction({ to: renter, value: parseEther("1") }) });
    const bundlerClient = createBundlerClient({ client: publicClient, transport: http(bundler.url), pollingInterval: 100 });
    const operate = async (functionName: "approve" | "revoke", hash: `0x${string}`) => {
      const operation = await bundlerClient.sendUserOperation({
        account,
        calls: [{ to: sessions, data: encodeFunctionData({ abi: sessionKeysAbi, functionName, args: [hash] }) }],
      });
      const receipt = await bundlerClient.waitForUserOperationReceipt({ hash: operation, timeout: 30_000 });
      assert.equal(receipt.success, true, `${functionName}: ${receipt.reason ?? ""}`);
      await new Promise((resolve) => setTimeout(resolve, 5)); // past the test's 1 ms cache
    };
    // The delegation names the account as renter and carries no signature: SimpleAccount cannot sign (no ERC-1271).
    const delegation = (await signSessionDelegation(async () => "0x", domain, { renter, sessionKey: key.address, actions: ["status", "logs"] })) as SignedDelegation;
    const hash = delegationHash(domain, delegation.message);
    const { calls, client } = counting(publicClient as PublicClient);
    const delegations = verifier(client);
    const expected = { requestSigner: key.address, action: "logs" as const, leaseId: 3n };
    // Not yet deployed (counterfactual) and not approved: refused.
    await assert.rejects(
      renterOf(delegations, delegation, expected),
      (error: Error) => error instanceof SessionDelegationError && /did not approve it on-chain/.test(error.message),
    );

    // One user operation (the account's first: it deploys it) approves the delegation; in the product it is batched with openLease.
    await operate("approve", hash);
    await new Promise((resolve) => setTimeout(resolve, 5_100)); // the "no code" answer is kept 5 s
    assert.equal(await renterOf(delegations, delegation, expected), renter);
    assert.ok(calls.includes("readContract:check") && calls.includes("getCode"), calls.join(", "));
    // The owner's own key never approved anything: the same delegation naming the owner as renter is refused.
    const ownersName = (await signSessionDelegation(async () => "0x", domain, { renter: owner.address, sessionKey: key.address, actions: ["logs"] })) as SignedDelegation;
    await assert.rejects(renterOf(delegations, ownersName, expected), /did not approve it on-chain/);

    await operate("revoke", hash);
    await assert.rejects(renterOf(delegations, delegation, expected), /revoked this session/);

    // A plain address (no code) claiming a 0x delegation: one code read, refused, no SessionKeys read.
    const plain = privateKeyToAccount(generatePrivateKey()).address;
    const forged = (await signSessionDelegation(async () => "0x", domain, { renter: plain, sessionKey: key.address, actions: ["status"] })) as SignedDelegation;
    const counted = counting(publicClient as PublicClient);
    await assert.rejects(renterOf(verifier(counted.client), forged, { requestSigner: key.address, action: "status", leaseId: 1n }), /did not approve it on-chain/);
    assert.deepEqual(counted.calls, ["getCode"]);
  });
});
