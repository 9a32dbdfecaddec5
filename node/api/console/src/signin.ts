/**
 * Signing in: the injected wallet (*Connect wallet*), or a passkey owning an ERC-4337 smart account
 * (*Sign in with a passkey*, passkey.ts); either way the page's SDK client, its session, the
 * balances and the offers. A change of renter dispatches "renter-changed" on the document: the task
 * list (main.ts) starts over, since tasks belong to the account that paid for them.
 */
import { createPublicClient, custom, erc20Abi, formatUnits, http } from "viem";
import { runDetached } from "../../../../common/detached.js";
import { createClient } from "../../../../sdk/browser.js";
import { $ } from "./dom.js";
import { refreshOffers } from "./offers.js";
import { createPasskey, passkeyOwner, passkeyUnavailable, rememberedPasskey } from "./passkey.js";
import { startSession } from "./session.js";
import { describe, show, state, tokens, trimFraction } from "./state.js";
// ---------------------------------------------------------------------------------------------
// Wallet

export async function connect(): Promise<void> {
  show("#wallet-error", undefined);
  const config = state.config!;
  const wallet = window.ethereum;
  if (!wallet) {
    show("#wallet-error", "No browser wallet found. Install or enable a wallet extension (any EIP-1193 wallet), then reload this page.");
    return;
  }
  if (!config.rpcUrl) {
    show("#wallet-error", "This node publishes no chain RPC URL for browsers, so the console cannot read the chain. Its operator sets api.console.rpcUrl (docs/console.md).");
    return;
  }
  const button = $<HTMLButtonElement>("#connect");
  button.disabled = true;
  button.textContent = "Connecting…";
  try {
    const accounts = (await wallet.request({ method: "eth_requestAccounts" })) as `0x${string}`[];
    if (!accounts[0]) throw new Error("The wallet shared no account.");
    const walletChain = Number(await wallet.request({ method: "eth_chainId" }));
    if (walletChain !== config.chainId) {
      try {
        await wallet.request({ method: "wallet_switchEthereumChain", params: [{ chainId: `0x${config.chainId.toString(16)}` }] });
      } catch (error) {
        throw new Error(`The wallet is on chain ${walletChain}; this node serves chain ${config.chainId}. Switch the wallet to chain ${config.chainId}. (${describe(error)})`, {
          cause: error,
        });
      }
    }
    await state.client?.close();
    state.client = await createClient({
      rpcUrl: config.rpcUrl,
      nodeUrl: window.location.origin,
      account: accounts[0],
      walletTransport: custom(wallet),
      deployment: state.rawDeployment!,
      onProgress,
    });
    state.wallet = wallet;
    wallet.on?.("accountsChanged", onAccountsChanged);
    await signedIn(accounts[0], "wallet");
    button.textContent = "Reconnect wallet";
  } catch (error) {
    show("#wallet-error", describe(error));
    button.textContent = "Connect wallet";
  } finally {
    button.disabled = false;
  }
}

const onProgress = (line: string) => {
  $(state.progressTarget).textContent = line;
};

/**
 * "Sign in with a passkey": the renter is the passkey's smart account (docs/aa.md "A passkey owner"). `fresh`: create a
 * new passkey even when this browser remembers one. Creating asks the authenticator once (no signature of anything);
 * the session's on-chain approval below is the first assertion, which also deploys the account.
 */
export async function connectPasskey(fresh: boolean): Promise<void> {
  show("#wallet-error", undefined);
  const config = state.config!;
  const unavailable = passkeyUnavailable(config);
  if (unavailable) return show("#wallet-error", unavailable);
  const buttons = [$<HTMLButtonElement>("#passkey-signin"), $<HTMLButtonElement>("#passkey-new")];
  for (const button of buttons) button.disabled = true;
  const line = $("#passkey-status");
  try {
    let passkey = fresh ? undefined : rememberedPasskey();
    if (!passkey) {
      line.textContent = "Creating a passkey: confirm on your device…";
      passkey = await createPasskey();
    }
    line.textContent = `Passkey ${passkey.id.slice(0, 8)}…, created ${new Date(passkey.createdAt).toLocaleString()}. Signing in…`;
    await state.client?.close();
    state.client = undefined;
    state.client = await createClient({
      rpcUrl: config.rpcUrl!,
      nodeUrl: window.location.origin,
      deployment: state.rawDeployment!,
      smartAccount: { owner: passkeyOwner(passkey), bundlerUrl: config.bundlerUrl!, ...(config.paymasterUrl ? { paymasterUrl: config.paymasterUrl } : {}) },
      onProgress,
    });
    state.wallet = undefined;
    // Shown before the session's approval, so that a failure (no ETH and no sponsor, say) still names the account.
    line.textContent = `Your account is ${state.client.address}. Approve its session on your device…`;
    await signedIn(state.client.address!, "passkey");
    line.textContent = `Signed in with passkey ${passkey.id.slice(0, 8)}… (this browser remembers it for this page).`;
    $("#passkey-signin").textContent = "Sign in again with your passkey";
  } catch (error) {
    line.textContent = state.client?.address ? `Not signed in. Your passkey's account is ${state.client.address}.` : "";
    show("#wallet-error", describe(error));
    // Whoever was signed in before is not any more: the client was replaced.
    if (state.client) signedOut();
  } finally {
    for (const button of buttons) button.disabled = false;
  }
}

function signedOut(): void {
  runDetached(state.client?.close() ?? Promise.resolve(), console, "close");
  state.client = undefined;
  state.address = undefined;
  state.signer = undefined;
  startOver();
  $("#wallet-facts").hidden = true;
  $<HTMLButtonElement>("#submit-button").disabled = true;
  $<HTMLButtonElement>("#offers-refresh").disabled = true;
  delete document.body.dataset.connected;
}

/** The renter is `address` from now on: its session, balances and the offers; another renter's tasks are put away. */
async function signedIn(address: `0x${string}`, signer: "wallet" | "passkey"): Promise<void> {
  await startSession(state.config!.deployment.contracts.sessions !== undefined, signer === "passkey");
  if (state.address && state.address.toLowerCase() !== address.toLowerCase()) startOver();
  state.address = address;
  state.signer = signer;
  $("#wallet-address").textContent = address;
  $("#wallet-kind").textContent =
    signer === "wallet"
      ? "your browser wallet"
      : `a passkey: this address is its smart account (ERC-4337); ${state.config!.paymasterUrl ? "the deployment's sponsor pays the gas, no ETH needed" : "it pays its gas in ETH"}`;
  $("#wallet-facts").hidden = false;
  $<HTMLButtonElement>("#submit-button").disabled = false;
  $<HTMLButtonElement>("#offers-refresh").disabled = false;
  await Promise.all([refreshBalances(), refreshOffers()]);
  document.body.dataset.connected = "true";
  document.body.dataset.signer = signer;
}

/** Tasks belong to the account that paid for them: a new renter starts with none (main.ts puts them away). */
function startOver(): void {
  document.dispatchEvent(new Event("renter-changed"));
}

function onAccountsChanged(accounts: unknown): void {
  const next = (accounts as string[])[0];
  if (state.signer !== "wallet" || next?.toLowerCase() === state.address?.toLowerCase()) return;
  startOver();
  runDetached(connect(), console, "connect");
}

export async function refreshBalances(): Promise<void> {
  const config = state.config!;
  const client = state.client!;
  const reader = createPublicClient({ transport: http(config.rpcUrl!) });
  try {
    const [balance, gas, owed] = await Promise.all([
      reader.readContract({ address: config.deployment.contracts.token, abi: erc20Abi, functionName: "balanceOf", args: [state.address!] }),
      reader.getBalance({ address: state.address! }),
      client.owed(),
    ]);
    $("#wallet-balance").textContent = tokens(balance);
    const sponsored = state.signer === "passkey" && state.config!.paymasterUrl;
    $("#wallet-gas").textContent = `${trimFraction(formatUnits(gas, 18), 6)} ETH${sponsored ? " (none needed: the sponsor pays the gas)" : ""}`;
    $("#wallet-owed").textContent = tokens(owed);
  } catch (error) {
    show("#wallet-error", `Could not read the balances: ${describe(error)}`);
  }
}
