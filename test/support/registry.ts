/**
 * A real container registry on 127.0.0.1 for tests: Debian's docker-registry (the CNCF
 * Distribution registry) started with a generated config.yml, a free port and its storage in a
 * temp dir, stopped by its PID. Images built locally (container-images.ts) are pushed to it with
 * `podman push --tls-verify=false`, and saved as archives (docker-archive, oci-archive, gzipped or
 * not) served over HTTP on 127.0.0.1. Nothing is downloaded from outside.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { buildBusyboxImage } from "./container-images.js";
import { freePort } from "./ports.js";

const exec = promisify(execFile);

export type TestRegistry = {
  /** host:port, e.g. "127.0.0.1:41234". */
  host: string;
  pid: number;
  /** Pushes a local image as `<host>/<repository>`; resolves with the reference and its manifest digest. */
  push(localImage: string, repository: string): Promise<{ reference: string; digest: string }>;
  /** Stops the registry (SIGTERM to its PID, SIGKILL after 5 s) and removes its storage. */
  close(): Promise<void>;
};

export async function startRegistry(): Promise<TestRegistry> {
  const dir = await mkdtemp(path.join(tmpdir(), "suanli-registry-"));
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  const config = path.join(dir, "config.yml");
  await writeFile(
    config,
    [
      "version: 0.1",
      "log:",
      "  level: error",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${path.join(dir, "data")}`,
      "  delete:",
      "    enabled: true",
      "http:",
      `  addr: ${host}`,
      "",
    ].join("\n"),
  );
  const child: ChildProcess = spawn("docker-registry", ["serve", config], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const spawnError = new Promise<Error>((resolve) => child.once("error", resolve));
  // Ready when /v2/ answers; bounded.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const failed = await Promise.race([spawnError, sleep(100).then(() => undefined)]);
    if (failed) throw new Error(`docker-registry cannot start (apt-get install docker-registry; .ci/run installs it): ${failed.message}`);
    if (child.exitCode !== null) throw new Error(`docker-registry exited at start: ${stderr.trim()}`);
    const ok = await fetch(`http://${host}/v2/`).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`docker-registry did not answer on ${host} within 20 s: ${stderr.trim()}`);
    }
  }
  return {
    host,
    pid: child.pid!,
    async push(localImage, repository) {
      const reference = `${host}/${repository}`;
      const digestFile = path.join(dir, `digest-${Date.now()}-${Math.random().toString(16).slice(2)}`);
      await exec("podman", ["push", "--quiet", "--tls-verify=false", "--digestfile", digestFile, localImage, reference], { timeout: 120_000 });
      const digest = (await readFile(digestFile, "utf8")).trim();
      return { reference, digest };
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        process.kill(child.pid!, "SIGTERM");
        const killed = await Promise.race([exited.then(() => true), sleep(5_000).then(() => false)]);
        if (!killed) {
          process.kill(child.pid!, "SIGKILL");
          await exited;
        }
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Builds a local image from the busybox test image plus a file `/marker` holding `marker` (a
 * distinct image per marker), with `podman build` (COPY only: no container runs). Remove it with
 * removeImages().
 */
export async function buildMarkedImage(name: string, marker: string, extraBytes = 0): Promise<string> {
  const base = await buildBusyboxImage();
  const context = await mkdtemp(path.join(tmpdir(), "suanli-image-ctx-"));
  try {
    await writeFile(path.join(context, "marker"), `${marker}\n`);
    // Incompressible filler, for images of a known size (cache pruning tests).
    await writeFile(path.join(context, "filler"), Buffer.from(Array.from({ length: extraBytes }, (_, i) => (i * 7919 + marker.length * 31) % 251)));
    await writeFile(path.join(context, "Containerfile"), `FROM ${base}\nCOPY marker /marker\nCOPY filler /filler\n`);
    await exec("podman", ["build", "--quiet", "--pull=never", "--runtime", "runc", "--tag", name, context], { timeout: 120_000 });
    return name;
  } finally {
    await rm(context, { recursive: true, force: true });
  }
}

/** The engine's image id of a name, or undefined when there is no such image. */
export async function imageId(name: string): Promise<string | undefined> {
  try {
    const { stdout } = await exec("podman", ["image", "inspect", "--format", "{{.Id}}", name], { timeout: 60_000 });
    return stdout.trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Removes images by name or id, ignoring ones already gone. */
export async function removeImages(...names: string[]): Promise<void> {
  for (const name of names) await exec("podman", ["rmi", name], { timeout: 60_000 }).catch(() => undefined);
}

export type ArchiveFormat = "docker-archive" | "oci-archive";

export type ServedArchive = { url: string; sha256: string; file: string; bytes: number };

export type ArchiveServer = {
  baseUrl: string;
  /** `podman save`s a local image in `format` (gzipped when asked) and serves it. */
  save(image: string, format: ArchiveFormat, options?: { gzip?: boolean }): Promise<ServedArchive>;
  /** Serves arbitrary bytes (a file that is no image). */
  serveBytes(name: string, bytes: Buffer): Promise<ServedArchive>;
  close(): Promise<void>;
};

/** An HTTP server on 127.0.0.1 serving image archives saved from local images. */
export async function startArchiveServer(): Promise<ArchiveServer> {
  const dir = await mkdtemp(path.join(tmpdir(), "suanli-archives-"));
  const served = new Map<string, string>();
  const server: Server = createServer((req, res) => {
    const file = served.get(req.url ?? "");
    if (!file) {
      res.writeHead(404).end("not found");
      return;
    }
    stat(file).then(
      (info) => {
        res.writeHead(200, { "content-type": "application/x-tar", "content-length": info.size });
        createReadStream(file).pipe(res);
      },
      (error: unknown) => res.writeHead(500).end(String(error)),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let counter = 0;
  const publish = async (name: string, file: string): Promise<ServedArchive> => {
    const bytes = await readFile(file);
    served.set(`/${name}`, file);
    return { url: `${baseUrl}/${name}`, sha256: createHash("sha256").update(bytes).digest("hex"), file, bytes: bytes.length };
  };
  return {
    baseUrl,
    async save(image, format, options = {}) {
      const name = `image-${++counter}.${format === "oci-archive" ? "oci" : "docker"}.tar`;
      const file = path.join(dir, name);
      await exec("podman", ["save", "--quiet", "--format", format, "--output", file, image], { timeout: 120_000 });
      if (!options.gzip) return publish(name, file);
      await exec("gzip", ["-n", file], { timeout: 60_000 });
      return publish(`${name}.gz`, `${file}.gz`);
    },
    async serveBytes(name, bytes) {
      const file = path.join(dir, name);
      await writeFile(file, bytes);
      return publish(name, file);
    },
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
