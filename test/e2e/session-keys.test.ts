/**
 * Session keys end to end (issue #38, docs/sessions.md): a renter in the browser SDK behind a
 * wallet that counts its prompts signs one delegation, and a whole task then asks the wallet only
 * for the permit and the lease transaction; reservations, the task, status, logs and the receipt go
 * through the node's relay signed by the session key. The node's relay and the provider itself
 * refuse a session key outside its delegation, an expired delegation, a stranger's, and (within
 * 10 s of the block) a revoked one.
 */
import assert from "node:assert/strict";
import { custom, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { suanliDomain } from "../../common/eip712.js";
import { stringifyPlain } from "../../common/json.js";
import { STATUS_PROTOCOL, CANCEL_PROTOCOL } from "../../common/p2p/protocols.js";
import { request } from "../../common/p2p/reqresp.js";
import { cancelAnswerSchema, signLeaseRequest, taskStatusSchema, type RenterAction } from "../../common/protocols/lease.js";
import { signSessionDelegation, type SessionAction, type SignedDelegation } from "../../common/sessions.js";
import { peerIdFromString } from "@libp2p/peer-id";
import { multiaddr } from "@multiformats/multiaddr";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

/** What a prompting wallet asks the user about. */
const PROMPTS = new Set(["eth_signTypedData_v4", "eth_sendTransaction", "personal_sign", "eth_sign"]);

describe("session keys: one wallet prompt per session, and what nodes refuse", function () {
  this.timeout(180_000);
  let market: RenterMarket;
  const prompts: string[] = [];
  let lease: { leaseId: bigint; provider: Address; peerId: string; addrs: string[] };

  before(async () => {
    market = await startRenterMarket({
      name: "sessions",
      apiNode: true,
      renterVia: "browser",
      // An injected wallet that counts what it would ask the user, in front of the devnet's accounts.
      clientOptions: (devnet) => ({
        walletTransport: custom({
          async request({ method, params }: { method: string; params?: unknown }) {
            if (PROMPTS.has(method)) prompts.push(method);
            const response = await fetch(devnet.rpcUrl, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
            });
            const body = (await response.json()) as { result?: unknown; error?: { code: number; message: string } };
            if (body.error) throw Object.assign(new Error(body.error.message), { code: body.error.code });
            return body.result;
          },
        }),
      }),
    });
  });
  after(async () => market?.close());

  const domain = () => suanliDomain(market.devnet.deployment.chainId, market.devnet.deployment.contracts.market!);

  /** A request about `lease` signed by `key` with `delegation`, sent to the node's relay route of `action`. */
  async function relay(action: RenterAction, key: Hex, delegation: SignedDelegation): Promise<{ status: number; message: string }> {
    const auth = await signLeaseRequest((p) => privateKeyToAccount(key).signTypedData(p), domain(), { leaseId: lease.leaseId, provider: lease.provider, action, body: {} });
    const response = await fetch(`${market.apiNode!.api!.url}/v1/leases/${lease.leaseId}/${action}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: stringifyPlain({ auth: { ...auth, delegation } }),
    });
    const body = (await response.json()) as { error?: { name: string; message: string } };
    return { status: response.status, message: body.error ? `${body.error.name}: ${body.error.message}` : "" };
  }

  /** A delegation from `by` (default the renter) to a fresh key. */
  async function delegation(parameters: { actions: SessionAction[]; leaseIds?: bigint[]; nowSeconds?: number; ttlSeconds?: number; by?: Hex }) {
    const key = generatePrivateKey();
    const signer = parameters.by ? privateKeyToAccount(parameters.by) : market.renter;
    const signed = await signSessionDelegation((p) => signer.signTypedData(p), domain(), {
      renter: signer.address,
      sessionKey: privateKeyToAccount(key).address,
      actions: parameters.actions,
      leaseIds: parameters.leaseIds,
      ttlSeconds: parameters.ttlSeconds,
      nowSeconds: parameters.nowSeconds,
    });
    return { key, signed };
  }

  it("one signature starts the session; the task then asks only for the permit and the lease transaction", async () => {
    const { client, bundles } = market;
    const session = await client.startSession();
    assert.deepEqual(prompts, ["eth_signTypedData_v4"], "the delegation is the session's one signature");
    assert.equal(session.renter, market.renter.address);
    assert.deepEqual(session.actions, ["reserve", "task", "status", "logs", "cancel", "output"]);
    assert.equal(client.session?.hash, session.hash);

    const bundle = await bundles.bundle({ "run.sh": "echo hello from a session; sleep 2; echo bye" });
    prompts.length = 0;
    const { taskId } = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 60,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "sh run.sh",
    });
    const lines: string[] = [];
    for await (const line of client.logs(taskId, { follow: true })) lines.push(line.text);
    const receipt = await client.wait(taskId);
    const status = await client.status(taskId);
    assert.ok(lines.includes("hello from a session") && lines.includes("bye"), lines.join("\n"));
    assert.equal(receipt.state, "succeeded");
    assert.equal(status.state, "succeeded");
    // Reservation, task, logs, status and receipt: the session key. The wallet: the deposit's permit and openLease.
    assert.deepEqual(prompts, ["eth_signTypedData_v4", "eth_sendTransaction"], `the wallet was asked: ${prompts.join(", ")}`);
    const attempt = (await client.tasks()).find((task) => task.taskId === taskId)!.attempts[0]!;
    lease = { leaseId: attempt.leaseId, provider: attempt.provider, peerId: attempt.peerId, addrs: attempt.addrs };
  });

  it("the relay refuses a session key outside its delegation, an expired delegation and a stranger's, and says which", async () => {
    const refusals = async () => {
      const text = await (await fetch(`${market.apiNode!.api!.url}/metrics`)).text();
      const count = (reason: string) => Number(new RegExp(`suanli_api_signature_failures_total\\{reason="${reason}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
      return { delegation: count("delegation"), signer: count("signer") };
    };
    const before = await refusals();
    const statusOnly = await delegation({ actions: ["status"], leaseIds: [lease.leaseId] });
    assert.equal((await relay("status", statusOnly.key, statusOnly.signed)).status, 200, "the delegation itself is good");
    const outOfScope = await relay("cancel", statusOnly.key, statusOnly.signed);
    assert.equal(outOfScope.status, 401);
    assert.match(outOfScope.message, new RegExp(`may not "cancel" lease ${lease.leaseId}: its delegation allows status`));
    const otherLease = await delegation({ actions: ["status"], leaseIds: [lease.leaseId + 1000n] });
    assert.match((await relay("status", otherLease.key, otherLease.signed)).message, /may not "status" lease/);

    const expired = await delegation({ actions: ["status"], nowSeconds: Math.floor(Date.now() / 1000) - 7200, ttlSeconds: 3600 });
    const late = await relay("status", expired.key, expired.signed);
    assert.equal(late.status, 401);
    assert.match(late.message, /session expired at/);

    const stranger = generatePrivateKey();
    const theirs = await delegation({ actions: ["status", "cancel"], by: stranger });
    const foreign = await relay("cancel", theirs.key, theirs.signed);
    assert.equal(foreign.status, 401);
    assert.match(foreign.message, /not by the renter of lease/);
    // A request signed by a key the delegation does not name.
    const wrongKey = await relay("status", generatePrivateKey(), statusOnly.signed);
    assert.equal(wrongKey.status, 401);
    assert.match(wrongKey.message, /not by the delegation's session key/);
    // Counted by why: four refused delegations (scope, lease, expiry, key), one request not signed by the lease's renter.
    const after = await refusals();
    assert.deepEqual({ delegation: after.delegation - before.delegation, signer: after.signer - before.signer }, { delegation: 4, signer: 1 });
  });

  it("the provider itself refuses a session key outside its delegation (not only the relay)", async () => {
    const host = market.apiNode!.p2p.host;
    await host.peerStore.merge(peerIdFromString(lease.peerId), { multiaddrs: lease.addrs.map((addr) => multiaddr(addr)) });
    const statusOnly = await delegation({ actions: ["status"], leaseIds: [lease.leaseId] });
    const sign = (action: RenterAction) =>
      signLeaseRequest((p) => privateKeyToAccount(statusOnly.key).signTypedData(p), domain(), { leaseId: lease.leaseId, provider: lease.provider, action, body: {} });
    const status = await request(
      host,
      peerIdFromString(lease.peerId),
      STATUS_PROTOCOL,
      { auth: { ...(await sign("status")), delegation: statusOnly.signed } },
      { responseSchema: taskStatusSchema },
    );
    assert.equal(status.state, "succeeded");
    // Expired, and a stranger's (a renter can reach the provider without the relay): refused by the provider itself.
    const expired = await delegation({ actions: ["status"], nowSeconds: Math.floor(Date.now() / 1000) - 7200, ttlSeconds: 3600 });
    const theirs = await delegation({ actions: ["status"], by: generatePrivateKey() });
    for (const [other, reason] of [
      [expired, /session expired at/],
      [theirs, /not the renter of a lease/],
    ] as const) {
      const auth = {
        ...(await signLeaseRequest((p) => privateKeyToAccount(other.key).signTypedData(p), domain(), {
          leaseId: lease.leaseId,
          provider: lease.provider,
          action: "status",
          body: {},
        })),
        delegation: other.signed,
      };
      await assert.rejects(
        request(host, peerIdFromString(lease.peerId), STATUS_PROTOCOL, { auth }, { responseSchema: taskStatusSchema }),
        (error: Error) => error.name === "RenterAuthError" && reason.test(error.message),
      );
    }
    await assert.rejects(
      request(
        host,
        peerIdFromString(lease.peerId),
        CANCEL_PROTOCOL,
        { auth: { ...(await sign("cancel")), delegation: statusOnly.signed } },
        { responseSchema: cancelAnswerSchema },
      ),
      (error: Error) => error.name === "RenterAuthError" && /may not "cancel"/.test(error.message),
    );
  });

  it("a revoked session is refused within seconds of its block; the client signs with the wallet again", async () => {
    const { client } = market;
    const saved = client.session!;
    assert.equal((await relay("status", saved.privateKey, saved.delegation)).status, 200);
    prompts.length = 0;
    await client.revokeSession();
    assert.deepEqual(prompts, ["eth_sendTransaction"], "revoking is one transaction");
    assert.equal(client.session, undefined);
    await waitFor("the relay to refuse the revoked session", async () => (await relay("status", saved.privateKey, saved.delegation)).status === 401, { timeoutMs: 20_000 });
    assert.match((await relay("status", saved.privateKey, saved.delegation)).message, /revoked this session/);
    // The provider itself refuses it too (a renter can reach it without the relay).
    const host = market.apiNode!.p2p.host;
    await waitFor(
      "the provider to refuse the revoked session",
      async () => {
        const auth = {
          ...(await signLeaseRequest((p) => privateKeyToAccount(saved.privateKey).signTypedData(p), domain(), {
            leaseId: lease.leaseId,
            provider: lease.provider,
            action: "status",
            body: {},
          })),
          delegation: saved.delegation,
        };
        return request(host, peerIdFromString(lease.peerId), STATUS_PROTOCOL, { auth }, { responseSchema: taskStatusSchema }).then(
          () => false,
          (error: Error) => error.name === "RenterAuthError" && /revoked this session/.test(error.message),
        );
      },
      { timeoutMs: 20_000 },
    );
    // Without a session the wallet signs the request.
    const taskId = (await client.tasks())[0]!.taskId;
    prompts.length = 0;
    assert.equal((await client.status(taskId)).state, "succeeded");
    assert.deepEqual(prompts, ["eth_signTypedData_v4"]);
    // A saved session of another wallet is refused before anything is sent.
    await assert.rejects(
      client.useSession({
        privateKey: saved.privateKey,
        delegation: { ...saved.delegation, message: { ...saved.delegation.message, renter: privateKeyToAccount(generatePrivateKey()).address } },
      }),
      /not by this client's wallet/,
    );
    // One whose delegation was altered (or signed for another deployment) is refused as unsigned.
    await assert.rejects(
      client.useSession({ privateKey: saved.privateKey, delegation: { ...saved.delegation, message: { ...saved.delegation.message, salt: `0x${"00".repeat(32)}` } } }),
      /not signed by its renter/,
    );
    // The saved session itself is taken back as it was (the nodes, not the client, know it is revoked).
    assert.equal((await client.useSession(JSON.parse(stringifyPlain(saved)))).hash, saved.hash);
    client.endSession();
  });
});
