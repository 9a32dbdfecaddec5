/**
 * The container runtime's images: pulled from a registry (`image`) or fetched as an archive and
 * loaded (`imageArchive`), kept in the engine's store and reused, pruned by size.
 *
 * - A task runs its image by the engine's image id, never by a name: a name in the engine's store
 *   can be re-pointed (an archive that carries the tag `nvcr.io/nvidia/pytorch:24.03-py3` would
 *   otherwise shadow the real one for the next renter). This store's index records which id each
 *   reference or archive digest gave, and only those are reused.
 * - Reuse ("cached"): an archive is reused by its sha256; a registry reference by digest
 *   (`name@sha256:...`) or by an explicit tag other than `latest` is reused when its image is
 *   in the engine's store — pulled before, or put there by the operator (Kubernetes'
 *   IfNotPresent); `name` and `name:latest` are pulled again each time (only changed layers
 *   download).
 * - A loaded archive keeps no name it brought: it is tagged `localhost/suanli/archive:<sha256>`
 *   and the archive's own names are removed, under a lock that local look-ups of references
 *   also take, so no task ever resolves a name an archive put there.
 * - Pruning: when the images of the index add up to more than `cacheBytes`, the least recently
 *   used ones that no task is using are removed (`rmi` by the name this store gave, never
 *   `--force`, so the engine refuses to remove an image a container still uses).
 * - Whose fault: the registry said no such image, the registry was unreachable or wanted
 *   credentials, the archive's digest differs or it is no image — the renter's input
 *   (ImageNotFoundError, ImagePullError, BundleDigestMismatchError, ImageArchiveError);
 *   anything else the engine failed at (storage, disk full) is the provider's
 *   (RuntimeUnavailableError).
 */
import { execFileText } from "../../process/child.js";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, open, readFile, rename, rm, writeFile } from "node:fs/promises";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import path from "node:path";
import { silentLogger, type Logger } from "../../log/logger.js";
import { BundleTooLargeError, ImageArchiveError, ImageNotFoundError, ImagePullError, RuntimeUnavailableError } from "../errors.js";
import { displayUrl, fetchBundle } from "./bundle.js";
import type { FetchPolicy } from "./fetch-policy.js";
import { runDetached } from "../../../common/detached.js";

export type ImageEngine = { kind: "docker" | "podman"; path: string };

export type ImageSource = { kind: "registry"; reference: string } | { kind: "archive"; url: string; sha256: string };

export type ImageStoreOptions = {
  /** The engine to pull and load with; null when there is none (the runtime says why). */
  engine: () => Promise<ImageEngine | null>;
  /** Where the index (images.json) and archive downloads live (outside any workspace). */
  dir: string;
  /** Most bytes the cached images may take together before the least recently used are removed. */
  cacheBytes: number;
  fetchPolicy?: Partial<FetchPolicy> | undefined;
  /** Caps of an archive download and of a gzipped archive once decompressed (the bundle caps). */
  archive: { maxBytes: number; fetchTimeoutMs: number; maxUnpackedBytes?: number };
  /** Registries (host:port) pulled without TLS verification (Podman's --tls-verify=false; Docker reads daemon.json). */
  insecureRegistries?: readonly string[] | undefined;
  /** Longest a pull or a load may take (default 30 minutes). */
  pullTimeoutMs?: number | undefined;
  logger?: Logger | undefined;
};

/** An image ready to run, held until release(). */
export type AcquiredImage = {
  /** The engine's image id: what `run` is given. */
  id: string;
  /** What the renter asked for (the archive's URL without query). */
  source: string;
  /** True when nothing was pulled or loaded: the image was already in the cache. */
  cached: boolean;
  /** How long the pull or load took (0 when cached). */
  ms: number;
  sizeBytes: number;
  /** Lets the cache prune the image again (call once the task has ended). */
  release: () => void;
};

type Entry = {
  key: string;
  /** The engine's image id. */
  id: string;
  /** The name this store gave the image (the reference, or localhost/suanli/archive:<sha256>). */
  name: string;
  sizeBytes: number;
  lastUsedMs: number;
};

const INDEX_FILE = "images.json";

type RunResult = { code: number | null; stdout: string; stderr: string; missing: boolean; timedOut: boolean };

function run(file: string, args: string[], timeoutMs: number, signal?: AbortSignal): Promise<RunResult> {
  return new Promise((resolve) => {
    execFileText(file, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, ...(signal ? { signal } : {}) }, (error, stdout, stderr) => {
      const err = error as (NodeJS.ErrnoException & { killed?: boolean; signal?: string }) | null;
      resolve({
        code: err ? (typeof err.code === "number" ? err.code : null) : 0,
        stdout,
        stderr,
        missing: err?.code === "ENOENT",
        timedOut: Boolean(err && err.killed && err.signal === "SIGTERM" && !signal?.aborted),
      });
    });
  });
}

/** The last meaningful line of an engine's error output (Podman prints retries as warnings first). */
function engineError(result: RunResult): string {
  const lines = `${result.stderr}\n${result.stdout}`
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !/level=warning/.test(line));
  return (lines.at(-1) ?? `exit code ${result.code}`).replace(/^Error:\s*/, "").slice(0, 1000);
}

/** Whether a reference names an immutable image (a digest) or an explicit tag other than latest. */
export function isPinnedReference(reference: string): boolean {
  if (reference.includes("@sha256:")) return true;
  const lastSegment = reference.slice(reference.lastIndexOf("/") + 1);
  const colon = lastSegment.indexOf(":");
  return colon !== -1 && lastSegment.slice(colon + 1) !== "latest";
}

/** The registry host[:port] of a reference, or undefined for a Docker Hub path. */
function registryOf(reference: string): string | undefined {
  const slash = reference.indexOf("/");
  if (slash === -1) return undefined;
  const first = reference.slice(0, slash);
  return first.includes(".") || first.includes(":") || first === "localhost" ? first : undefined;
}

/**
 * Sorts a failed pull: the registry's answers and the network on the way to it are the renter's
 * (the renter chose the registry); the engine's own failures are the provider's.
 */
export function classifyPullFailure(reference: string, result: RunResult, timeoutMs: number): Error {
  const text = `${result.stderr}\n${result.stdout}`;
  const last = engineError(result);
  if (result.timedOut) return new ImagePullError(reference, `the pull took longer than ${Math.round(timeoutMs / 1000)} s`);
  if (/manifest unknown|name unknown|not found|does not exist|no such image|repository name not known/i.test(text)) return new ImageNotFoundError(reference, last);
  if (/unauthorized|authentication required|denied|forbidden/i.test(text))
    return new ImagePullError(reference, "the registry refused access (a private image needs credentials the provider does not have)", last);
  if (
    /connection refused|no such host|i\/o timeout|network is unreachable|no route to host|dial tcp|connection reset|TLS handshake|x509|certificate|server gave HTTP response to HTTPS|pinging container registry|EOF/i.test(
      text,
    )
  )
    return new ImagePullError(reference, "the registry cannot be reached", last);
  if (/invalid reference format|repository name must/i.test(text)) return new ImageNotFoundError(reference, last);
  return new RuntimeUnavailableError("container", `the engine failed to pull ${reference}: ${last}`);
}

/** Names the engine printed for a `load`: "Loaded image: name", "Loaded image(s): a,b", "Loaded image ID: sha256:..." */
export function parseLoadOutput(stdout: string): string[] {
  const names: string[] = [];
  for (const line of stdout.split("\n")) {
    const match = /^Loaded image(?:\(s\)| ID)?:\s*(.+)$/.exec(line.trim());
    if (match)
      names.push(
        ...match[1]!
          .split(",")
          .map((name) => name.trim())
          .filter(Boolean),
      );
  }
  return names;
}

async function isGzip(file: string): Promise<boolean> {
  const handle = await open(file, "r");
  try {
    const head = Buffer.alloc(2);
    const { bytesRead } = await handle.read(head, 0, 2, 0);
    return bytesRead === 2 && head[0] === 0x1f && head[1] === 0x8b;
  } finally {
    await handle.close();
  }
}

/** Decompresses `from` into `to`, stopping past `maxBytes` (a gzip bomb) with BundleTooLargeError. */
async function gunzipCapped(from: string, to: string, shown: string, maxBytes: number, signal: AbortSignal | undefined): Promise<string> {
  let bytes = 0;
  const cap = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      bytes += chunk.length;
      if (bytes > maxBytes) callback(new BundleTooLargeError(`Image archive ${shown} once decompressed`, maxBytes));
      else callback(null, chunk);
    },
  });
  try {
    await pipeline(createReadStream(from), createGunzip(), cap, createWriteStream(to, { mode: 0o600 }), ...(signal ? [{ signal }] : []));
  } catch (error) {
    if (error instanceof BundleTooLargeError) throw error;
    throw new ImageArchiveError(shown, "it is not a valid gzip file", (error as Error).message);
  }
  return to;
}

export class ImageStore {
  private readonly logger: Logger;
  private entries = new Map<string, Entry>();
  private loaded: Promise<void> | undefined;
  private readonly inflight = new Map<string, Promise<{ entry: Entry; cached: boolean; ms: number }>>();
  private readonly uses = new Map<string, number>();
  /** Serialises index writes and pruning. */
  private chain: Promise<unknown> = Promise.resolve();
  /** Archive loads and local look-ups of names (see the header). */
  private names: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: ImageStoreOptions) {
    this.logger = options.logger ?? silentLogger();
  }

  private get timeoutMs(): number {
    return this.options.pullTimeoutMs ?? 30 * 60_000;
  }

  private async engine(): Promise<ImageEngine> {
    const engine = await this.options.engine();
    if (!engine) throw new RuntimeUnavailableError("container", "no container engine to pull images with");
    return engine;
  }

  private load(): Promise<void> {
    this.loaded ??= (async () => {
      try {
        const raw = JSON.parse(await readFile(path.join(this.options.dir, INDEX_FILE), "utf8")) as { entries?: Entry[] };
        for (const entry of raw.entries ?? []) {
          if (typeof entry?.key === "string" && typeof entry.id === "string" && typeof entry.name === "string") this.entries.set(entry.key, entry);
        }
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT") this.logger.warn("The image cache index cannot be read; starting a new one", {}, error);
      }
    })();
    return this.loaded;
  }

  private async save(): Promise<void> {
    await mkdir(this.options.dir, { recursive: true, mode: 0o700 });
    const file = path.join(this.options.dir, INDEX_FILE);
    const temporary = `${file}.${process.pid}.tmp`;
    await writeFile(temporary, JSON.stringify({ entries: [...this.entries.values()] }, null, 2), { mode: 0o600 });
    await rename(temporary, file);
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const next = this.names.then(work, work);
    this.names = next.catch(() => undefined);
    return next;
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.chain.then(work, work);
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** The images this store keeps, most recently used first (for status and tests). */
  async list(): Promise<(Entry & { inUse: boolean })[]> {
    await this.load();
    return [...this.entries.values()].sort((a, b) => b.lastUsedMs - a.lastUsedMs).map((entry) => ({ ...entry, inUse: (this.uses.get(entry.key) ?? 0) > 0 }));
  }

  /** Pulls or loads the image (or finds it cached) and holds it until release(). */
  async acquire(source: ImageSource, options: { signal?: AbortSignal | undefined } = {}): Promise<AcquiredImage> {
    await this.load();
    const key = source.kind === "registry" ? `ref:${source.reference}` : `archive:${source.sha256}`;
    // Held before the pull, so a prune meanwhile (another task's) cannot remove it.
    this.uses.set(key, (this.uses.get(key) ?? 0) + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const left = (this.uses.get(key) ?? 1) - 1;
      if (left <= 0) this.uses.delete(key);
      else this.uses.set(key, left);
      runDetached(this.prune(), this.logger, "Pruning the image cache");
    };
    try {
      let pending = this.inflight.get(key);
      if (!pending) {
        pending = this.obtain(key, source, options.signal).finally(() => this.inflight.delete(key));
        this.inflight.set(key, pending);
      }
      const { entry, cached, ms } = await pending;
      entry.lastUsedMs = Date.now();
      await this.serial(() => this.save());
      await this.prune();
      return {
        id: entry.id,
        source: source.kind === "registry" ? source.reference : displayUrl(source.url),
        cached,
        ms,
        sizeBytes: entry.sizeBytes,
        release,
      };
    } catch (error) {
      release();
      throw error;
    }
  }

  private async obtain(key: string, source: ImageSource, signal: AbortSignal | undefined): Promise<{ entry: Entry; cached: boolean; ms: number }> {
    const engine = await this.engine();
    const known = this.entries.get(key);
    const reusable = known && (source.kind === "archive" || isPinnedReference(source.reference));
    if (reusable && (await this.exists(engine, known.id))) return { entry: known, cached: true, ms: 0 };
    if (source.kind === "registry" && isPinnedReference(source.reference)) {
      const present = await this.exclusive(() => this.idOf(engine, source.reference));
      if (present) {
        const entry: Entry = { key, id: present, name: source.reference, sizeBytes: await this.sizeOf(engine, present), lastUsedMs: Date.now() };
        this.entries.set(key, entry);
        await this.serial(() => this.save());
        return { entry, cached: true, ms: 0 };
      }
    }
    const started = Date.now();
    const { id, name } = source.kind === "registry" ? await this.pull(engine, source.reference, signal) : await this.exclusive(() => this.loadArchive(engine, source, signal));
    const sizeBytes = await this.sizeOf(engine, id);
    const entry: Entry = { key, id, name, sizeBytes, lastUsedMs: Date.now() };
    this.entries.set(key, entry);
    await this.serial(() => this.save());
    return { entry, cached: false, ms: Date.now() - started };
  }

  private async exists(engine: ImageEngine, id: string): Promise<boolean> {
    const result = await run(engine.path, ["image", "inspect", "--format", "{{.Id}}", id], 60_000);
    return result.code === 0 && result.stdout.trim() !== "";
  }

  private async sizeOf(engine: ImageEngine, id: string): Promise<number> {
    const result = await run(engine.path, ["image", "inspect", "--format", "{{.Size}}", id], 60_000);
    const size = Number(result.stdout.trim());
    return Number.isFinite(size) && size >= 0 ? size : 0;
  }

  private async idOf(engine: ImageEngine, name: string): Promise<string | undefined> {
    const result = await run(engine.path, ["image", "inspect", "--format", "{{.Id}}", name], 60_000);
    const id = result.stdout.trim().replace(/^sha256:/, "");
    return result.code === 0 && /^[0-9a-f]{64}$/.test(id) ? id : undefined;
  }

  private async pull(engine: ImageEngine, reference: string, signal: AbortSignal | undefined): Promise<{ id: string; name: string }> {
    const args = ["pull"];
    if (engine.kind === "podman") {
      args.push("--quiet");
      const registry = registryOf(reference);
      if (registry && (this.options.insecureRegistries ?? []).includes(registry)) args.push("--tls-verify=false");
    }
    args.push(reference);
    this.logger.info("Pulling image", { image: reference });
    const result = await run(engine.path, args, this.timeoutMs, signal);
    if (signal?.aborted) throw new ImagePullError(reference, "the task was stopped while its image was being pulled");
    if (result.missing) throw new RuntimeUnavailableError("container", `${engine.path} is not installed`);
    if (result.code !== 0) throw classifyPullFailure(reference, result, this.timeoutMs);
    // Podman prints the id; Docker the reference (read it back at once).
    const printed =
      result.stdout
        .trim()
        .split("\n")
        .at(-1)
        ?.trim()
        .replace(/^sha256:/, "") ?? "";
    const id = /^[0-9a-f]{64}$/.test(printed) ? printed : await this.idOf(engine, reference);
    if (!id) throw new RuntimeUnavailableError("container", `the engine pulled ${reference} but cannot show its image id`);
    return { id, name: reference };
  }

  private async loadArchive(engine: ImageEngine, source: { url: string; sha256: string }, signal: AbortSignal | undefined): Promise<{ id: string; name: string }> {
    const shown = displayUrl(source.url);
    await mkdir(this.options.dir, { recursive: true, mode: 0o700 });
    const file = path.join(this.options.dir, `${source.sha256}.${process.pid}.${Date.now()}.download`);
    const tarFile = `${file}.tar`;
    try {
      await fetchBundle({
        url: source.url,
        sha256: source.sha256,
        destFile: file,
        maxBytes: this.options.archive.maxBytes,
        timeoutMs: this.options.archive.fetchTimeoutMs,
        signal,
        policy: this.options.fetchPolicy,
        label: "Image archive",
      });
      // Podman 4 loads a gzipped oci-archive but not a gzipped docker-archive: decompress here (capped).
      const loadFile = (await isGzip(file)) ? await gunzipCapped(file, tarFile, shown, this.options.archive.maxUnpackedBytes ?? 8 * 1024 ** 3, signal) : file;
      this.logger.info("Loading image archive", { url: shown });
      const result = await run(engine.path, ["load", "--input", loadFile], this.timeoutMs, signal);
      if (result.missing) throw new RuntimeUnavailableError("container", `${engine.path} is not installed`);
      if (result.code !== 0) {
        const text = `${result.stderr}\n${result.stdout}`;
        if (
          /does not match any of the supported image formats|manifest\.json|index\.json|invalid tar header|unexpected EOF|archive\/tar|gzip: invalid header|not a valid/i.test(text)
        ) {
          throw new ImageArchiveError(shown, "it is not a docker-archive or oci-archive image", engineError(result));
        }
        throw new RuntimeUnavailableError("container", `the engine failed to load ${shown}: ${engineError(result)}`);
      }
      const names = parseLoadOutput(result.stdout);
      const ids = new Set<string>();
      for (const name of names) {
        const id = /^(sha256:)?[0-9a-f]{64}$/.test(name) ? name.replace(/^sha256:/, "") : await this.idOf(engine, name);
        if (id) ids.add(id);
      }
      if (ids.size !== 1) {
        for (const name of names) await run(engine.path, ["rmi", name], 60_000);
        throw new ImageArchiveError(shown, ids.size === 0 ? "the engine loaded no image from it" : `it holds ${ids.size} images; one is accepted`);
      }
      const [id] = ids;
      const ours = `localhost/suanli/archive:${source.sha256}`;
      const tagged = await run(engine.path, ["tag", id!, ours], 60_000);
      if (tagged.code !== 0) throw new RuntimeUnavailableError("container", `the engine cannot tag the loaded image: ${engineError(tagged)}`);
      // The archive's own names go: they could shadow a registry image of the same name.
      for (const name of names) {
        if (name !== ours && !/^(sha256:)?[0-9a-f]{64}$/.test(name)) await run(engine.path, ["rmi", name], 60_000);
      }
      return { id: id!, name: ours };
    } finally {
      await rm(file, { force: true });
      await rm(tarFile, { force: true });
    }
  }

  /** Removes least recently used images no task holds until the rest fit in cacheBytes. */
  prune(): Promise<void> {
    return this.serial(async () => {
      await this.load();
      const byId = new Map<string, Entry[]>();
      for (const entry of this.entries.values()) byId.set(entry.id, [...(byId.get(entry.id) ?? []), entry]);
      let total = 0;
      for (const group of byId.values()) total += Math.max(...group.map((entry) => entry.sizeBytes));
      if (total <= this.options.cacheBytes) return;
      const engine = await this.options.engine();
      if (!engine) return;
      const groups = [...byId.entries()]
        .filter(([, group]) => group.every((entry) => !this.uses.has(entry.key) && !this.inflight.has(entry.key)))
        .sort(([, a], [, b]) => Math.max(...a.map((entry) => entry.lastUsedMs)) - Math.max(...b.map((entry) => entry.lastUsedMs)));
      for (const [id, group] of groups) {
        if (total <= this.options.cacheBytes) break;
        let removed = true;
        for (const entry of group) {
          // By the name this store gave it while that name still points at it; otherwise (the
          // name was re-pointed since) by id, which the engine refuses while other names hold it.
          const target = (await this.idOf(engine, entry.name)) === id ? entry.name : id;
          const result = await run(engine.path, ["rmi", target], 120_000);
          if (result.code !== 0 && target === entry.name && (await this.exists(engine, id))) {
            removed = false;
            this.logger.warn("Cannot remove a cached image", { image: entry.name, error: engineError(result) });
            continue;
          }
          this.entries.delete(entry.key);
        }
        if (removed) {
          total -= Math.max(...group.map((entry) => entry.sizeBytes));
          this.logger.info("Removed a cached image (image cache over its size)", { image: group[0]!.name, bytes: group[0]!.sizeBytes });
        }
      }
      await this.save();
    });
  }
}
