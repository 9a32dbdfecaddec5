/**
 * The explorer page's files: index.html and style.css are served as written, app.js is the esbuild
 * bundle of node/api/explorer/src (built by `npm run build`, scripts/build-explorer.ts). Read once
 * at start; nothing is fetched from anywhere else, by the server or by the page.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const EXPLORER_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "explorer");
export const EXPLORER_BUNDLE = path.join(EXPLORER_DIR, "dist", "app.js");

export type ExplorerAssets = { html: string; css: string; js: Buffer | undefined };

async function readOptional(file: string): Promise<Buffer | undefined> {
  try {
    return await readFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

export async function loadExplorerAssets(): Promise<ExplorerAssets> {
  const [html, css, js] = await Promise.all([
    readFile(path.join(EXPLORER_DIR, "index.html"), "utf8"),
    readFile(path.join(EXPLORER_DIR, "style.css"), "utf8"),
    readOptional(EXPLORER_BUNDLE),
  ]);
  return { html, css, js };
}
