import { $ } from "./dom.js";
import { describe, state } from "./state.js";

/**
 * One signature per visit: the wallet delegates the page's requests (reservations, the task, its
 * status, logs, output and cancel) to a key this page holds in memory for 12 hours (docs/console.md).
 * A wallet that refuses is asked for every request instead. A passkey's smart account signs no
 * requests itself (no ERC-1271): it approves the session on-chain, one user operation (one prompt),
 * and without it nothing could be asked of a provider, so its failure fails the sign-in (`required`).
 */
export async function startSession(available: boolean, required = false): Promise<void> {
  const line = $("#wallet-session");
  if (!available) {
    if (required) throw new Error("This deployment has no SessionKeys contract: a passkey account cannot sign its requests without a session");
    line.textContent = "not offered by this deployment (no SessionKeys contract): every request asks the wallet";
    return;
  }
  try {
    const session = await state.client!.startSession();
    line.textContent = `key ${session.sessionKey.slice(0, 10)}… signs your requests until ${new Date(session.expiresAt * 1000).toLocaleString()}`;
  } catch (error) {
    if (required) throw error;
    line.textContent = `none (${describe(error)}): every request asks the wallet`;
  }
}
