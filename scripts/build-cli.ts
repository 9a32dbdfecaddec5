/**
 * Bundles the `suanli` command (node/cli/main.ts and everything of ours it imports) into one ESM
 * file, build/cli/suanli.mjs, so a command starts without compiling TypeScript: tsx transforms
 * every source file of the import graph at each start (about 3 s of a 5 s `suanli --help` on a
 * 2-core host).
 *
 * The packages are bundled too, but for those that must stay files in node_modules (EXTERNAL):
 * loaded from node_modules, the ESM loader resolved, read and compiled some thousand package
 * files at every start, about 2 of the 3 s of CPU that `suanli submit --help` took (1 s
 * bundled); the tests start the CLI, nodes and attestors as processes about 150 times. Bundled
 * CommonJS packages get `require` from a createRequire banner (Node built-ins, and packages
 * required at run time resolve from the repository's node_modules as before).
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
import { mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const CLI_BUNDLE_DIR = path.join(root, "build", "cli");

/**
 * Packages loaded from node_modules as they are: native addons (classic-level, secp256k1), Hardhat
 * (the devnet's embedded chain: it loads its plugins and its own files by path), esbuild, and pino
 * with thread-stream (they start workers from files next to their own `__dirname`), and the
 * TypeScript tools (tsx loads the attestation worker's sources at run time).
 */
export const EXTERNAL = ["hardhat", "@nomicfoundation/*", "classic-level", "node-gyp-build", "secp256k1", "esbuild", "pino", "thread-stream", "typescript", "tsx"];

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

/**
 * Writes `outDir`/suanli.mjs and its chunks (with their source maps) and `outDir`/inputs.json.
 *
 * Code-split: node/cli/main.ts loads the module of the command it runs with a dynamic import
 * (node/cli/commands.ts), and each such import is a chunk holding what only that command needs, so
 * `suanli wallet balance` evaluates viem and the chain code but not libp2p, Helia or the node (about
 * 0.4 s of CPU instead of 1.1 s on a 2-core host). The chunks sit next to suanli.mjs (chunk-*.mjs):
 * every rewritten `import.meta.url` below is relative to that one folder. A build first removes the
 * previous build's chunks.
 */
export async function buildCli(outDir = CLI_BUNDLE_DIR): Promise<{ bundle: string; inputs: number; metafile: esbuild.Metafile }> {
  await mkdir(outDir, { recursive: true });
  for (const name of await readdir(outDir)) if (/^chunk-.*\.mjs(\.map)?$/.test(name)) await rm(path.join(outDir, name));
  const bundle = path.join(outDir, "suanli.mjs");
  const result = await esbuild.build({
    entryPoints: { suanli: path.join(root, "node", "cli", "main.ts") },
    outdir: outDir,
    outExtension: { ".js": ".mjs" },
    splitting: true,
    chunkNames: "chunk-[hash]",
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    external: EXTERNAL,
    banner: { js: 'import { createRequire as __suanliCreateRequire } from "node:module";\nconst require = __suanliCreateRequire(import.meta.url);' },
    sourcemap: "linked",
    // The map names the files without holding their text: a 6 MB map instead of 21 MB, which Node
    // reads at every start (bin/suanli.mjs enables source maps).
    sourcesContent: false,
    metafile: true,
    logLevel: "warning",
    plugins: [rewriteImportMeta(outDir)],
  });
  // Our sources, and package-lock.json for the bundled packages (an install rewrites it): statting
  // each package file at every start would cost what bundling them saved.
  const inputs: Record<string, { size: number; mtimeMs: number }> = {};
  const ours = Object.keys(result.metafile.inputs).filter((file) => !file.split(/[\\/]/).includes("node_modules"));
  for (const file of [...ours, path.join(root, "package-lock.json")]) {
    const absolute = path.resolve(process.cwd(), file);
    const info = await stat(absolute);
    inputs[path.relative(root, absolute).split(path.sep).join("/")] = { size: info.size, mtimeMs: info.mtimeMs };
  }
  await writeFile(path.join(outDir, "inputs.json"), JSON.stringify({ inputs }));
  return { bundle, inputs: Object.keys(inputs).length, metafile: result.metafile };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { bundle, inputs } = await buildCli();
  console.log(`wrote ${path.relative(root, bundle)} (${inputs} source files)`);
}
