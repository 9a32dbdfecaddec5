/**
 * Bundles the `suanli` command (node/cli/main.ts and everything of ours it imports) into one ESM
 * file, build/cli/suanli.mjs, so a command starts without compiling TypeScript: tsx transforms
 * every source file of the import graph at each start (about 3 s of a 5 s `suanli --help` on a
 * 2-core host). Packages stay external (loaded from node_modules as they are).
 *
 * Paths a module computes from its own `import.meta.url` (the artifacts folder, deployments, the
 * attestation worker's entry) must still point where they did: each source file's
 * `import.meta.url` is rewritten to the URL that file has in the repository, computed from the
 * bundle's own location, so the bundle works wherever the repository (or package) is unpacked.
 *
 * build/cli/inputs.json lists every source file the bundle holds with its size and mtime:
 * bin/suanli.mjs runs the bundle only while all of them are unchanged, and otherwise runs the
 * sources through tsx as before, so an edited source is never shadowed by a stale bundle.
 *
 * `npx tsx scripts/build-cli.ts` (`npm run build:cli`); `.ci/run` builds it before the tests.
 */
import { mkdir, readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const CLI_BUNDLE_DIR = path.join(root, "build", "cli");

/** Rewrites `import.meta.url` in each of our source files to that file's URL seen from `outDir`. */
const rewriteImportMeta = (outDir: string): esbuild.Plugin => ({
  name: "suanli-import-meta",
  setup(build) {
    build.onLoad({ filter: /\.(ts|mts|js|mjs)$/ }, async (args) => {
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const source = await readFile(args.path, "utf8");
      if (!source.includes("import.meta.url")) return undefined;
      const relative = path.relative(outDir, args.path).split(path.sep).join("/");
      const contents = source.replaceAll("import.meta.url", `new URL(${JSON.stringify(relative)}, import.meta.url).href`);
      return { contents, loader: args.path.endsWith("ts") ? "ts" : "js" };
    });
  },
});

/** Writes `outDir`/suanli.mjs (with its source map) and `outDir`/inputs.json. */
export async function buildCli(outDir = CLI_BUNDLE_DIR): Promise<{ bundle: string; inputs: number }> {
  await mkdir(outDir, { recursive: true });
  const bundle = path.join(outDir, "suanli.mjs");
  const result = await esbuild.build({
    entryPoints: [path.join(root, "node", "cli", "main.ts")],
    outfile: bundle,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    packages: "external",
    sourcemap: "linked",
    metafile: true,
    logLevel: "warning",
    plugins: [rewriteImportMeta(outDir)],
  });
  const inputs: Record<string, { size: number; mtimeMs: number }> = {};
  for (const file of Object.keys(result.metafile.inputs)) {
    const absolute = path.resolve(process.cwd(), file);
    const info = await stat(absolute);
    inputs[path.relative(root, absolute).split(path.sep).join("/")] = { size: info.size, mtimeMs: info.mtimeMs };
  }
  await writeFile(path.join(outDir, "inputs.json"), JSON.stringify({ inputs }));
  return { bundle, inputs: Object.keys(inputs).length };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { bundle, inputs } = await buildCli();
  console.log(`wrote ${path.relative(root, bundle)} (${inputs} source files)`);
}
