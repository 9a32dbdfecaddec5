import assert from "node:assert/strict";
import { keccak256, toBytes, zeroHash } from "viem";
import { connect, type Connection } from "./support/suanli.js";

/** Stand-ins for delegations' EIP-712 hashes: the contract stores hashes and never reads what they hash. */
const delegation = (name: string) => keccak256(toBytes(`delegation ${name}`));

describe("SessionKeys (the revocation list nodes honour)", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  async function sessionKeysFixture() {
    const { viem } = connection;
    const [, alice, bob] = await viem.getWalletClients();
    const sessions = await viem.deployContract("SessionKeys");
    return { sessions, alice: alice!, bob: bob! };
  }
  const load = () => connection.networkHelpers.loadFixture(sessionKeysFixture);

  it("revokes one delegation of its caller at the block's time, and only that one", async () => {
    const { sessions, alice } = await load();
    const { viem, networkHelpers } = connection;
    const [first, second] = [delegation("first"), delegation("second")];
    const issuedAt = BigInt(await networkHelpers.time.latest());
    assert.equal(await sessions.read.isRevoked([alice.account.address, first, issuedAt]), false);

    const at = (await networkHelpers.time.latest()) + 10;
    await networkHelpers.time.setNextBlockTimestamp(at);
    await viem.assertions.emitWithArgs(sessions.write.revoke([first], { account: alice.account }), sessions, "SessionRevoked", [alice.account.address, first]);
    assert.equal(await sessions.read.revokedAt([alice.account.address, first]), BigInt(at));
    assert.equal(await sessions.read.isRevoked([alice.account.address, first, issuedAt]), true);
    // Revoked whatever issuedAt the delegation claims, later ones included.
    assert.equal(await sessions.read.isRevoked([alice.account.address, first, BigInt(at) + 3600n]), true);
    assert.equal(await sessions.read.isRevoked([alice.account.address, second, issuedAt]), false);
    assert.equal(await sessions.read.revokedAt([alice.account.address, second]), 0n);
    assert.equal(await sessions.read.revokedBefore([alice.account.address]), 0n);
  });

  it("lets nobody revoke another renter's session: a revoke by Bob of Alice's delegation hash leaves it valid for Alice", async () => {
    const { sessions, alice, bob } = await load();
    const { viem, networkHelpers } = connection;
    const hers = delegation("alice's");
    const issuedAt = BigInt(await networkHelpers.time.latest());
    await viem.assertions.emitWithArgs(sessions.write.revoke([hers], { account: bob.account }), sessions, "SessionRevoked", [bob.account.address, hers]);
    assert.equal(await sessions.read.isRevoked([alice.account.address, hers, issuedAt]), false);
    assert.equal(await sessions.read.revokedAt([alice.account.address, hers]), 0n);
    assert.equal(await sessions.read.isRevoked([bob.account.address, hers, issuedAt]), true); // only Bob's own entry
    // Bob's revokeAll moves only his bound.
    await sessions.write.revokeAll({ account: bob.account });
    assert.equal(await sessions.read.revokedBefore([alice.account.address]), 0n);
    assert.equal(await sessions.read.isRevoked([alice.account.address, hers, issuedAt]), false);
    // Alice can still revoke it herself: Bob's entry is not hers.
    await sessions.write.revoke([hers], { account: alice.account });
    assert.equal(await sessions.read.isRevoked([alice.account.address, hers, issuedAt]), true);
  });

  it("refuses to revoke the same delegation twice and the zero hash", async () => {
    const { sessions, alice } = await load();
    const { viem } = connection;
    const once = delegation("once");
    await sessions.write.revoke([once], { account: alice.account });
    const firstAt = await sessions.read.revokedAt([alice.account.address, once]);
    await viem.assertions.revertWithCustomErrorWithArgs(sessions.write.revoke([once], { account: alice.account }), sessions, "AlreadyRevoked", [alice.account.address, once]);
    assert.equal(await sessions.read.revokedAt([alice.account.address, once]), firstAt); // the first revocation's time stays
    await viem.assertions.revertWithCustomError(sessions.write.revoke([zeroHash], { account: alice.account }), sessions, "ZeroDelegation");
    assert.equal(await sessions.read.revokedAt([alice.account.address, zeroHash]), 0n);
  });

  it("revokeAll revokes every delegation issued at or before its block's time and none issued later; a second call moves the bound forward", async () => {
    const { sessions, alice } = await load();
    const { viem, networkHelpers } = connection;
    const any = delegation("any");
    const at = (await networkHelpers.time.latest()) + 100;
    await networkHelpers.time.setNextBlockTimestamp(at);
    await viem.assertions.emitWithArgs(sessions.write.revokeAll({ account: alice.account }), sessions, "AllSessionsRevoked", [alice.account.address, BigInt(at)]);
    assert.equal(await sessions.read.revokedBefore([alice.account.address]), BigInt(at));
    const revoked = (issuedAt: number) => sessions.read.isRevoked([alice.account.address, any, BigInt(issuedAt)]);
    assert.deepEqual(await Promise.all([revoked(at - 3600), revoked(at - 1), revoked(at), revoked(at + 1), revoked(at + 3600)]), [true, true, true, false, false]);
    // revokeAll writes no per-delegation entry, so one delegation can still be revoked by its hash.
    assert.equal(await sessions.read.revokedAt([alice.account.address, any]), 0n);

    const later = at + 60;
    await networkHelpers.time.setNextBlockTimestamp(later);
    await viem.assertions.emitWithArgs(sessions.write.revokeAll({ account: alice.account }), sessions, "AllSessionsRevoked", [alice.account.address, BigInt(later)]);
    assert.deepEqual(await Promise.all([revoked(at + 1), revoked(later), revoked(later + 1)]), [true, true, false]);
  });

  it("counts a delegation issued at 0 as revoked (no real delegation is issued in 1970) and any other as valid until revoked", async () => {
    const { sessions, alice } = await load();
    assert.equal(await sessions.read.isRevoked([alice.account.address, delegation("epoch"), 0n]), true);
    assert.equal(await sessions.read.isRevoked([alice.account.address, delegation("epoch"), 1n]), false);
  });

  it("approve records the caller's own approval (for a renter that cannot sign); check reads it with the revocation in one call", async () => {
    const { sessions, alice, bob } = await load();
    const { viem, networkHelpers } = connection;
    const hers = delegation("approved");
    const issuedAt = BigInt(await networkHelpers.time.latest());
    assert.deepEqual(await sessions.read.check([alice.account.address, hers, issuedAt]), [false, false]);
    const at = (await networkHelpers.time.latest()) + 10;
    await networkHelpers.time.setNextBlockTimestamp(at);
    await viem.assertions.emitWithArgs(sessions.write.approve([hers], { account: alice.account }), sessions, "SessionApproved", [alice.account.address, hers]);
    assert.equal(await sessions.read.approvedAt([alice.account.address, hers]), BigInt(at));
    assert.deepEqual(await sessions.read.check([alice.account.address, hers, issuedAt]), [true, false]);
    // Bob's approval of the same hash is his own: it approves nothing of Alice's, and hers nothing of his.
    assert.deepEqual(await sessions.read.check([bob.account.address, hers, issuedAt]), [false, false]);
    await viem.assertions.revertWithCustomErrorWithArgs(sessions.write.approve([hers], { account: alice.account }), sessions, "AlreadyApproved", [alice.account.address, hers]);
    await viem.assertions.revertWithCustomError(sessions.write.approve([zeroHash], { account: alice.account }), sessions, "ZeroDelegation");
    // A revocation wins over the approval.
    await sessions.write.revoke([hers], { account: alice.account });
    assert.deepEqual(await sessions.read.check([alice.account.address, hers, issuedAt]), [true, true]);
  });
});
