/**
 * The web pages' files (the explorer's and the renter console's): index.html and style.css are
 * served as written, app.js is the esbuild bundle of the page's src/ (built by `npm run build`,
 * scripts/build-explorer.ts). Read once at start; nothing is fetched from anywhere else by the
 * server, and the pages fetch only from the node (the console also from the chain's RPC).
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const API_DIR = path.dirname(fileURLToPath(import.meta.url));
export const EXPLORER_DIR = path.join(API_DIR, "explorer");
export const EXPLORER_BUNDLE = path.join(EXPLORER_DIR, "dist", "app.js");
export const CONSOLE_DIR = path.join(API_DIR, "console");
export const CONSOLE_BUNDLE = path.join(CONSOLE_DIR, "dist", "app.js");

export type ExplorerAssets = { html: string; css: string; js: Buffer | undefined };
/** A page's files: the same three as the explorer's. */
export type PageAssets = ExplorerAssets;

async function readOptional(file: string): Promise<Buffer | undefined> {
  try {
    return await readFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** Reads a page folder: `index.html`, `style.css` and (when built) `dist/app.js`. */
export async function loadPageAssets(dir: string): Promise<PageAssets> {
  const [html, css, js] = await Promise.all([
    readFile(path.join(dir, "index.html"), "utf8"),
    readFile(path.join(dir, "style.css"), "utf8"),
    readOptional(path.join(dir, "dist", "app.js")),
  ]);
  return { html, css, js };
}

export function loadExplorerAssets(): Promise<ExplorerAssets> {
  return loadPageAssets(EXPLORER_DIR);
}

export function loadConsoleAssets(): Promise<PageAssets> {
  return loadPageAssets(CONSOLE_DIR);
}
