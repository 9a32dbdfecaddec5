/**
 * The renter's forward and exec through the whole stack (SDK, libp2p, provider agent) into a task
 * that runs under bubblewrap with its own user+network namespace (network on, through pasta):
 * exec sees the task's files and its loopback server, and forward reaches that server although
 * it is not a host port (docs/provider.md, "Task I/O").
 */
import assert from "node:assert/strict";
import path from "node:path";
import type { SuanliClient } from "../../sdk/index.js";
import type { BundleServer } from "../support/bundles.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

const PORT = 8000;
const SERVER_JS = `
const http = require("node:http");
http.createServer((req, res) => res.end("sandboxed " + process.env.SUANLI_TASK_ID + " path " + req.url))
  .listen(${PORT}, "127.0.0.1", () => console.log("listening on ${PORT}"));
`;

describe("task ports and exec into a bubblewrap-sandboxed task with its own network", function () {
  this.timeout(120_000);
  let bundles: BundleServer;
  let client: SuanliClient;
  let market: RenterMarket;
  let taskId: string;

  before(async () => {
    market = await startRenterMarket({
      name: "io-sandboxed",
      provider: { provider: { runtime: { sandbox: "bubblewrap", network: true, readOnlyPaths: [path.dirname(process.execPath)] } } },
    });
    ({ bundles, client } = market);
    const bundle = await bundles.bundle({ "server.js": SERVER_JS, "notes.txt": "workspace file\n" });
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: [process.execPath, "server.js"],
      ports: [PORT],
    });
    taskId = submitted.taskId;
    await waitFor(
      "the task's server listening",
      async () => {
        for await (const line of client.logs(taskId, { follow: false })) if (line.text.includes(`listening on ${PORT}`)) return true;
        return false;
      },
      { timeoutMs: 30_000 },
    );
  });
  after(async () => {
    await market?.close();
  });

  it("exec runs ls in the task's workspace and reaches the task's own loopback server", async () => {
    const listed = await client.exec(taskId, "ls");
    assert.equal(listed.exitCode, 0, listed.stderr);
    assert.deepEqual(listed.stdout.trim().split("\n").sort(), ["notes.txt", "server.js"]);
    const status = await client.status(taskId);
    const script = `fetch("http://127.0.0.1:${PORT}/from-exec").then(async (r) => console.log(await r.text()))`;
    const inside = await client.exec(taskId, [process.execPath, "-e", script]);
    assert.equal(inside.exitCode, 0, inside.stderr);
    assert.equal(inside.stdout.trim(), `sandboxed lease-${status.leaseId} path /from-exec`);
  });

  it("exec with a TTY runs on a terminal of the asked size inside the sandbox, and stays in the task's namespace", async () => {
    const keys = (async function* () {
      yield Buffer.from("[ -t 0 ] && echo tty-in; stty size; ls; exit 3\n");
    })();
    const result = await client.exec(taskId, "/bin/sh", { tty: { rows: 21, cols: 73 }, stdin: keys });
    assert.equal(result.exitCode, 3, result.stdout);
    assert.match(result.stdout, /tty-in/);
    assert.match(result.stdout, /\b21 73\b/);
    assert.match(result.stdout, /notes\.txt\s+server\.js/);
  });

  it("forwards a local port to the task's declared port inside its network namespace", async () => {
    const tunnel = await client.forward(taskId, { port: PORT });
    try {
      const status = await client.status(taskId);
      const pages = await Promise.all([1, 2].map(async (n) => (await fetch(`http://127.0.0.1:${tunnel.localPort}/${n}`, { headers: { connection: "close" } })).text()));
      assert.deepEqual(
        pages,
        [1, 2].map((n) => `sandboxed lease-${status.leaseId} path /${n}`),
      );
    } finally {
      await tunnel.close();
    }
  });
});
