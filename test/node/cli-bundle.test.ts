import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { buildCli } from "../../scripts/build-cli.js";

const run = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const node = path.join(root, "node_modules", "node", "bin", "node");

/**
 * bin/suanli.mjs runs build/cli/suanli.mjs only while every source file listed in
 * build/cli/inputs.json is unchanged; otherwise it runs node/cli/main.ts through tsx. Each case
 * runs the real bin in a scratch copy of that layout (its own tiny bundle and sources), so what it
 * prints says which one ran.
 */
describe("suanli bin: the prebuilt bundle or the sources", function () {
  this.timeout(120_000);
  let dir: string;
  let source: string;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-bin-"));
    await mkdir(path.join(dir, "bin"));
    await mkdir(path.join(dir, "build", "cli"), { recursive: true });
    await mkdir(path.join(dir, "node", "cli"), { recursive: true });
    await copyFile(path.join(root, "bin", "suanli.mjs"), path.join(dir, "bin", "suanli.mjs"));
    await symlink(path.join(root, "node_modules"), path.join(dir, "node_modules"));
    source = path.join(dir, "node", "cli", "main.ts");
    await writeFile(source, 'const from: string = "sources";\nconsole.log(from);\n');
    await writeFile(path.join(dir, "build", "cli", "suanli.mjs"), 'console.log("bundle");\n');
    const info = await stat(source);
    await writeFile(path.join(dir, "build", "cli", "inputs.json"), JSON.stringify({ inputs: { "node/cli/main.ts": { size: info.size, mtimeMs: info.mtimeMs } } }));
  });
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  const ran = async (env: Record<string, string> = {}) => (await run(node, [path.join(dir, "bin", "suanli.mjs")], { env: { ...process.env, ...env } })).stdout.trim();

  it("runs the bundle while its sources are unchanged, with V8's code cache next to it (not in the shared /tmp)", async () => {
    const env = { ...process.env };
    delete env.NODE_COMPILE_CACHE;
    delete env.NODE_DISABLE_COMPILE_CACHE;
    const bundled = async () => (await run(node, [path.join(dir, "bin", "suanli.mjs")], { env })).stdout.trim();
    assert.equal(await bundled(), "bundle");
    const cache = path.join(dir, "build", "cli", ".compile-cache");
    assert.ok((await stat(cache)).isDirectory(), "build/cli/.compile-cache exists after one run");
    assert.ok((await readdir(cache)).length > 0, "Node keeps its cache there");
    // The cache folder beside inputs.json does not make the bundle look stale.
    assert.equal(await bundled(), "bundle");
  });

  it("runs the sources once one of them is edited (a new mtime, same size)", async () => {
    const later = new Date(Date.now() + 5_000);
    await utimes(source, later, later);
    assert.equal(await ran(), "sources");
  });

  it("runs the sources when a source changed size, the list is missing, or SUANLI_FROM_SOURCE=1", async () => {
    assert.equal(await ran({ SUANLI_FROM_SOURCE: "1" }), "sources");
    await writeFile(source, `${await readFile(source, "utf8")}// edited\n`);
    assert.equal(await ran(), "sources");
    await rm(path.join(dir, "build", "cli", "inputs.json"));
    assert.equal(await ran(), "sources");
  });

  it("the real bundle answers like the sources and keeps paths relative to each source file", async () => {
    // Built into a scratch folder: the repository's own build/cli may be in use by other tests.
    const { bundle, inputs } = await buildCli(path.join(dir, "real"));
    assert.ok(inputs > 100, `the bundle holds the CLI's sources (${inputs})`);
    const code = await readFile(bundle, "utf8");
    // node/chain/artifacts.ts finds artifacts/ from its own URL: rewritten to that file's URL.
    const artifacts = path
      .relative(path.join(dir, "real"), path.join(root, "node", "chain", "artifacts.ts"))
      .split(path.sep)
      .join("/");
    assert.ok(code.includes(`new URL(${JSON.stringify(artifacts)}, import.meta.url)`), "import.meta.url of node/chain/artifacts.ts rewritten");
    const fromBundle = await run(node, [bundle, "attestor", "--help"], { cwd: root });
    const fromSources = await run(node, [path.join(root, "bin", "suanli.mjs"), "attestor", "--help"], {
      cwd: root,
      env: { ...process.env, SUANLI_FROM_SOURCE: "1" },
    });
    assert.equal(fromBundle.stdout, fromSources.stdout);
    assert.match(fromBundle.stdout, /stake/);
    // The packages are in the bundle too (but for native addons and tools): --version prints package.json's.
    const { version } = JSON.parse(await readFile(path.join(root, "package.json"), "utf8")) as { version: string };
    assert.equal((await run(node, [bundle, "--version"], { cwd: root })).stdout.trim(), version);
    assert.ok(!code.includes('from "viem"') && !code.includes('from "@libp2p/'), "viem and libp2p are bundled, not loaded from node_modules");
  });
});
