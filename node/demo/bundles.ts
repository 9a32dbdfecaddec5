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
import { httpServerOptions, limitConnections, type ConnectionLimits } from "../http/limits.js";

export type ServedBundle = { url: string; sha256: string };

export type BundleServer = {
  baseUrl: string;
  /** Builds a bundle whose files are `files` (executable when the path ends in .sh) and serves it. */
  bundle(files: Record<string, string>): Promise<ServedBundle>;
  close(): Promise<void>;
};

/**
 * How long and how many connections the bundle server holds (node/http/limits.ts, issue #33 item
 * 11): the same bounds as the node's own HTTP servers, so a slow-loris client cannot hold it.
 */
export const BUNDLE_SERVER_LIMITS: ConnectionLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  keepAliveTimeoutMs: 5_000,
  idleTimeoutMs: 60_000,
  maxPerAddress: 64,
  maxTotal: 256,
  maxRequestsPerSocket: 0,
};

export async function startBundleServer(options: { limits?: ConnectionLimits } = {}): Promise<BundleServer> {
  const limits = options.limits ?? BUNDLE_SERVER_LIMITS;
  const dir = await mkdtemp(path.join(tmpdir(), "suanli-bundles-"));
  const served = new Map<string, Buffer>();
  const server: Server = createServer(httpServerOptions(limits), (req, res) => {
    const body = served.get(req.url ?? "");
    if (!body) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": "application/gzip", "content-length": body.length }).end(body);
  });
  limitConnections(server, limits, { perAddress: true });
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
