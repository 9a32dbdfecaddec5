/**
 * docs/api.md's TypeScript examples as a reader would use them: every ```ts block is extracted as
 * written (only its "./" imports are pointed back at the repository), type-checked with `tsc
 * --strict`, and the dApp examples (`reserve`, `leaseStatus`) are run against a devnet: a real
 * provider node, and a second node serving the HTTP API that relays to it over libp2p.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { createWalletClient, http, type Address, type TypedDataDomain, type WalletClient } from "viem";
import { suanliDomain } from "../common/eip712.js";
import { startTestDaemon } from "./support/daemons.js";
import { startDevnet, type Devnet } from "./support/devnet.js";
import { startTestProvider, type TestProvider } from "./support/provider.js";
import { TestRenter } from "./support/renter.js";
import { waitFor } from "./support/wait.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);

type Block = { line: number; code: string; functions: string[] };

/** The ```ts blocks of a Markdown file, with the line each starts on and the functions it exports. */
function typescriptBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== "```ts") continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && lines[end]!.trim() !== "```") end++;
    assert.ok(end < lines.length, `docs/api.md:${start}: unclosed code block`);
    const code = lines.slice(start, end).join("\n");
    blocks.push({ line: start, code, functions: [...code.matchAll(/^export async function (\w+)/gm)].map((match) => match[1]!) });
    i = end;
  }
  return blocks;
}

type Reserve = (node: string, wallet: WalletClient, renter: Address, provider: Address, machineId: number, units: number) => Promise<{ accepted: boolean; reason?: string }>;
type LeaseStatus = (
  node: string,
  wallet: WalletClient,
  renter: Address,
  domain: TypedDataDomain,
  leaseId: bigint,
  provider: Address,
) => Promise<{ state: string; leaseId: bigint }>;

describe("docs/api.md code examples", function () {
  this.timeout(180_000);
  let blocks: Block[];
  let dir: string;
  const files: string[] = [];

  before(async () => {
    blocks = typescriptBlocks(await readFile(path.join(root, "docs/api.md"), "utf8"));
    // Inside the repository (git-ignored) so that "viem", "zod"... resolve from its node_modules as in a reader's project.
    dir = await mkdtemp(path.join(root, ".docs-check-"));
    const back = path.relative(dir, root).split(path.sep).join("/");
    for (const [index, block] of blocks.entries()) {
      const file = path.join(dir, `block-${index}-line-${block.line}.ts`);
      // A block with no export is a script; `export {}` makes it a module (its top-level await is legal).
      const code = block.code.replace(/from "\.\//g, `from "${back}/`) + (block.functions.length === 0 ? "\nexport {};\n" : "\n");
      await writeFile(file, code);
      files.push(file);
    }
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("has the examples this test runs", () => {
    assert.ok(blocks.length >= 3, `${blocks.length} blocks`);
    const exported = blocks.flatMap((block) => block.functions);
    assert.ok(exported.includes("reserve"), "the reservation example");
    assert.ok(exported.includes("leaseStatus"), "the signed lease request example");
    for (const block of blocks) assert.doesNotMatch(block.code, /signRenterRequest/, `docs/api.md:${block.line} imports an internal function`);
  });

  it("every TypeScript block type-checks as written (tsc --strict)", async () => {
    const tsc = require.resolve("typescript/bin/tsc");
    const args = [
      tsc,
      "--noEmit",
      "--strict",
      "--target",
      "ES2023",
      "--lib",
      "ES2023,DOM,DOM.Iterable",
      "--module",
      "NodeNext",
      "--moduleResolution",
      "NodeNext",
      "--skipLibCheck",
      "--types",
      "node",
      ...files,
    ];
    const result = await promisify(execFile)(process.execPath, args, { cwd: root, maxBuffer: 8 * 1024 * 1024 }).then(
      () => ({ ok: true, output: "" }),
      (error: { stdout?: string; stderr?: string }) => ({ ok: false, output: `${error.stdout ?? ""}${error.stderr ?? ""}` }),
    );
    // Name the Markdown line of each error, not the temporary file.
    const readable = result.output.replace(/[^\s]*block-\d+-line-(\d+)\.ts\((\d+),(\d+)\)/g, (_, start: string, line: string) => `docs/api.md:${Number(start) + Number(line)}`);
    assert.ok(result.ok, readable);
  });

  describe("run against a devnet", () => {
    let devnet: Devnet;
    let provider: TestProvider;
    let node: Awaited<ReturnType<typeof startTestDaemon>>;
    let renter: TestRenter;

    before(async () => {
      devnet = await startDevnet();
      provider = await startTestProvider(devnet, 1);
      node = await startTestDaemon(devnet, { p2p: { bootstrap: [provider.peer.addr] }, api: { enabled: true, port: 0 } });
      await waitFor("the provider's offer in the API node's book", () => node.offers.book.size > 0 || undefined, { timeoutMs: 30_000 });
      renter = await TestRenter.start(devnet, 4);
    });
    after(async () => {
      await renter?.close();
      await node?.close();
      await provider?.close();
      await devnet?.close();
    });

    /** A wallet as a browser dApp has one: a viem WalletClient whose account lives behind the RPC (eth_signTypedData_v4). */
    const browserLikeWallet = () => createWalletClient({ transport: http(devnet.rpcUrl) });

    it("reserve(): the renter's signed reservation is relayed to the provider and accepted", async () => {
      const { reserve } = (await import(pathToFileURL(files[blocks.findIndex((block) => block.functions.includes("reserve"))]!).href)) as { reserve: Reserve };
      const machineId = provider.agent.machines[0]!.machineId;
      const answer = await reserve(node.api!.url, browserLikeWallet(), renter.address, provider.peer.address, machineId, 1);
      assert.equal(
        answer.accepted,
        true,
        JSON.stringify(answer, (_, value) => (typeof value === "bigint" ? value.toString() : value)),
      );
    });

    it("leaseStatus(): a signed status request for the renter's lease comes back from the provider", async () => {
      const { leaseStatus } = (await import(pathToFileURL(files[blocks.findIndex((block) => block.functions.includes("leaseStatus"))]!).href)) as { leaseStatus: LeaseStatus };
      const machineId = provider.agent.machines[0]!.machineId;
      const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 120 });
      const domain = suanliDomain(devnet.deployment.chainId, devnet.deployment.contracts.market!);
      const status = await leaseStatus(node.api!.url, browserLikeWallet(), renter.address, domain, leaseId, provider.peer.address);
      assert.equal(status.leaseId, leaseId);
      assert.match(status.state, /^(waiting_spec|preparing|running)$/);
    });
  });
});
