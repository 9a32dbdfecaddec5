/**
 * The console page's state (the wallet, the SDK client, the tasks of this tab) and the small
 * helpers every part of the page uses.
 */
import { formatUnits, type EIP1193Provider } from "viem";
import type { ConsoleConfig } from "../../../../common/api/console.js";
import type { SubmitTaskReturnType, SuanliClient } from "../../../../sdk/browser.js";
import { $ } from "./dom.js";

export type TaskRow = { submitted: SubmitTaskReturnType; state: string; units: number; model: string };

export const state = {
  config: undefined as ConsoleConfig | undefined,
  /** The manifest as the node sent it (createClient parses it itself). */
  rawDeployment: undefined as Record<string, unknown> | undefined,
  client: undefined as SuanliClient | undefined,
  wallet: undefined as EIP1193Provider | undefined,
  address: undefined as `0x${string}` | undefined,
  /** Who signs for `address`: the injected wallet, or a passkey owning the smart account at `address` (passkey.ts). */
  signer: undefined as "wallet" | "passkey" | undefined,
  tasks: new Map<string, TaskRow>(),
  selected: undefined as string | undefined,
  /** Ends the selected task's log stream and status polling. */
  watch: undefined as AbortController | undefined,
  /** Where the SDK's progress lines go: the form's status while submitting, the task's otherwise. */
  progressTarget: "#submit-status",
  /** Tasks whose receipt is shown: final, so no more status reads (each is a wallet signature). */
  finished: new Set<string>(),
};

/** "0.999937934992" -> "0.999937": at most `digits` fraction digits (truncated, never rounded up). */
export const trimFraction = (text: string, digits: number) => text.replace(new RegExp(`(\\.\\d{${digits}})\\d+$`), "$1");
export const token = () => state.config!.deployment.token;
export const tokens = (amount: bigint) => `${formatUnits(amount, token().decimals)} ${token().symbol}`;

export function show(selector: string, text: string | undefined): void {
  const node = $(selector);
  node.textContent = text ?? "";
  node.hidden = !text;
}

/** What to show for an error: the SDK's message (summary, hints, details) or a wallet's. */
export function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    // EIP-1193: 4001 is the user saying no in their wallet.
    if (code === 4001) return "The wallet refused the request (rejected by the user).";
    return error.name && error.name !== "Error" ? `${error.name}: ${error.message}` : error.message;
  }
  return String(error);
}

export async function getJson(path: string): Promise<unknown> {
  const response = await fetch(new URL(path, window.location.origin), { headers: { accept: "application/json" } });
  const body: unknown = await response.json().catch(() => undefined);
  if (!response.ok) {
    const error = (body as { error?: { message?: string } } | undefined)?.error;
    throw new Error(`${path}: ${error?.message ?? `HTTP ${response.status}`}`);
  }
  return body;
}
