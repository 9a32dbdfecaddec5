import type { EIP1193Provider } from "viem";

declare global {
  interface Window {
    /** The injected wallet (an EIP-1193 provider). */
    ethereum?: EIP1193Provider;
  }
}

/** The console page's one DOM lookup: an element the page must have (a missing one is a bug in the page). */
export const $ = <T extends HTMLElement>(selector: string): T => {
  const node = document.querySelector<T>(selector);
  if (!node) throw new Error(`console page lacks ${selector}`);
  return node;
};

/** A table cell with `text` (as text, never markup). */
export function cell(text: string, className?: string): HTMLTableCellElement {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}
