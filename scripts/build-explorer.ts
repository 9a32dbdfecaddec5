/**
 * Bundles the web pages' scripts with esbuild: the explorer's (node/api/explorer/src/main.ts) into
 * node/api/explorer/dist/app.js and the renter console's (node/api/console/src/main.ts, the browser
 * SDK inside) into node/api/console/dist/app.js, which the API serves. Everything a page runs is
 * in that one file: no CDN, nothing fetched at run time. Run by `npm run build`; the pages'
 * browser tests run it too, so a clean clone needs no extra step.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const EXPLORER_ENTRY = path.join(root, "node/api/explorer/src/main.ts");
export const EXPLORER_OUTFILE = path.join(root, "node/api/explorer/dist/app.js");
export const CONSOLE_ENTRY = path.join(root, "node/api/console/src/main.ts");
export const CONSOLE_OUTFILE = path.join(root, "node/api/console/dist/app.js");

/** Builds the explorer's bundle; resolves to its size in bytes. */
export function buildExplorer(): Promise<number> {
  return buildPage(EXPLORER_ENTRY, EXPLORER_OUTFILE);
}

/** Builds the renter console's bundle; resolves to its size in bytes. */
export function buildConsole(): Promise<number> {
  return buildPage(CONSOLE_ENTRY, CONSOLE_OUTFILE);
}

async function buildPage(entry: string, outfile: string): Promise<number> {
  const result = await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    format: "esm",
    platform: "browser",
    target: ["es2022"],
    minify: true,
    legalComments: "none",
    metafile: true,
    logLevel: "warning",
  });
  return result.metafile.outputs[path.relative(process.cwd(), outfile)]?.bytes ?? Object.values(result.metafile.outputs)[0]?.bytes ?? 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const [outfile, run] of [
    [EXPLORER_OUTFILE, buildExplorer],
    [CONSOLE_OUTFILE, buildConsole],
  ] as const) {
    const bytes = await run();
    console.log(`wrote ${path.relative(root, outfile)} (${Math.round(bytes / 1024)} KiB)`);
  }
}
