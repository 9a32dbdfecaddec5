/**
 * Issue #22, item 1, on the client side: the task file is bound to its deployment, and a
 * completion is "verified" only when it matches the lease's on-chain CompletionReported event.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Hex } from "viem";
import { signCompletion } from "../../common/attest/completion.js";
import type { DeploymentBinding } from "../../common/deployment.js";
import { devnetAccount } from "../../common/devnet.js";
import { suanliDomain } from "../../common/eip712.js";
import { checkCompletion } from "../../sdk/internal/receipt.js";
import type { SuanliContext } from "../../sdk/internal/context.js";
import { fileTaskStorage } from "../../sdk/internal/file-storage.js";
import { TaskStore, type TaskRecord } from "../../sdk/internal/store.js";
import type { TaskAttempt } from "../../sdk/types.js";

const MARKET = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const OLD: DeploymentBinding = { chainId: 31337, market: MARKET, deploymentBlock: 1n, deploymentBlockHash: `0x${"aa".repeat(32)}` };
const NEW: DeploymentBinding = { ...OLD, deploymentBlockHash: `0x${"bb".repeat(32)}` };

function task(taskId: string): TaskRecord {
  return {
    taskId,
    createdAt: 1,
    request: { gpuType: "A100" },
    spec: { command: ["true"], env: {} } as unknown as TaskRecord["spec"],
    autoMigrate: false,
    attempts: [],
  };
}

describe("SDK stores and receipts are bound to the deployment (issue #22)", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-sdk-binding-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("a task file written for one deployment is refused on another, with both named and the fix", async () => {
    const file = path.join(dir, "tasks.json");
    await new TaskStore(fileTaskStorage(file, OLD)).put(task("t-old"));
    assert.deepEqual(
      (await new TaskStore(fileTaskStorage(file, OLD)).list()).map((t) => t.taskId),
      ["t-old"],
    );
    await assert.rejects(new TaskStore(fileTaskStorage(file, NEW)).list(), (error: Error & { metaMessages?: string[] }) => {
      assert.equal(error.name, "TaskStoreMismatchError");
      assert.ok(error.metaMessages?.some((line) => line.includes(OLD.deploymentBlockHash)));
      assert.ok(error.metaMessages?.some((line) => line.includes(NEW.deploymentBlockHash)));
      assert.ok(error.metaMessages?.some((line) => line.includes(file)));
      return true;
    });
    // The refused file is left as it was.
    assert.match(await readFile(file, "utf8"), /t-old/);
  });

  it("a task file of an older version (no deployment recorded) is refused rather than adopted", async () => {
    const file = path.join(dir, "legacy.json");
    await writeFile(file, JSON.stringify([task("t-legacy")]));
    await assert.rejects(new TaskStore(fileTaskStorage(file, NEW)).list(), { name: "TaskStoreMismatchError" });
  });

  it("a signed completion is verified only when the lease's CompletionReported event matches it", async () => {
    const provider = devnetAccount(1);
    const domain = suanliDomain(31337, MARKET);
    const ctx = { domain } as SuanliContext;
    const attempt = { leaseId: 2n, provider: provider.address } as TaskAttempt;
    const outputDigest: Hex = `0x${"cd".repeat(32)}`;
    const signed = await signCompletion(provider, domain, { leaseId: 2n, exitCode: 0, outputDigest, unitSeconds: 60n });

    // A validly signed report with no on-chain copy (an earlier chain's lease 2): not verified.
    assert.equal(await checkCompletion(ctx, attempt, signed, null), false);
    // The on-chain event says something else: not verified.
    assert.equal(await checkCompletion(ctx, attempt, signed, { exitCode: 0, outputDigest: `0x${"ef".repeat(32)}`, unitSeconds: 60n }), false);
    // The on-chain event matches: verified.
    assert.equal(await checkCompletion(ctx, attempt, signed, { exitCode: 0, outputDigest, unitSeconds: 60n }), true);
    // Another lease's report never verifies this one.
    assert.equal(await checkCompletion(ctx, { ...attempt, leaseId: 3n }, signed, { exitCode: 0, outputDigest, unitSeconds: 60n }), false);
  });
});
