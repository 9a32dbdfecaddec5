/**
 * Task bundles: .tar.gz files built from a map of paths to contents and served over HTTP on
 * 127.0.0.1 with their sha256. The demo serves its jobs this way; provider tests use it too.
 */
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import * as tar from "tar";

export type ServedBundle = { url: string; sha256: string };

export type BundleServer = {
  baseUrl: string;
  /** Builds a bundle whose files are `files` (executable when the path ends in .sh) and serves it. */
  bundle(files: Record<string, string>): Promise<ServedBundle>;
  close(): Promise<void>;
};

export async function startBundleServer(): Promise<BundleServer> {
  const dir = await mkdtemp(path.join(tmpdir(), "suanli-bundles-"));
  const served = new Map<string, Buffer>();
  const server: Server = createServer((req, res) => {
    const body = served.get(req.url ?? "");
    if (!body) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": "application/gzip", "content-length": body.length }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let counter = 0;
  return {
    baseUrl,
    async bundle(files) {
      const name = `bundle-${++counter}`;
      const staging = path.join(dir, name);
      await mkdir(staging, { recursive: true });
      for (const [rel, content] of Object.entries(files)) {
        await mkdir(path.dirname(path.join(staging, rel)), { recursive: true });
        await writeFile(path.join(staging, rel), content, { mode: rel.endsWith(".sh") ? 0o755 : 0o644 });
      }
      const file = path.join(dir, `${name}.tar.gz`);
      await tar.c({ gzip: true, file, cwd: staging, portable: true }, Object.keys(files));
      const bytes = await readFile(file);
      served.set(`/${name}.tar.gz`, bytes);
      return { url: `${baseUrl}/${name}.tar.gz`, sha256: createHash("sha256").update(bytes).digest("hex") };
    },
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
