/**
 * ERC-4337 parts every side shares (issue 38, docs/aa.md): where EntryPoint v0.8 and eth-infinitism's
 * SimpleAccountFactory live, and the slices of their ABIs the SDK and the deploy call.
 */
import { decodeAbiParameters, decodeFunctionData, encodeAbiParameters, encodeFunctionData, getAddress, http, type Address, type Hex } from "viem";
import { createBundlerClient, entryPoint08Address } from "viem/account-abstraction";
import { passkeyAccountAbi } from "./abi.js";
import { SuanliError } from "./errors.js";

/** A bundler that does not answer, or serves another EntryPoint. */
export class BundlerUnavailableError extends SuanliError {
  override name = "BundlerUnavailableError";
  /** "unreachable": no answer in time; "entry-point": it answers for other EntryPoints. */
  reason: "unreachable" | "entry-point" = "unreachable";
}

/**
 * EntryPoint v0.8 at its canonical address (the same on every chain: CREATE2 through the deterministic deployer). Bundlers
 * such as Alto recognise the version by this address, so a deployment uses it rather than an EntryPoint of its own.
 */
export const ENTRY_POINT_08 = entryPoint08Address;

/** SimpleAccountFactory v0.8 for that EntryPoint, at its canonical address (CREATE2, salt 0, the package's own bytecode). */
export const SIMPLE_ACCOUNT_FACTORY_08 = "0x13E9ed32155810FDbd067D4522C492D6f68E5944" as const;

/** @account-abstraction/contracts 0.8's SimpleAccountFactory, the functions used here. */
export const simpleAccountFactoryAbi = [
  {
    type: "function",
    name: "createAccount",
    stateMutability: "nonpayable",
    inputs: [
      { name: "owner", type: "address" },
      { name: "salt", type: "uint256" },
    ],
    outputs: [{ name: "ret", type: "address" }],
  },
  {
    type: "function",
    name: "getAddress",
    stateMutability: "view",
    inputs: [
      { name: "owner", type: "address" },
      { name: "salt", type: "uint256" },
    ],
    outputs: [{ name: "", type: "address" }],
  },
  { type: "function", name: "accountImplementation", stateMutability: "view", inputs: [], outputs: [{ name: "", type: "address" }] },
  { type: "function", name: "senderCreator", stateMutability: "view", inputs: [], outputs: [{ name: "", type: "address" }] },
] as const;

/** @account-abstraction/contracts 0.8's SimpleAccount (BaseAccount's execute/executeBatch and its owner). */
export const simpleAccountAbi = [
  {
    type: "function",
    name: "execute",
    stateMutability: "nonpayable",
    inputs: [
      { name: "target", type: "address" },
      { name: "value", type: "uint256" },
      { name: "data", type: "bytes" },
    ],
    outputs: [],
  },
  {
    type: "function",
    name: "executeBatch",
    stateMutability: "nonpayable",
    inputs: [
      {
        name: "calls",
        type: "tuple[]",
        components: [
          { name: "target", type: "address" },
          { name: "value", type: "uint256" },
          { name: "data", type: "bytes" },
        ],
      },
    ],
    outputs: [],
  },
  { type: "function", name: "owner", stateMutability: "view", inputs: [], outputs: [{ name: "", type: "address" }] },
] as const;

/**
 * Asks the bundler at `url` which EntryPoints it serves (`eth_supportedEntryPoints`) and throws BundlerUnavailableError,
 * naming the URL, when it does not answer within `timeoutMs` or does not serve `entryPoint`: a renter learns that before
 * anything is signed or sent.
 *
 * @example
 * await checkBundler("http://127.0.0.1:4337", deployment.contracts.entryPoint!);
 */
export async function checkBundler(url: string, entryPoint: Address, timeoutMs = 5_000): Promise<void> {
  const bundler = createBundlerClient({ transport: http(url, { timeout: timeoutMs, retryCount: 0 }) });
  let served: readonly Address[];
  try {
    served = await bundler.getSupportedEntryPoints();
  } catch (cause) {
    throw new BundlerUnavailableError(`The ERC-4337 bundler at ${url} does not answer`, {
      cause: cause as Error,
      metaMessages: ["Nothing was signed or sent. Start the bundler (`npm run devnet` starts one) or point --bundler-url at a running one."],
    });
  }
  const want = getAddress(entryPoint);
  if (!served.some((address) => getAddress(address) === want)) {
    const error = new BundlerUnavailableError(`The bundler at ${url} serves ${served.join(", ") || "no EntryPoint"}, not this deployment's ${want}`, {
      metaMessages: ["Nothing was signed or sent. Use a bundler for this chain's EntryPoint v0.8."],
    });
    error.reason = "entry-point";
    throw error;
  }
}

/**
 * ERC-7821's batch mode as OpenZeppelin's ERC7821 (and so the PasskeyAccount, docs/aa.md "A passkey owner") takes it:
 * call type 0x01 (batch), exec type 0x00 (revert on any failure), selector 0: every call runs, or none.
 */
export const ERC7821_BATCH_MODE: Hex = "0x0100000000000000000000000000000000000000000000000000000000000000";

const erc7821Calls = [
  {
    type: "tuple[]",
    components: [
      { name: "target", type: "address" },
      { name: "value", type: "uint256" },
      { name: "callData", type: "bytes" },
    ],
  },
] as const;

/** A PasskeyAccount's `execute(mode, executionData)` calldata for `calls`, in the batch mode (one call is a batch of one). */
export function encodeErc7821Execute(calls: readonly { to: Address; value?: bigint | undefined; data?: Hex | undefined }[]): Hex {
  const executionData = encodeAbiParameters(erc7821Calls, [calls.map((call) => ({ target: call.to, value: call.value ?? 0n, callData: call.data ?? "0x" }))]);
  return encodeFunctionData({ abi: passkeyAccountAbi, functionName: "execute", args: [ERC7821_BATCH_MODE, executionData] });
}

/** The calls of a PasskeyAccount's `execute` in the batch mode; undefined for any other calldata (another function, another mode). */
export function decodeErc7821Execute(callData: Hex): { target: Address; value: bigint; data: Hex }[] | undefined {
  try {
    const decoded = decodeFunctionData({ abi: passkeyAccountAbi, data: callData });
    if (decoded.functionName !== "execute" || decoded.args[0].toLowerCase() !== ERC7821_BATCH_MODE) return undefined;
    const [calls] = decodeAbiParameters(erc7821Calls, decoded.args[1]);
    return calls.map((call) => ({ target: call.target, value: call.value, data: call.callData }));
  } catch {
    return undefined;
  }
}
