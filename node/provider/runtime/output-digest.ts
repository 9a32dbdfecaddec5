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
 */
import { createHash, type Hash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import path from "node:path";
import type { Hex } from "viem";

/** Entries walked at most; a task cannot make the digest loop without bound. */
const MAX_ENTRIES = 1_000_000;

async function listFiles(root: string): Promise<{ rel: string; full: string; size: number }[]> {
  const out: { rel: string; full: string; size: number }[] = [];
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
  const hash = createHash("sha256");
  for (const file of await listFiles(dir)) {
    hash.update(Buffer.from(file.rel, "utf8"));
    hash.update(Buffer.from([0]));
    hash.update(String(file.size), "ascii");
    hash.update(Buffer.from([0]));
    for await (const chunk of createReadStream(file.full)) hash.update(chunk as Buffer);
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
