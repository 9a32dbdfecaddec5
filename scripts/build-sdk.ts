/**
 * Builds the SDK as an npm package: `sdk/` and the parts of `common/` it imports, compiled to ESM
 * JavaScript with `.d.ts` typings, a package.json with an exports map (Node entry `suanli/sdk`,
 * browser entry `suanli/sdk/browser` without libp2p or Node built-ins, and `suanli/api`: the
 * schemas of a node's HTTP API), the SDK's README, and the tarball `npm pack` makes of it.
 *
 * `npx tsx scripts/build-sdk.ts` writes build/sdk-package/ and build/suanli-<version>.tgz
 * (`npm run build:sdk`); test/sdk/package.test.ts installs that tarball in a fresh project.
 */
import { execFile } from "node:child_process";
import { copyFile, mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { builtinModules, createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const run = promisify(execFile);

/** The package's entries: subpath → compiled module (without extension) under dist/. */
const ENTRIES = {
  "./sdk": "sdk/index",
  "./sdk/browser": "sdk/browser",
  "./api": "common/api/index",
} as const;

export type SdkPackage = { dir: string; tarball: string; version: string; dependencies: Record<string, string> };

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath, entry.name));
}

/** Bare package names the compiled JavaScript and its typings import (statically or dynamically). */
async function importedPackages(dist: string): Promise<Set<string>> {
  const builtins = new Set(builtinModules);
  const names = new Set<string>();
  // Typings count too: a consumer's compiler resolves their imports.
  for (const file of (await listFiles(dist)).filter((name) => name.endsWith(".js") || name.endsWith(".d.ts"))) {
    // Comments hold examples with import lines; strings never start a line with `import`.
    const code = (await readFile(file, "utf8")).replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
    const required = [...code.matchAll(/createRequire\([^)]*\)\(\s*["']([^"'.][^"']*)["']\s*\)/g)];
    for (const match of [...required, ...code.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^import\s+)["']((?:@[\w.-]+\/)?[\w-][\w.-]*(?:\/[\w.@-]+)*)["']/gm)]) {
      const specifier = match[1]!;
      if (specifier.startsWith("node:") || builtins.has(specifier)) continue;
      const parts = specifier.split("/");
      names.add(specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!);
    }
  }
  return names;
}

export async function buildSdkPackage(outDir = path.join(root, "build")): Promise<SdkPackage> {
  const rootPackage = JSON.parse(await readFile(path.join(root, "package.json"), "utf8")) as {
    version: string;
    license: string;
    engines: Record<string, string>;
    dependencies: Record<string, string>;
  };
  const dir = path.join(outDir, "sdk-package");
  const dist = path.join(dir, "dist");
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });

  // Compile with the project's own compiler settings, emitting this time.
  const tsconfig = path.join(outDir, "tsconfig.sdk.json");
  await writeFile(
    tsconfig,
    JSON.stringify({
      extends: path.join(root, "tsconfig.json"),
      // typeRoots: the config may live outside the repository (tests build into a temp folder).
      compilerOptions: {
        noEmit: false,
        allowImportingTsExtensions: false,
        declaration: true,
        outDir: dist,
        rootDir: root,
        types: ["node"],
        typeRoots: [path.join(root, "node_modules/@types")],
        incremental: false,
      },
      include: [],
      files: Object.values(ENTRIES).map((entry) => path.join(root, `${entry}.ts`)),
    }),
  );
  try {
    await run(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", tsconfig], { cwd: root, maxBuffer: 16 * 1024 * 1024 });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`tsc failed building the SDK package:\n${stdout ?? ""}${stderr ?? ""}`, { cause: error });
  }

  const dependencies: Record<string, string> = {};
  for (const name of [...(await importedPackages(dist))].sort()) {
    const version = rootPackage.dependencies[name];
    if (!version) throw new Error(`The SDK imports ${name}, which is not a dependency in package.json: add it there (pinned)`);
    dependencies[name] = version;
  }

  const entry = (module: string) => ({ types: `./dist/${module}.d.ts`, default: `./dist/${module}.js` });
  const manifest = {
    name: "suanli",
    version: rootPackage.version,
    description: "Suanli SDK: rent GPU compute on the Suanli marketplace from Node (libp2p) or a browser (a node's HTTP API)",
    license: rootPackage.license,
    type: "module",
    engines: rootPackage.engines,
    sideEffects: false,
    exports: {
      // Bundlers that target browsers pick the browser build even for "suanli/sdk".
      "./sdk": { browser: entry(ENTRIES["./sdk/browser"]), default: entry(ENTRIES["./sdk"]) },
      "./sdk/browser": entry(ENTRIES["./sdk/browser"]),
      "./api": entry(ENTRIES["./api"]),
      "./package.json": "./package.json",
    },
    files: ["dist", "README.md", "LICENSE"],
    dependencies,
  };
  await writeFile(path.join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  await copyFile(path.join(root, "sdk/README.md"), path.join(dir, "README.md"));
  // The licence package.json names travels with the code (Apache-2.0 asks for a copy).
  await copyFile(path.join(root, "LICENSE"), path.join(dir, "LICENSE"));

  const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", outDir], { cwd: dir, maxBuffer: 16 * 1024 * 1024 });
  const [packed] = JSON.parse(stdout) as { filename: string }[];
  return { dir, tarball: path.join(outDir, packed!.filename), version: rootPackage.version, dependencies };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const built = await buildSdkPackage();
  console.log(`${built.tarball}\n  dependencies: ${Object.keys(built.dependencies).join(", ")}`);
}
