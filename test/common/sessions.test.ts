/**
 * Session delegations (common/sessions.ts, issue #38): what a session key may sign for a renter
 * and what every node refuses. The local check (scope, time, the renter's signature) needs no
 * chain; the revocation check (node/sessions/delegations.ts) and the provider's and node's use of
 * both are tested on a devnet in test/e2e/session-keys.test.ts and test/node/session-delegations.test.ts.
 */
import assert from "node:assert/strict";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { suanliDomain } from "../../common/eip712.js";
import { stringifyPlain } from "../../common/json.js";
import {
  checkDelegation,
  delegationHash,
  SESSION_MAX_SECONDS,
  SessionDelegationError,
  sessionDelegationSchema,
  signSessionDelegation,
  type SessionAction,
} from "../../common/sessions.js";

const domain = suanliDomain(31337, "0x5FbDB2315678afecb367f032d93F642f64180aa3");
const renter = privateKeyToAccount(generatePrivateKey());
const stranger = privateKeyToAccount(generatePrivateKey());
const key = privateKeyToAccount(generatePrivateKey());
const now = 1_800_000_000;

async function delegate(parameters: { actions?: SessionAction[]; leaseIds?: bigint[]; ttlSeconds?: number; nowSeconds?: number; by?: typeof renter } = {}) {
  const by = parameters.by ?? renter;
  return signSessionDelegation((p) => by.signTypedData(p), domain, {
    renter: renter.address,
    sessionKey: key.address,
    actions: parameters.actions ?? ["status", "logs"],
    leaseIds: parameters.leaseIds,
    ttlSeconds: parameters.ttlSeconds,
    nowSeconds: parameters.nowSeconds ?? now,
  });
}

async function refusal(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => assert.fail("expected the delegation to be refused"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof SessionDelegationError, String(error));
  return error.shortMessage;
}

describe("session delegations", () => {
  it("lets the session key act for the renter within its scope and returns the renter and the delegation's hash", async () => {
    const signed = await delegate({ leaseIds: [7n] });
    const checked = await checkDelegation(domain, signed, { requestSigner: key.address, action: "logs", leaseId: 7n, nowSeconds: now + 60 });
    assert.equal(checked.renter, renter.address);
    assert.equal(checked.hash, delegationHash(domain, signed.message));
    // The delegation round-trips through JSON (amounts as decimal strings) to the same hash.
    const wire = JSON.parse(stringifyPlain(signed));
    assert.equal(delegationHash(domain, sessionDelegationSchema.parse(wire.message)), checked.hash);
  });

  it("refuses another signer, an action or a lease outside the scope, an expired or future delegation, and one its renter did not sign", async () => {
    const signed = await delegate({ leaseIds: [7n] });
    const at = { action: "status" as const, leaseId: 7n, nowSeconds: now + 60 };
    assert.match(await refusal(checkDelegation(domain, signed, { ...at, requestSigner: stranger.address })), /not by the delegation's session key/);
    assert.match(
      await refusal(checkDelegation(domain, signed, { ...at, requestSigner: key.address, action: "cancel" })),
      /may not "cancel" lease 7: its delegation allows status, logs on leases 7/,
    );
    assert.match(await refusal(checkDelegation(domain, signed, { ...at, requestSigner: key.address, leaseId: 8n })), /may not "status" lease 8/);
    const expiresAt = Number(signed.message.expiresAt);
    assert.match(await refusal(checkDelegation(domain, signed, { ...at, requestSigner: key.address, nowSeconds: expiresAt })), /session expired at/);
    assert.match(await refusal(checkDelegation(domain, signed, { ...at, requestSigner: key.address, nowSeconds: now - 3600 })), /in the future of this node's clock/);
    // Signed by someone else in the renter's name.
    const forged = await delegate({ leaseIds: [7n], by: stranger });
    assert.match(await refusal(checkDelegation(domain, forged, { ...at, requestSigner: key.address })), /not signed by its renter/);
    // A field changed after signing.
    const widened = { ...signed, message: { ...signed.message, actions: ["status", "logs", "cancel"] as SessionAction[] } };
    assert.match(await refusal(checkDelegation(domain, widened, { ...at, requestSigner: key.address, action: "cancel" })), /not signed by its renter/);
  });

  it("a delegation naming no leases covers every lease, and only it may allow reserve", async () => {
    const any = await delegate({ actions: ["reserve", "status"] });
    assert.equal((await checkDelegation(domain, any, { requestSigner: key.address, action: "reserve", leaseId: undefined, nowSeconds: now })).renter, renter.address);
    assert.equal((await checkDelegation(domain, any, { requestSigner: key.address, action: "status", leaseId: 123n, nowSeconds: now })).renter, renter.address);
    await assert.rejects(delegate({ actions: ["reserve"], leaseIds: [1n] }), /"reserve" comes before any lease/);
  });

  it("says what is wrong with a delegation out of bounds", async () => {
    await assert.rejects(delegate({ ttlSeconds: SESSION_MAX_SECONDS + 1 }), /lives at most 604800 s/);
    const base = (await delegate()).message;
    const issues = (value: Record<string, unknown>) =>
      sessionDelegationSchema
        .safeParse({ ...base, ...value })
        .error?.issues.map((issue) => issue.message)
        .join("; ");
    assert.match(issues({ actions: ["status", "status"] }) ?? "", /lists an action twice/);
    assert.match(issues({ actions: ["withdraw"] }) ?? "", /Invalid option/);
    assert.match(issues({ actions: [] }) ?? "", /Too small/);
    assert.match(issues({ expiresAt: base.issuedAt }) ?? "", /expiresAt must be after issuedAt/);
    assert.match(issues({ leaseIds: [0n] }) ?? "", /lease id > 0/);
    assert.match(issues({ extra: 1 }) ?? "", /Unrecognized key/);
  });
});
