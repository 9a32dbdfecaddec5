import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { readFile } from "node:fs/promises";
import path from "node:path";
import type { BundleServer } from "../support/bundles.js";
import { lastJson, runCli, startCli } from "../support/cli.js";
import { freePort } from "../support/ports.js";
import { startMarket, type Market } from "../support/renter-market.js";

/** A command line run by bash in the repository root, as a user pastes it. */
function runShell(line: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", line], { cwd: path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../.."), env: { ...process.env, SUANLI_KEY: "" } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe("suanli output, exec and forward (CLI)", function () {
  this.timeout(180_000);
  let market: Market;
  let bundles: BundleServer;
  let work: string;
  let base: string[];

  before(async () => {
    market = await startMarket({ name: "io-cli", apiNode: true });
    ({ bundles, work } = market);
    const { devnet, provider } = market;
    base = ["--rpc-url", devnet.rpcUrl, "--deployments", devnet.deploymentsDir, "--bootstrap", provider.peer.addr, "--state-dir", work, "--devnet-account", "5"];
  });
  after(async () => {
    await market?.close();
  });

  it("submit --wait --out downloads and verifies the output; `output` downloads it again", async () => {
    const bundle = await bundles.bundle({ "run.sh": 'mkdir -p "$SUANLI_OUTPUT_DIR" && echo 42 > "$SUANLI_OUTPUT_DIR/answer.txt"' });
    const out = path.join(work, "out");
    const submitted = await runCli([
      "submit",
      "--gpu",
      "A100",
      "--duration",
      "60",
      "--max-price",
      "1",
      "--allow-unattested",
      "--bundle",
      bundle.url,
      "--sha256",
      bundle.sha256,
      "--wait",
      "--out",
      out,
      "--json",
      ...base,
      "--",
      "sh run.sh",
    ]);
    assert.equal(submitted.code, 0, submitted.stderr);
    const result = lastJson<{ type: string; verified: boolean; files: { path: string }[]; digest: string }>(submitted.stdout);
    assert.equal(result.type, "output");
    assert.equal(result.verified, true);
    assert.deepEqual(
      result.files.map((file) => file.path),
      ["answer.txt"],
    );
    assert.equal(await readFile(path.join(out, "answer.txt"), "utf8"), "42\n");
    const receipt = submitted.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type?: string; taskId?: string; completion?: { outputDigest: string } })
      .find((line) => line.type === "receipt")!;
    assert.equal(result.digest, receipt.completion!.outputDigest);

    const again = await runCli(["output", receipt.taskId!, "--out", path.join(work, "again"), "--json", ...base]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(lastJson<{ verified: boolean }>(again.stdout).verified, true);

    // The same reads through the API node's HTTP API (--node-url): no libp2p join, the same answers (issue 39).
    const viaNode = base.map((word, i) => (base[i - 1] === "--bootstrap" ? market.apiNode!.api!.url : word === "--bootstrap" ? "--node-url" : word));
    // `offers` takes no wallet.
    const noWallet = (words: string[]) => words.filter((word, i) => word !== "--devnet-account" && words[i - 1] !== "--devnet-account");
    for (const read of [["tasks"], ["status", receipt.taskId!], ["offers", "--gpu", "A100"]]) {
      const flags = (words: string[]) => (read[0] === "offers" ? noWallet(words) : words);
      const [p2p, http] = await Promise.all([runCli([...read, "--json", ...flags(base)]), runCli([...read, "--json", ...flags(viaNode)])]);
      assert.equal(p2p.code, 0, `${read.join(" ")} --bootstrap: ${p2p.stderr}`);
      assert.equal(http.code, 0, `${read.join(" ")} --node-url: ${http.stderr}`);
      const strip = (text: string) =>
        JSON.stringify(lastJson(text), (key, value: unknown) => (["heartbeatAt", "receivedAt", "ageSeconds", "expiresInSeconds"].includes(key) ? undefined : value));
      assert.equal(strip(http.stdout), strip(p2p.stdout), `${read.join(" ")}: the same answer through the node's API as through libp2p`);
    }
    const logs = await runCli(["logs", receipt.taskId!, ...viaNode]);
    assert.equal(logs.code, 0, logs.stderr);
    const notHttp = await runCli(["tasks", ...viaNode, "--node-url", "127.0.0.1:8080"]);
    assert.equal(notHttp.code, 2);
    assert.match(notHttp.stderr, /--node-url must be a node's HTTP API URL like http:\/\/127\.0\.0\.1:8080, got "127\.0\.0\.1:8080"/);
  });

  it("exec runs a command in the running task with its exit code; forward serves the task's port until stopped", async () => {
    const port = await freePort();
    const bundle = await bundles.bundle({
      "server.js": [
        'require("node:fs").mkdirSync(process.env.SUANLI_OUTPUT_DIR, { recursive: true });',
        'require("node:fs").writeFileSync(process.env.SUANLI_OUTPUT_DIR + "/partial.txt", "so far\\n");',
        `require("node:http").createServer((q, s) => s.end("cli page")).listen(${port}, "127.0.0.1", () => console.log("up"));`,
      ].join("\n"),
    });
    const submitted = await runCli([
      "submit",
      "--gpu",
      "A100",
      "--duration",
      "120",
      "--max-price",
      "1",
      "--allow-unattested",
      "--port",
      String(port),
      "--bundle",
      bundle.url,
      "--sha256",
      bundle.sha256,
      ...base,
      "--",
      process.execPath,
      "server.js",
    ]);
    assert.equal(submitted.code, 0, submitted.stderr);
    const taskId = /^Task (\S+) submitted/m.exec(submitted.stdout)![1]!;
    // The hints name `npx suanli` and the flags this command was given (issue #40 item 5).
    const waitHint = /^ {7}or: (npx suanli wait .*)$/m.exec(submitted.stdout)?.[1];
    assert.ok(waitHint, submitted.stdout);
    assert.match(
      submitted.stdout,
      new RegExp(`^Follow it: npx suanli logs ${taskId} --follow --rpc-url \\S+ --deployments \\S+ --bootstrap \\S+ --state-dir \\S+ --devnet-account 5$`, "m"),
    );

    let listed = await runCli(["exec", taskId, ...base, "--", "ls"]);
    for (let tries = 0; tries < 20 && listed.code !== 0; tries++) {
      // The task may still be preparing: exec needs it running.
      assert.match(listed.stderr, /TaskNotRunningError|not running/);
      await new Promise((resolve) => setTimeout(resolve, 500));
      listed = await runCli(["exec", taskId, ...base, "--", "ls"]);
    }
    assert.equal(listed.code, 0, listed.stderr);
    assert.equal(listed.stdout.trim(), "output\nserver.js");
    const failing = await runCli(["exec", taskId, ...base, "--", "exit 7"]);
    assert.equal(failing.code, 7, "the CLI exits with the command's exit code");

    // The server may take a moment after the task starts: forward refuses until it listens.
    let forward = startCli(["forward", taskId, `0:${port}`, "--json", ...base]);
    let ready: Record<string, unknown> | undefined;
    for (let tries = 0; tries < 20 && !ready; tries++) {
      ready = await forward.ready.catch(() => undefined);
      if (!ready) {
        assert.match(forward.stderr(), /TaskPortClosedError|Nothing in the task listens/);
        await new Promise((resolve) => setTimeout(resolve, 500));
        forward = startCli(["forward", taskId, `0:${port}`, "--json", ...base]);
      }
    }
    try {
      assert.ok(ready, forward.stderr());
      const page = await fetch(`http://127.0.0.1:${ready.localPort as number}/`).then((r) => r.text());
      assert.equal(page, "cli page");
    } finally {
      assert.equal(await forward.stop("SIGINT"), 0, forward.stderr());
    }

    // A snapshot of the running task is labelled unverified; after the cancel the same command verifies.
    const snapshot = await runCli(["output", taskId, "--out", path.join(work, "snapshot"), ...base]);
    assert.equal(snapshot.code, 0, snapshot.stderr);
    assert.match(snapshot.stdout, /digest 0x[0-9a-f]{64}: UNVERIFIED: a snapshot of a running task/);
    assert.equal(await readFile(path.join(work, "snapshot", "partial.txt"), "utf8"), "so far\n");
    assert.equal((await runCli(["cancel", taskId, "--json", ...base])).code, 0);
    const final = await runCli(["output", taskId, "--out", path.join(work, "final"), ...base]);
    assert.equal(final.code, 0, final.stderr);
    // Verified either way: the renter's close usually lands first (no report on-chain), but the provider's
    // `complete` of the stopped task may win that race, and then the chain holds the report.
    assert.match(
      final.stdout,
      /digest 0x[0-9a-f]{64}: verified against (the provider's signed completion report \(the lease ended without one on-chain\)|the chain's completion report \(and the provider's signed one\))/,
    );
    // `wait` on a task its renter cancelled: the receipt, exit 0 (issue #40 item 13), not "the task
    // ended stopped"; run exactly as submit printed it, through npx and a shell (item 5).
    const waited = await runShell(waitHint);
    assert.equal(waited.code, 0, waited.stderr);
    assert.match(waited.stdout, /Receipt for .*: stopped/);
    assert.match(waited.stderr, /was cancelled by you/);
  });
});
