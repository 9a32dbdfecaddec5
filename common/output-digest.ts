/**
 * The output digest a provider signs when it completes a lease (`complete(leaseId, exitCode,
 * outputDigest, unitSeconds)`). Anyone holding the same output files computes the same value:
 *
 *   sha256 over, for each regular file under `output/` in ascending byte order of its relative
 *   POSIX path: path (UTF-8) || 0x00 || size in decimal (ASCII) || 0x00 || content
 *
 * Directories count only through the files they hold; symbolic links and special files are
 * skipped (never followed, so a link cannot pull host files into the digest). A task without an
 * `output/` directory is digested over its raw stdout bytes instead (before log redaction).
 *
 * Node only (node:fs). The provider computes it when a task ends with `digestOpenedFiles` and an
 * opener that never follows a link (node/provider/runtime/task-files.ts: a task may still be
 * swapping folders for links); the SDK recomputes it over the files it downloaded
 * (sdk/actions/downloadOutput.ts), where `listOutputFiles` / `digestOutputFiles` read the
 * renter's own folder.
 */
import { createHash, type Hash } from "node:crypto";
import { lstat, open, readdir, type FileHandle } from "node:fs/promises";
import path from "node:path";
import type { Hex } from "viem";

/** Entries walked at most; a task cannot make the digest loop without bound. */
const MAX_ENTRIES = 1_000_000;

/** A regular file of an output folder: its relative POSIX path, full path and size. */
export type OutputFile = { rel: string; full: string; size: number };

/**
 * The regular files under `root` in digest order (ascending bytes of the relative path);
 * symbolic links and special files are skipped.
 *
 * @example
 * import { listOutputFiles } from "suanli/common/output-digest";
 * for (const file of await listOutputFiles("./out")) console.log(file.rel, file.size);
 */
export async function listOutputFiles(root: string): Promise<OutputFile[]> {
  const out: OutputFile[] = [];
  const pending: string[] = [""];
  let seen = 0;
  while (pending.length > 0) {
    const relDir = pending.pop()!;
    const entries = await readdir(path.join(root, relDir), { withFileTypes: true });
    for (const entry of entries) {
      if (++seen > MAX_ENTRIES) throw new Error(`output/ holds more than ${MAX_ENTRIES} entries`);
      const rel = relDir === "" ? entry.name : `${relDir}/${entry.name}`;
      if (entry.isDirectory()) pending.push(rel);
      else if (entry.isFile()) {
        const full = path.join(root, rel);
        out.push({ rel, full, size: (await lstat(full)).size });
      }
    }
  }
  out.sort((a, b) => Buffer.compare(Buffer.from(a.rel, "utf8"), Buffer.from(b.rel, "utf8")));
  return out;
}

/** The digest of a directory as defined above, or undefined when the directory does not exist. */
export async function digestOutputDir(dir: string): Promise<Hex | undefined> {
  const info = await lstat(dir).catch(() => undefined);
  if (!info?.isDirectory()) return undefined;
  return digestOutputFiles(dir, await listOutputFiles(dir));
}

/**
 * The digest over the given files of `root` (relative POSIX paths), by the rule above: sorted by
 * path bytes, each as path, 0x00, size, 0x00, content. A file whose size on disk differs from
 * `size` is hashed as it is on disk (so the digest then differs).
 *
 * @example
 * import { digestOutputFiles } from "suanli/common/output-digest";
 * const digest = await digestOutputFiles("./out", [{ rel: "model.bin" }, { rel: "logs/train.txt" }]);
 */
export async function digestOutputFiles(root: string, files: readonly { rel: string }[]): Promise<Hex> {
  return digestOpenedFiles(files, (rel) => open(path.join(root, rel), "r"));
}

/**
 * The digest over the given files by the rule above, each opened by `openFile` (the provider
 * passes an opener that never follows a link: node/provider/runtime/task-files.ts). Each file is
 * hashed as its open handle has it: its size then, and its bytes to the end.
 *
 * @example
 * import { open } from "node:fs/promises";
 * import { digestOpenedFiles } from "suanli/common/output-digest";
 * const digest = await digestOpenedFiles([{ rel: "model.bin" }], (rel) => open(`./out/${rel}`, "r"));
 */
export async function digestOpenedFiles(files: readonly { rel: string }[], openFile: (rel: string) => Promise<FileHandle>): Promise<Hex> {
  const sorted = [...files].sort((a, b) => Buffer.compare(Buffer.from(a.rel, "utf8"), Buffer.from(b.rel, "utf8")));
  const hash = createHash("sha256");
  for (const file of sorted) {
    const handle = await openFile(file.rel);
    try {
      const size = (await handle.stat()).size;
      hash.update(Buffer.from(file.rel, "utf8"));
      hash.update(Buffer.from([0]));
      hash.update(String(size), "ascii");
      hash.update(Buffer.from([0]));
      for await (const chunk of handle.createReadStream({ autoClose: false, start: 0 })) hash.update(chunk as Buffer);
    } finally {
      await handle.close();
    }
  }
  return `0x${hash.digest("hex")}`;
}

/** Hashes a stream of bytes as it comes (the stdout fallback). */
export class StreamDigest {
  private readonly hash: Hash = createHash("sha256");
  update(chunk: Uint8Array): void {
    this.hash.update(chunk);
  }
  digest(): Hex {
    return `0x${this.hash.digest("hex")}`;
  }
}
