/**
 * The browser fallback of test/support/chromium.ts: on a machine without Debian's chromium the
 * browser tests run the Chromium shipped inside the @sparticuz/chromium npm package. This test
 * always uses that one (whatever is installed), so CI proves the fallback a fresh machine takes.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { launchChromium, packagedChromium } from "../support/chromium.js";

const PAGE = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>fallback</title></head>
<body><main><h1 id="title">waiting</h1></main>
<script>fetch("/data").then((r) => r.json()).then((d) => { document.getElementById("title").textContent = "got " + d.n; });</script>
</body></html>`;

describe("Chromium from the npm package (fallback when Debian's is not installed)", function () {
  this.timeout(120_000);
  let server: Server;
  let base: string;

  before(async () => {
    server = createServer((request, response) => {
      if (request.url === "/data") response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ n: 42 }));
      else response.writeHead(200, { "content-type": "text/html" }).end(PAGE);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((resolve) => server?.close(resolve));
  });

  it("unpacks, launches and renders a page that runs script and fetches from 127.0.0.1", async () => {
    const binary = await packagedChromium();
    assert.equal(binary.source, "npm");
    const browser = await launchChromium(binary);
    try {
      const page = browser.context.pages()[0] ?? (await browser.context.newPage());
      await page.goto(`${base}/`);
      await page.waitForFunction(() => document.getElementById("title")?.textContent === "got 42", undefined, { timeout: 15_000 });
      const png = await page.screenshot();
      assert.ok(png.length > 1000 && png.subarray(1, 4).toString() === "PNG", "a PNG screenshot");
      assert.match(browser.context.browser()?.version() ?? (await page.evaluate(() => navigator.userAgent)), /\d+\.\d+/);
    } finally {
      await browser.close();
    }
  });
});
