import assert from "node:assert/strict";
import { copyFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { devnetAccount } from "../../common/devnet.js";
import { createClient, type SuanliClient } from "../../sdk/index.js";
import type { BundleServer } from "../support/bundles.js";
import type { Devnet } from "../support/devnet.js";
import { freePort } from "../support/ports.js";
import type { TestProvider } from "../support/provider.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

const SERVER_JS = `
const http = require("node:http");
const port = Number(process.argv[2]);
http.createServer((req, res) => {
  res.writeHead(200, { "content-type": "text/plain" });
  res.end("hello from task " + process.env.SUANLI_TASK_ID + " path " + req.url);
}).listen(port, "127.0.0.1", () => console.log("listening on " + port));
`;

describe("task ports and exec: the renter reaches a declared port and runs commands in its running task", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let client: SuanliClient;
  let other: SuanliClient | undefined;
  let hostService: Server;
  let work: string;
  let market: RenterMarket;
  let taskId: string;
  let taskPort: number;
  let hostPort: number;

  before(async () => {
    market = await startRenterMarket({ name: "io" });
    ({ work, devnet, bundles, provider, client } = market);
    // A service of the provider's host, not of the task: it must stay unreachable.
    hostService = createServer((_req, res) => res.end("host secret"));
    await new Promise<void>((resolve) => hostService.listen(0, "127.0.0.1", resolve));
    hostPort = (hostService.address() as AddressInfo).port;

    taskPort = await freePort();
    const bundle = await bundles.bundle({ "server.js": SERVER_JS, "notes.txt": "workspace file\n" });
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: [process.execPath, "server.js", String(taskPort)],
      ports: [taskPort, hostPort],
    });
    taskId = submitted.taskId;
    await waitFor(
      "the task's server listening",
      async () => {
        for await (const line of client.logs(taskId, { follow: false })) if (line.text.includes(`listening on ${taskPort}`)) return true;
        return false;
      },
      { timeoutMs: 30_000 },
    );
  });
  after(async () => {
    await other?.close();
    await market?.close();
    if (hostService) await new Promise((resolve) => hostService.close(resolve));
  });

  it("forwards a local port to the task's declared port: a page served in the task comes back", async () => {
    const tunnel = await client.forward(taskId, { port: taskPort });
    try {
      const response = await fetch(`http://127.0.0.1:${tunnel.localPort}/index.html`);
      assert.equal(response.status, 200);
      const status = await client.status(taskId);
      assert.equal(await response.text(), `hello from task lease-${status.leaseId} path /index.html`);
      // Several requests, several connections.
      const pages = await Promise.all([1, 2, 3].map(async (n) => (await fetch(`http://127.0.0.1:${tunnel.localPort}/${n}`, { headers: { connection: "close" } })).text()));
      assert.deepEqual(
        pages.map((page) => page.split(" path ")[1]),
        ["/1", "/2", "/3"],
      );
    } finally {
      await tunnel.close();
    }
  });

  it("refuses a port the task did not declare", async () => {
    await assert.rejects(client.forward(taskId, { port: taskPort + 1 === hostPort ? taskPort + 2 : taskPort + 1 }), { name: "PortNotDeclaredError" });
  });

  it("refuses a declared port where only the host listens, not the task", async () => {
    await assert.rejects(client.forward(taskId, { port: hostPort }), { name: "TaskPortClosedError" });
  });

  it("runs ls in the running task's workspace, streaming its output and returning the exit code", async () => {
    const chunks: string[] = [];
    const listed = await client.exec(taskId, "ls", { onOutput: (_stream, chunk) => chunks.push(Buffer.from(chunk).toString("utf8")) });
    assert.equal(listed.exitCode, 0);
    assert.deepEqual(listed.stdout.trim().split("\n").sort(), ["notes.txt", "server.js"]);
    assert.equal(chunks.join(""), listed.stdout);

    const failed = await client.exec(taskId, ["/bin/sh", "-c", 'echo "$SUANLI_TASK_ID" >&2; cat; exit 3'], { stdin: "typed input\n" });
    assert.equal(failed.exitCode, 3);
    assert.equal(failed.stdout, "typed input\n");
    assert.match(failed.stderr, /^lease-\d+\n$/, "the command sees the task's environment");
  });

  it("refuses another wallet for forward and exec", async () => {
    await copyFile(path.join(work, "renter.json"), path.join(work, "other.json"));
    other = await createClient({
      rpcUrl: devnet.rpcUrl,
      account: devnetAccount(6),
      bootstrap: [provider.peer.addr],
      deployment: devnet.deploymentsDir,
      stateFile: path.join(work, "other.json"),
    });
    await assert.rejects(other.forward(taskId, { port: taskPort }), { name: "RenterAuthError" });
    await assert.rejects(other.exec(taskId, "ls"), { name: "RenterAuthError" });
  });

  it("closes forwarded connections when the lease ends, and refuses new ones", async () => {
    const tunnel = await client.forward(taskId, { port: taskPort });
    try {
      assert.equal((await fetch(`http://127.0.0.1:${tunnel.localPort}/before`)).status, 200);
      await client.cancel(taskId);
      await assert.rejects(fetch(`http://127.0.0.1:${tunnel.localPort}/after`, { signal: AbortSignal.timeout(10_000) }));
      await assert.rejects(client.exec(taskId, "ls"), { name: "TaskNotRunningError" });
    } finally {
      await tunnel.close();
    }
  });
});
