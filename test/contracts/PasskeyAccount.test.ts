/**
 * PasskeyAccount and PasskeyAccountFactory (contracts/aa/, docs/aa.md "A passkey owner"): a renter's ERC-4337 account
 * whose owner is a passkey. A software authenticator (test/support/webauthn.ts) signs through viem's real WebAuthn path;
 * the user operation goes through a real EntryPoint v0.8 (eth-infinitism's bytecode, deployed here at an address of its
 * own: the factory takes the EntryPoint it trusts).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { randomBytes } from "node:crypto";
import { p256 } from "@noble/curves/nist.js";
import { network } from "hardhat";
import { bytesToHex, encodeFunctionData, getAddress, parseEventLogs, parseEther, zeroAddress, type Address, type Hex } from "viem";
import { entryPoint08Abi, toPackedUserOperation, type SmartAccount, type UserOperation } from "viem/account-abstraction";
import { hashTypedData as erc7739Hash, wrapTypedDataSignature } from "viem/experimental/erc7739";
import { passkeyAccountAbi, testTokenAbi } from "../../common/abi.js";
import { encodeErc7821Execute } from "../../common/account-abstraction.js";
import { suanliDomain, suanliTypes, type SessionDelegation } from "../../common/eip712.js";
import { delegationHash } from "../../common/sessions.js";
import { ERC1271_GAS } from "../../node/sessions/delegations.js";
import { encodeWebAuthnSignature, PASSKEY_VERIFICATION_GAS, passkeyAccountDomain, toPasskeyAccount } from "../../sdk/internal/passkey-account.js";
import { encodeAssertion, softwareAuthenticator } from "../support/webauthn.js";
import { connect, type Connection } from "./support/suanli.js";

const entryPointBytecode = JSON.parse(readFileSync(createRequire(import.meta.url).resolve("@account-abstraction/contracts/artifacts/EntryPoint.json"), "utf8")).bytecode as Hex;
const SIG_VALIDATION_SUCCESS = 0n;
const SIG_VALIDATION_FAILED = 1n;

describe("PasskeyAccount (an ERC-4337 account owned by a passkey) and its factory", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });

  async function passkeyFixture() {
    const { viem } = connection;
    const publicClient = await viem.getPublicClient();
    const [deployer, other] = await viem.getWalletClients();
    const hash = await deployer!.deployContract({ abi: entryPoint08Abi, bytecode: entryPointBytecode });
    const entryPoint = (await publicClient.waitForTransactionReceipt({ hash })).contractAddress!;
    const factory = await viem.deployContract("PasskeyAccountFactory", [entryPoint]);
    const token = await viem.deployContract("TestToken");
    const authenticator = softwareAuthenticator();
    const account = await toPasskeyAccount({ client: publicClient, owner: authenticator.account, factory: factory.address, entryPoint });
    return { publicClient, deployer: deployer!, other: other!, entryPoint, factory, token, authenticator, account };
  }
  const load = () => connection.networkHelpers.loadFixture(passkeyFixture);

  /** A user operation of `account` making `calls`, gas limits generous, signed by its passkey through viem (toWebAuthnAccount). */
  async function signedOperation(account: SmartAccount, calls: { to: Address; data: Hex }[], publicClient: Awaited<ReturnType<typeof passkeyFixture>>["publicClient"]) {
    const deployed = ((await publicClient.getCode({ address: account.address })) ?? "0x") !== "0x";
    const fees = await publicClient.estimateFeesPerGas();
    const op: UserOperation<"0.8"> = {
      sender: account.address,
      nonce: await account.getNonce(),
      ...(deployed ? {} : await account.getFactoryArgs()),
      callData: await account.encodeCalls(calls),
      callGasLimit: 500_000n,
      verificationGasLimit: PASSKEY_VERIFICATION_GAS,
      preVerificationGas: 100_000n,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      signature: "0x",
    } as UserOperation<"0.8">;
    op.signature = await account.signUserOperation(op);
    return op;
  }

  /** What validateUserOp answers when the EntryPoint asks it about `signature` over `hash` (an eth_call from the EntryPoint). */
  async function validates(f: Awaited<ReturnType<typeof passkeyFixture>>, signature: Hex, hash: Hex): Promise<bigint> {
    await f.factory.write.createAccount([f.authenticator.qx, f.authenticator.qy, 0n]);
    const op = toPackedUserOperation({ ...(await signedOperation(f.account, [], f.publicClient)), signature });
    const { result } = await f.publicClient.simulateContract({
      account: f.entryPoint,
      address: f.account.address,
      abi: passkeyAccountAbi,
      functionName: "validateUserOp",
      args: [op, hash, 0n],
    });
    return result;
  }

  it("the factory predicts the account's address; createAccount makes it once and returns the same account after", async () => {
    const f = await load();
    const { factory, authenticator, publicClient } = f;
    const predicted = await factory.read.getAddress([authenticator.qx, authenticator.qy, 0n]);
    assert.equal(f.account.address, predicted, "the SDK's address is the factory's");
    assert.notEqual(await factory.read.getAddress([authenticator.qx, authenticator.qy, 1n]), predicted, "another salt, another account");
    assert.equal(await publicClient.getCode({ address: predicted }), undefined);

    const { result: created } = await publicClient.simulateContract({
      address: factory.address,
      abi: factory.abi,
      functionName: "createAccount",
      args: [authenticator.qx, authenticator.qy, 0n],
    });
    assert.equal(created, predicted);
    const first = await publicClient.waitForTransactionReceipt({ hash: await factory.write.createAccount([authenticator.qx, authenticator.qy, 0n]) });
    const events = parseEventLogs({ abi: factory.abi, eventName: "PasskeyAccountCreated", logs: first.logs });
    assert.deepEqual(
      events.map((event) => event.args),
      [{ account: predicted, qx: authenticator.qx, qy: authenticator.qy, salt: 0n }],
    );
    assert.notEqual((await publicClient.getCode({ address: predicted })) ?? "0x", "0x");
    const [qx, qy] = await publicClient.readContract({ address: predicted, abi: passkeyAccountAbi, functionName: "signer" });
    assert.deepEqual([qx, qy], [authenticator.qx, authenticator.qy], "the clone holds its owner's key");
    assert.equal(await publicClient.readContract({ address: predicted, abi: passkeyAccountAbi, functionName: "entryPoint" }), getAddress(f.entryPoint));

    // Again: the same account, nothing created (what the EntryPoint's initCode meets when the account exists).
    const { result: again } = await publicClient.simulateContract({
      address: factory.address,
      abi: factory.abi,
      functionName: "createAccount",
      args: [authenticator.qx, authenticator.qy, 0n],
    });
    assert.equal(again, predicted);
    const second = await publicClient.waitForTransactionReceipt({ hash: await factory.write.createAccount([authenticator.qx, authenticator.qy, 0n]) });
    assert.equal(parseEventLogs({ abi: factory.abi, eventName: "PasskeyAccountCreated", logs: second.logs }).length, 0);
  });

  it("initialises once: a clone cannot be given another key, the implementation none, and a point off the curve is refused", async () => {
    const f = await load();
    const { viem } = connection;
    await f.factory.write.createAccount([f.authenticator.qx, f.authenticator.qy, 0n]);
    const other = softwareAuthenticator();
    const clone = await viem.getContractAt("PasskeyAccount", f.account.address);
    await viem.assertions.revertWithCustomError(clone.write.initialize([other.qx, other.qy]), clone, "InvalidInitialization");
    const implementation = await viem.getContractAt("PasskeyAccount", await f.factory.read.ACCOUNT_IMPLEMENTATION());
    await viem.assertions.revertWithCustomError(implementation.write.initialize([other.qx, other.qy]), implementation, "InvalidInitialization");
    const offCurve = bytesToHex(randomBytes(32));
    await viem.assertions.revertWithCustomError(f.factory.write.createAccount([offCurve, offCurve, 0n]), implementation, "SignerP256InvalidPublicKey");
    await viem.assertions.revertWithCustomError(viem.deployContract("PasskeyAccount", [zeroAddress]), implementation, "PasskeyAccountZeroEntryPoint");
  });

  it("runs a user operation its passkey signed through the EntryPoint: deployed by it, every call of the batch made", async () => {
    const f = await load();
    const { publicClient, deployer, token, authenticator, account, entryPoint } = f;
    await deployer.sendTransaction({ to: account.address, value: parseEther("1") }); // the account prefunds its gas
    const calls = [
      { to: token.address, data: encodeFunctionData({ abi: testTokenAbi, functionName: "faucet", args: [account.address, 1_000n] }) },
      { to: token.address, data: encodeFunctionData({ abi: testTokenAbi, functionName: "approve", args: [deployer.account.address, 400n] }) },
    ];
    const op = await signedOperation(account, calls, publicClient);
    assert.equal(authenticator.signatures, 1, "one assertion of the passkey for the operation");
    const hash = await deployer.writeContract({
      address: entryPoint,
      abi: entryPoint08Abi,
      functionName: "handleOps",
      args: [[toPackedUserOperation(op)], deployer.account.address],
    });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    const [event] = parseEventLogs({ abi: entryPoint08Abi, eventName: "UserOperationEvent", logs: receipt.logs });
    assert.equal(event?.args.sender, account.address);
    assert.equal(event?.args.success, true);
    assert.equal(await token.read.balanceOf([account.address]), 1_000n);
    assert.equal(await token.read.allowance([account.address, deployer.account.address]), 400n);

    // A second operation: the account exists now (no initCode), the nonce moved on.
    const next = await signedOperation(
      account,
      [{ to: token.address, data: encodeFunctionData({ abi: testTokenAbi, functionName: "approve", args: [deployer.account.address, 0n] }) }],
      publicClient,
    );
    assert.equal(next.factory, undefined, "no initCode for an account that exists");
    await publicClient.waitForTransactionReceipt({
      hash: await deployer.writeContract({ address: entryPoint, abi: entryPoint08Abi, functionName: "handleOps", args: [[toPackedUserOperation(next)], deployer.account.address] }),
    });
    assert.equal(await token.read.allowance([account.address, deployer.account.address]), 0n);
    assert.equal(authenticator.signatures, 2);
  });

  it("refuses a user operation signed by another passkey, or for another operation, or with a tampered assertion", async () => {
    const f = await load();
    const hashBytes = new Uint8Array(randomBytes(32));
    const hash = bytesToHex(hashBytes);
    const { authenticator } = f;
    assert.equal(await validates(f, encodeAssertion(authenticator.assert(hashBytes)), hash), SIG_VALIDATION_SUCCESS, "its own passkey over the hash");
    const refused: [string, Hex][] = [
      ["another key", encodeAssertion(authenticator.assert(hashBytes, { signWith: p256.utils.randomSecretKey() }))],
      ["another challenge", encodeAssertion(authenticator.assert(new Uint8Array(randomBytes(32))))],
      ["a registration, not an assertion", encodeAssertion(authenticator.assert(hashBytes, { type: "webauthn.create" }))],
      ["the user not verified", encodeAssertion(authenticator.assert(hashBytes, { flags: 0x01 }))],
      ["garbage", "0x1234"],
    ];
    const tampered = authenticator.assert(hashBytes);
    refused.push([
      "clientDataJSON changed after signing",
      encodeAssertion({ ...tampered, clientDataJSON: tampered.clientDataJSON.replace("http://localhost", "http://evil.test") }),
    ]);
    const flipped = authenticator.assert(hashBytes);
    refused.push([
      "authenticatorData changed after signing",
      encodeAssertion({ ...flipped, authenticatorData: flipped.authenticatorData.map((byte, i) => (i === 36 ? byte ^ 1 : byte)) }),
    ]);
    const pointed = authenticator.assert(hashBytes);
    refused.push(["the challenge index pointing elsewhere", encodeAssertion(pointed, { challengeIndex: 0n })]);
    for (const [what, signature] of refused) assert.equal(await validates(f, signature, hash), SIG_VALIDATION_FAILED, what);
  });

  it("executes for the EntryPoint and itself only; validateUserOp answers the EntryPoint only", async () => {
    const f = await load();
    const { viem } = connection;
    await f.factory.write.createAccount([f.authenticator.qx, f.authenticator.qy, 0n]);
    const account = await viem.getContractAt("PasskeyAccount", f.account.address);
    const call = encodeErc7821Execute([{ to: f.token.address, data: encodeFunctionData({ abi: testTokenAbi, functionName: "faucet", args: [f.account.address, 5n] }) }]);
    await viem.assertions.revertWithCustomErrorWithArgs(f.other.sendTransaction({ to: account.address, data: call }), account, "AccountUnauthorized", [f.other.account.address]);
    const op = toPackedUserOperation({ ...(await signedOperation(f.account, [], f.publicClient)) });
    await viem.assertions.revertWithCustomErrorWithArgs(
      account.write.validateUserOp([op, bytesToHex(randomBytes(32)), 0n], { account: f.other.account }),
      account,
      "AccountUnauthorized",
      [f.other.account.address],
    );
    // The EntryPoint may: an eth_call from its address runs the batch.
    await f.publicClient.call({ account: f.entryPoint, to: account.address, data: call });
  });

  it("ERC-1271 through ERC-7739: a session delegation its passkey signed is valid for this account on this chain only; another passkey's, a raw signature, another account's or chain's are refused", async () => {
    const f = await load();
    const { qx, qy } = f.authenticator;
    await f.factory.write.createAccount([qx, qy, 0n]);
    await f.factory.write.createAccount([qx, qy, 1n]);
    const account = f.account.address;
    const sibling = await f.factory.read.getAddress([qx, qy, 1n]); // the same passkey's second account
    const chainId = await f.publicClient.getChainId();
    const isValid = (address: Address, hash: Hex, signature: Hex) =>
      f.publicClient.readContract({ address, abi: passkeyAccountAbi, functionName: "isValidSignature", args: [hash, signature] });
    // The clone's own EIP-712 domain, not the implementation's: what a signer reads with eip712Domain() (ERC-5267).
    const [, name, version, domainChain, verifyingContract, salt] = await f.publicClient.readContract({ address: account, abi: passkeyAccountAbi, functionName: "eip712Domain" });
    assert.deepEqual({ name, version, chainId: Number(domainChain), verifyingContract, salt }, passkeyAccountDomain(chainId, account));

    const message: SessionDelegation = {
      renter: account,
      sessionKey: f.other.account.address,
      actions: ["reserve", "status", "logs"],
      leaseIds: [],
      issuedAt: 1_800_000_000n,
      expiresAt: 1_800_043_200n,
      salt: bytesToHex(randomBytes(32)),
    };
    const domain = suanliDomain(chainId, f.token.address); // any Suanli domain: the market's in production
    const typed = { domain, types: { SessionDelegation: suanliTypes.SessionDelegation }, primaryType: "SessionDelegation", message } as const;
    const hash = delegationHash(domain, message); // what a node asks isValidSignature about
    /** The delegation signed by `passkey` for the account of `verifier` (ERC-7739: rehashed in that account's domain), wrapped as ERC7739 decodes it. */
    const signFor = async (passkey: typeof f.authenticator, verifier: { chainId: number; verifyingContract: Address }) => {
      const nested = erc7739Hash({ ...typed, verifierDomain: { name, version, salt, ...verifier } });
      return wrapTypedDataSignature({ ...typed, signature: encodeWebAuthnSignature(await passkey.account.sign({ hash: nested })) });
    };
    // The SDK's PasskeyAccount signs it (sdk/internal/passkey-account.ts): one assertion, as a verifier checks it with viem.
    const signed = f.authenticator.signatures;
    const signature = await f.account.signTypedData(typed);
    assert.equal(f.authenticator.signatures, signed + 1, "one approval");
    assert.equal(await isValid(account, hash, signature), "0x1626ba7e", "the passkey's delegation is the account's");
    assert.equal(await f.publicClient.verifyTypedData({ address: account, ...typed, signature }), true);
    const text = "Suanli: a message for the account";
    const personal = await f.account.signMessage({ message: text });
    assert.equal(await f.publicClient.verifyMessage({ address: account, message: text, signature: personal }), true, "a personal message (ERC-7739's PersonalSign)");
    assert.equal(await f.publicClient.verifyMessage({ address: sibling, message: text, signature: personal }), false);
    // Within the gas a node gives an ERC-1271 check (node/sessions/delegations.ts), as the node calls it.
    const { data } = await f.publicClient.call({
      to: account,
      gas: ERC1271_GAS,
      data: encodeFunctionData({ abi: passkeyAccountAbi, functionName: "isValidSignature", args: [hash, signature] }),
    });
    assert.equal(data?.slice(0, 10), "0x1626ba7e");

    const refused = "0xffffffff";
    const control = await signFor(f.authenticator, { chainId, verifyingContract: account });
    assert.equal(await isValid(account, hash, control), "0x1626ba7e", "signFor below makes valid signatures: each refusal is its one change");
    assert.equal(await isValid(account, hash, await signFor(softwareAuthenticator(), { chainId, verifyingContract: account })), refused, "another passkey");
    assert.equal(await isValid(sibling, hash, signature), refused, "the same passkey's other account: its domain differs");
    assert.equal(await isValid(account, hash, await signFor(f.authenticator, { chainId: chainId + 1, verifyingContract: account })), refused, "made for another chain");
    assert.equal(await isValid(account, hash, encodeWebAuthnSignature(await f.authenticator.account.sign({ hash }))), refused, "a raw assertion over the hash, not rewrapped");
    const other = { ...message, sessionKey: f.deployer.account.address };
    assert.equal(await isValid(account, delegationHash(domain, other), signature), refused, "another delegation");
    assert.equal(await isValid(account, `0x${"7739".repeat(16)}`, "0x"), "0x77390001", "ERC-7739's support probe");
  });

  it("verification gas: the account's deployment and a real assertion fit PASSKEY_VERIFICATION_GAS, with the P-256 precompile and without", async () => {
    // Hardhat's default hardfork has EIP-7951's P-256 precompile; Prague has none, so OpenZeppelin's P256 verifies in Solidity.
    for (const hardfork of ["default", "prague"]) {
      const { viem } = hardfork === "default" ? connection : await network.create({ override: { hardfork } });
      const publicClient = await viem.getPublicClient();
      const [wallet] = await viem.getWalletClients();
      const entryPoint = wallet!.account.address; // validateUserOp answers its EntryPoint: here an account that calls it directly
      const factory = await viem.deployContract("PasskeyAccountFactory", [entryPoint]);
      const authenticator = softwareAuthenticator();
      const deployGas = await factory.estimateGas.createAccount([authenticator.qx, authenticator.qy, 0n]);
      await factory.write.createAccount([authenticator.qx, authenticator.qy, 0n]);
      const account = await factory.read.getAddress([authenticator.qx, authenticator.qy, 0n]);
      const hashBytes = new Uint8Array(randomBytes(32));
      const op = toPackedUserOperation({
        sender: account,
        nonce: 0n,
        callData: "0x",
        callGasLimit: 0n,
        verificationGasLimit: PASSKEY_VERIFICATION_GAS,
        preVerificationGas: 0n,
        maxFeePerGas: 0n,
        maxPriorityFeePerGas: 0n,
        signature: encodeAssertion(authenticator.assert(hashBytes)),
      });
      const request = { account: entryPoint, address: account, abi: passkeyAccountAbi, functionName: "validateUserOp", args: [op, bytesToHex(hashBytes), 0n] } as const;
      assert.equal((await publicClient.simulateContract(request)).result, SIG_VALIDATION_SUCCESS, hardfork);
      const validateGas = await publicClient.estimateContractGas(request);
      console.log(`      ${hardfork} hardfork: createAccount ${deployGas} gas, validateUserOp with a real assertion ${validateGas} gas`);
      assert.ok(deployGas + validateGas <= PASSKEY_VERIFICATION_GAS, `${hardfork}: ${deployGas} + ${validateGas} <= ${PASSKEY_VERIFICATION_GAS}`);
    }
  });
});
