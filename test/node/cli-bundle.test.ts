import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { buildCli } from "../../scripts/build-cli.js";
import { listTemplates } from "../../sdk/actions/templates.js";

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

  // The real bundle, built once into a scratch folder (the repository's own build/cli may be in use by other tests).
  let realDir: string;
  let real: ReturnType<typeof buildCli> | undefined;
  before(async () => {
    realDir = await mkdtemp(path.join(tmpdir(), "suanli-cli-build-"));
    // The packages left outside the bundle (scripts/build-cli.ts EXTERNAL) resolve from here.
    await symlink(path.join(root, "node_modules"), path.join(realDir, "node_modules"));
  });
  after(async () => rm(realDir, { recursive: true, force: true }));
  const built = () => (real ??= buildCli(realDir));

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
    const { bundle, inputs } = await built();
    assert.ok(inputs > 100, `the bundle holds the CLI's sources (${inputs})`);
    // The entry and its chunks (code-split: scripts/build-cli.ts), all in the one folder.
    const files = (await readdir(realDir)).filter((name) => name.endsWith(".mjs"));
    assert.ok(files.length > 1 && files.every((name) => name === "suanli.mjs" || name.startsWith("chunk-")), files.join(" "));
    const code = (await Promise.all(files.map((name) => readFile(path.join(realDir, name), "utf8")))).join("\n");
    // node/chain/artifacts.ts finds artifacts/ from its own URL: rewritten to that file's URL.
    const artifacts = path
      .relative(realDir, path.join(root, "node", "chain", "artifacts.ts"))
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
    // A command whose module is a chunk of its own runs from the bundle too.
    const listed = (await run(node, [bundle, "templates"], { cwd: root })).stdout;
    for (const template of listTemplates()) assert.ok(listed.includes(template.name), `templates lists ${template.name}`);
  });

  it("`suanli wallet` and `suanli templates` evaluate neither libp2p nor Helia nor the node; `node start` does (the chunks each command loads)", async () => {
    const { metafile } = await built();
    const outputs = metafile.outputs;
    // The output file holding a module, and every output it imports statically (what evaluating it evaluates).
    const outputOf = (source: string) => {
      const found = Object.entries(outputs).find(([, output]) => output.entryPoint === source);
      assert.ok(found, `a chunk starts at ${source}`);
      return found[0];
    };
    const loaded = (start: string) => {
      const seen = new Set<string>([start]);
      for (const file of seen) for (const imported of outputs[file]!.imports) if (imported.kind === "import-statement" && !imported.external) seen.add(imported.path);
      return [...seen].flatMap((file) => Object.keys(outputs[file]!.inputs));
    };
    const heavy = (inputs: string[]) => inputs.filter((input) => /node_modules\/(libp2p|@libp2p|helia|@helia)\/|^node\/daemon\//.test(input));
    const entry = loaded(outputOf("node/cli/main.ts"));
    assert.deepEqual(heavy(entry), [], "the entry evaluates none of them");
    for (const command of ["wallet", "templates"]) {
      assert.deepEqual(heavy(loaded(outputOf(`node/cli/commands/${command}.ts`))), [], `suanli ${command}`);
    }
    assert.ok(heavy(loaded(outputOf("node/cli/commands/node.ts"))).length > 0, "suanli node start needs the node");
  });
});
