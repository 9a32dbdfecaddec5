import assert from "node:assert/strict";
import { erc20Abi, parseEventLogs } from "viem";
import { providerRegistryAbi } from "../../common/abi.js";
import { decodeRevert, revertName, revertReason, sendContract, signPermit } from "../../common/chain/tx.js";
import { fund, startDevnet, type Devnet } from "../support/devnet.js";

describe("common/chain/tx: one typed way to send, one revert decoder, one permit (devnet)", function () {
  this.timeout(60_000);
  let devnet: Devnet;
  before(async () => {
    devnet = await startDevnet();
  });
  after(async () => devnet?.close());

  it("sends a typed write and returns its receipt; a revert comes back as the contract's custom error with its arguments", async () => {
    const provider = await devnet.wallet(4);
    const registry = devnet.deployment.contracts.registry!;
    const receipt = await sendContract(provider, { address: registry, abi: providerRegistryAbi, functionName: "register", args: ["12D3KooWTxTest", "devnet://tx"] });
    assert.equal(receipt.status, "success");
    const [registered] = parseEventLogs({ abi: providerRegistryAbi, logs: receipt.logs, eventName: "ProviderRegistered" });
    assert.equal(registered!.args.provider, provider.account.address);

    // Staking without an allowance: the token's own error, decoded through the registry's call.
    await fund(devnet, provider, 1_000n);
    const failure = await sendContract(provider, { address: registry, abi: providerRegistryAbi, functionName: "stake", args: [1_000n] }).then(
      () => assert.fail("stake without an allowance must revert"),
      (error: unknown) => error,
    );
    const revert = decodeRevert(failure);
    assert.equal(revert?.name, "ERC20InsufficientAllowance");
    assert.deepEqual(revert?.args, [registry, 0n, 1_000n]);
    assert.equal(revertName(failure), "ERC20InsufficientAllowance");
    assert.equal(revertReason(failure), `ERC20InsufficientAllowance(${registry}, 0, 1000)`);
    assert.equal(decodeRevert(new Error("not a contract call")), undefined);
    assert.equal(revertReason(new Error("not a contract call")), "not a contract call");

    // Types: a function the ABI lacks, or wrong arguments, do not compile.
    const typeChecks = async () => {
      // @ts-expect-error not a function of the registry
      await sendContract(provider, { address: registry, abi: providerRegistryAbi, functionName: "noSuchFunction", args: [] });
      // @ts-expect-error stake takes an amount, not a string
      await sendContract(provider, { address: registry, abi: providerRegistryAbi, functionName: "stake", args: ["a lot"] });
      // @ts-expect-error a view is not a write
      await sendContract(provider, { address: registry, abi: erc20Abi, functionName: "balanceOf", args: [registry] });
    };
    assert.equal(typeof typeChecks, "function");
  });

  it("signs an EIP-2612 permit the token accepts", async () => {
    const owner = await devnet.wallet(5);
    const spender = (await devnet.wallet(6)).account.address;
    const token = devnet.deployment.contracts.token;
    const deadline = BigInt(Math.floor(Date.now() / 1000) + 600);
    const permit = await signPermit(owner, { owner: owner.account, token, spender, value: 777n, deadline, chainId: devnet.deployment.chainId });
    assert.ok(permit);
    const permitAbi = [
      {
        type: "function",
        name: "permit",
        stateMutability: "nonpayable",
        inputs: [
          { name: "owner", type: "address" },
          { name: "spender", type: "address" },
          { name: "value", type: "uint256" },
          { name: "deadline", type: "uint256" },
          { name: "v", type: "uint8" },
          { name: "r", type: "bytes32" },
          { name: "s", type: "bytes32" },
        ],
        outputs: [],
      },
    ] as const;
    await sendContract(owner, {
      address: token,
      abi: permitAbi,
      functionName: "permit",
      args: [owner.account.address, spender, permit.value, permit.deadline, permit.v, permit.r, permit.s],
    });
    const allowance = await owner.publicClient.readContract({ address: token, abi: erc20Abi, functionName: "allowance", args: [owner.account.address, spender] });
    assert.equal(allowance, 777n);
  });
});
