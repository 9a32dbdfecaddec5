/**
 * The SDK as a dApp developer gets it: `npm pack` of the built package (scripts/build-sdk.ts),
 * installed into a fresh project outside the repository with nothing but the tarball, its
 * dependencies and what the consumer itself uses (viem, @types/node) from the npm registry
 * (`--prefer-offline`: npm's cache answers what the repository already installed). A strict
 * TypeScript consumer must type-check against the installed typings and run against a devnet
 * (match, submit, wait); a browser consumer must bundle with esbuild for the browser without any
 * Node built-in or libp2p's TCP transport.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import * as esbuild from "esbuild";
import { devnetPrivateKey } from "../../common/devnet.js";
import { buildSdkPackage, type SdkPackage } from "../../scripts/build-sdk.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { fund, startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";

const require = createRequire(import.meta.url);
const run = promisify(execFile);

const NODE_CONSUMER = `import { readFileSync } from "node:fs";
import { createClient, NoMatchError, type SuanliClient, type TaskReceipt } from "suanli/sdk";
import { offerPageSchema } from "suanli/api";
import { privateKeyToAccount } from "viem/accounts";

type Input = { rpcUrl: string; bootstrap: string; deployments: string; key: \`0x\${string}\`; bundleUrl: string; sha256: string };
const input = JSON.parse(readFileSync(process.argv[2], "utf8")) as Input;

const client: SuanliClient = await createClient({
  rpcUrl: input.rpcUrl,
  account: privateKeyToAccount(input.key),
  bootstrap: [input.bootstrap],
  deployment: input.deployments,
});
try {
  let offers = await client.queryOffers({ gpuType: "A100" });
  for (let i = 0; i < 100 && offers.length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    offers = await client.queryOffers({ gpuType: "A100" });
  }
  const request = { gpuType: "A100", gpuCount: 1, duration: 30, maxPricePerGpuHour: "1", attestedOnly: false };
  const matched = await client.match(request);
  if (!matched.ok) throw new Error(matched.explanation.message);
  let refusedBelowPrice = false;
  try {
    await client.submitTask({ ...request, maxPricePerGpuHour: "0.01", bundleUrl: input.bundleUrl, sha256: input.sha256, command: "true" });
  } catch (error) {
    if (!(error instanceof NoMatchError)) throw error;
    refusedBelowPrice = true;
  }
  const submitted = await client.submitTask({ ...request, bundleUrl: input.bundleUrl, sha256: input.sha256, command: "sh run.sh" });
  const lines: string[] = [];
  for await (const line of client.logs(submitted.taskId)) lines.push(line.text);
  const receipt: TaskReceipt = await client.wait(submitted.taskId);
  const empty = offerPageSchema.decode({ items: [], total: 0, limit: 10, offset: 0, nextOffset: null });
  console.log("RESULT " + JSON.stringify({
    offers: offers.length,
    candidates: matched.candidates.length,
    provider: submitted.provider,
    state: receipt.state,
    verified: receipt.completion?.verified ?? false,
    logs: lines,
    schemaItems: empty.items.length,
    refusedBelowPrice,
  }));
} finally {
  await client.close();
}
`;

const BROWSER_CONSUMER = `import { createClient, NoMatchError, type SuanliClient } from "suanli/sdk/browser";
import { offerViewSchema } from "suanli/api";
import { custom, type EIP1193Provider } from "viem";

declare global {
  interface Window { ethereum?: EIP1193Provider }
}

export async function connect(rpcUrl: string, nodeUrl: string, deployment: Record<string, unknown>): Promise<SuanliClient> {
  if (!window.ethereum) throw new Error("no wallet");
  const [address] = await window.ethereum.request({ method: "eth_requestAccounts" });
  return createClient({ rpcUrl, nodeUrl, account: address, walletTransport: custom(window.ethereum), deployment: deployment });
}
export const isNoMatch = (error: unknown) => error instanceof NoMatchError;
export const offerSchema = offerViewSchema;
`;

describe("SDK package: pack, install in a fresh project, type-check, run on a devnet, bundle for browsers", function () {
  this.timeout(600_000);
  let built: SdkPackage;
  let outDir: string;
  let project: string;

  before(async () => {
    outDir = await mkdtemp(path.join(tmpdir(), "suanli-sdk-build-"));
    built = await buildSdkPackage(outDir);
    project = await mkdtemp(path.join(tmpdir(), "suanli-consumer-"));
    await writeFile(path.join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    const rootPackage = JSON.parse(await readFile(path.join(process.cwd(), "package.json"), "utf8")) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    await run(
      "npm",
      [
        "install",
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        built.tarball,
        `viem@${rootPackage.dependencies.viem}`,
        `@types/node@${rootPackage.devDependencies["@types/node"]}`,
      ],
      { cwd: project, maxBuffer: 32 * 1024 * 1024, timeout: 480_000 },
    );
    await writeFile(path.join(project, "consumer.ts"), NODE_CONSUMER);
    await writeFile(path.join(project, "browser.ts"), BROWSER_CONSUMER);
  });
  after(async () => {
    if (project) await rm(project, { recursive: true, force: true });
    if (outDir) await rm(outDir, { recursive: true, force: true });
  });

  it("packs a versioned ESM package with typings, an exports map and its own README", async () => {
    const { stdout } = await run("tar", ["-tzf", built.tarball]);
    const files = stdout.split("\n").filter(Boolean);
    for (const file of [
      "package/package.json",
      "package/README.md",
      "package/dist/sdk/index.js",
      "package/dist/sdk/index.d.ts",
      "package/dist/sdk/browser.js",
      "package/dist/sdk/browser.d.ts",
      "package/dist/common/api/index.js",
    ]) {
      assert.ok(files.includes(file), `${file} missing from the tarball`);
    }
    assert.ok(!files.some((file) => file.endsWith(".ts") && !file.endsWith(".d.ts")), "no TypeScript sources");
    assert.ok(!files.some((file) => /\/(node|test|bench)\//.test(file.replace("package/dist/", "/"))), "nothing of the daemon, tests or benchmarks");
    const installed = JSON.parse(await readFile(path.join(project, "node_modules/suanli/package.json"), "utf8")) as {
      version: string;
      type: string;
      exports: Record<string, unknown>;
      dependencies: Record<string, string>;
    };
    assert.equal(installed.version, built.version);
    assert.equal(installed.type, "module");
    assert.deepEqual(Object.keys(installed.exports).sort(), ["./api", "./package.json", "./sdk", "./sdk/browser"]);
    assert.equal(installed.dependencies.viem, built.dependencies.viem);
  });

  it("carries the Apache-2.0 licence its package.json names, the repository's LICENSE file (issue #40 item 11)", async () => {
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
    const rootLicence = await readFile(path.join(root, "LICENSE"), "utf8");
    assert.match(rootLicence, /^\s*Apache License\s+Version 2\.0, January 2004/);
    assert.match(rootLicence, /END OF TERMS AND CONDITIONS/);
    const rootPackage = JSON.parse(await readFile(path.join(root, "package.json"), "utf8")) as { license: string };
    assert.equal(rootPackage.license, "Apache-2.0");
    const installed = JSON.parse(await readFile(path.join(project, "node_modules/suanli/package.json"), "utf8")) as { license: string };
    assert.equal(installed.license, "Apache-2.0");
    assert.equal(await readFile(path.join(project, "node_modules/suanli/LICENSE"), "utf8"), rootLicence, "the installed package holds the same LICENSE");
  });

  it("type-checks a strict TypeScript consumer against the installed typings (tsc --noEmit)", async () => {
    await writeFile(
      path.join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          target: "ES2023",
          lib: ["ES2023", "DOM"],
          module: "NodeNext",
          moduleResolution: "NodeNext",
          noEmit: true,
          types: ["node"],
          // As `tsc --init` writes it, and as most projects have it: the consumer's code is checked
          // against our typings (every call, type and import above), the typings' own bodies and
          // those of viem, zod and libp2p underneath are not re-checked (tsc checked ours when it
          // emitted them in scripts/build-sdk.ts). Checking every library's .d.ts here cost about
          // 16 CPU-s of the ~21 this tsc took (issue #39).
          skipLibCheck: true,
        },
        files: ["consumer.ts", "browser.ts"],
      }),
    );
    const result = await run(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", "tsconfig.json"], { cwd: project, maxBuffer: 16 * 1024 * 1024 }).then(
      () => "",
      (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}` || "tsc failed",
    );
    assert.equal(result, "");
  });

  describe("the Node consumer against a devnet", () => {
    let devnet: Devnet;
    let bundles: BundleServer;
    let provider: TestProvider;

    before(async () => {
      devnet = await startDevnet({ wallClockBlocks: true });
      bundles = await startBundleServer();
      provider = await startTestProvider(devnet, 1);
      await fund(devnet, await devnet.wallet(6), 50_000_000n);
    });
    after(async () => {
      await provider?.close();
      await bundles?.close();
      await devnet?.close();
    });

    it("matches, submits a task, streams its logs and gets the verified receipt", async () => {
      const bundle = await bundles.bundle({ "run.sh": "echo hello from the installed package" });
      const input = path.join(project, "input.json");
      await writeFile(
        input,
        JSON.stringify({
          rpcUrl: devnet.rpcUrl,
          bootstrap: provider.peer.addr,
          deployments: devnet.deploymentsDir,
          key: devnetPrivateKey(6),
          bundleUrl: bundle.url,
          sha256: bundle.sha256,
        }),
      );
      // Node 22 runs the TypeScript consumer as it is (type stripping): what the developer wrote, nothing compiled by us.
      const { stdout } = await run(process.execPath, ["consumer.ts", input], { cwd: project, timeout: 240_000, maxBuffer: 8 * 1024 * 1024 });
      const line = stdout.split("\n").find((text) => text.startsWith("RESULT "));
      assert.ok(line, stdout);
      const result = JSON.parse(line.slice("RESULT ".length)) as {
        offers: number;
        candidates: number;
        provider: string;
        state: string;
        verified: boolean;
        logs: string[];
        schemaItems: number;
        refusedBelowPrice: boolean;
      };
      assert.ok(result.offers >= 1 && result.candidates >= 1, line);
      assert.equal(result.refusedBelowPrice, true, "a price cap below every offer throws NoMatchError");
      assert.equal(result.provider, provider.peer.address);
      assert.equal(result.state, "succeeded");
      assert.equal(result.verified, true);
      assert.ok(
        result.logs.some((text) => text.includes("hello from the installed package")),
        line,
      );
    });
  });

  it("bundles the browser consumer with esbuild: no Node built-in, no libp2p TCP transport", async () => {
    const result = await esbuild.build({
      absWorkingDir: project,
      entryPoints: ["browser.ts"],
      bundle: true,
      platform: "browser",
      format: "esm",
      minify: true,
      write: false,
      metafile: true,
      logLevel: "silent",
    });
    const inputs = Object.keys(result.metafile.inputs);
    assert.deepEqual(
      inputs.filter((input) => input.startsWith("node:") || /node_modules\/(@libp2p\/tcp|libp2p|@chainsafe)\//.test(input)),
      [],
    );
    assert.ok(
      inputs.some((input) => input.includes("node_modules/suanli/dist/sdk/browser.js")),
      "the browser entry was bundled",
    );
    const bytes = result.outputFiles[0]!.contents.byteLength;
    const gzipped = (await import("node:zlib")).gzipSync(result.outputFiles[0]!.contents).byteLength;
    console.log(`      browser bundle: ${(bytes / 1024).toFixed(0)} KiB minified, ${(gzipped / 1024).toFixed(0)} KiB gzipped`);
    assert.ok(bytes > 10_000, "the SDK is in the bundle");
  });
});
