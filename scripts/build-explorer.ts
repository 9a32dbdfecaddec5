/**
 * Bundles the explorer page's script (node/api/explorer/src/main.ts) with esbuild into
 * node/api/explorer/dist/app.js, which the API serves. Everything the page runs is in that one
 * file: no CDN, nothing fetched at run time. Run by `npm run build`; the explorer's browser test
 * runs it too, so a clean clone needs no extra step.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const EXPLORER_ENTRY = path.join(root, "node/api/explorer/src/main.ts");
export const EXPLORER_OUTFILE = path.join(root, "node/api/explorer/dist/app.js");

/** Builds the bundle; resolves to its size in bytes. */
export async function buildExplorer(): Promise<number> {
  const result = await build({
    entryPoints: [EXPLORER_ENTRY],
    outfile: EXPLORER_OUTFILE,
    bundle: true,
    format: "esm",
    platform: "browser",
    target: ["es2022"],
    minify: true,
    legalComments: "none",
    metafile: true,
    logLevel: "warning",
  });
  return result.metafile.outputs[path.relative(process.cwd(), EXPLORER_OUTFILE)]?.bytes ?? Object.values(result.metafile.outputs)[0]?.bytes ?? 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const bytes = await buildExplorer();
  console.log(`wrote ${path.relative(root, EXPLORER_OUTFILE)} (${Math.round(bytes / 1024)} KiB)`);
}
