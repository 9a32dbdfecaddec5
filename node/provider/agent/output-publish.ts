/**
 * Outputs as a CID (issue 36, docs/data.md "Outputs"): when the provider's data plane is on, a
 * task's `output/` folder is copied (each file read without following a link: the task may still
 * be swapping folders) into a staging folder only the node writes, imported from there into the
 * DataStore (pinned), and the completion's outputDigest becomes that CID's sha2-256 digest
 * (common/output-cid.ts). The staged copy is what the output store keeps, so the files the
 * provider serves over its download path are exactly the CID's. The pin is released when the
 * kept output goes (outputs.retentionSeconds, or evicted for outputs.quotaBytes).
 */
import { mkdir, readdir, rm } from "node:fs/promises";
import type { Hex } from "viem";
import { outputDigestOf } from "../../../common/output-cid.js";
import type { DataStore } from "../../data/store.js";
import type { Logger } from "../../log/logger.js";
import { copyTaskFiles } from "../runtime/task-files.js";
import type { OutputStore } from "./outputs.js";

/** An output pinned by CID: the CID, the digest the completion signs, and the staged copy to keep. */
export type PublishedOutput = { cid: string; digest: Hex; dir: string };

/**
 * Stages and pins a finished task's output; undefined (the older digest stays) when there is no
 * data plane or output store, the folder holds no file, or the import fails (logged: the pinned
 * quota is full, the disk is).
 */
export async function publishOutput(
  parts: { data: DataStore | undefined; outputs: OutputStore | undefined; logger: Logger },
  leaseId: bigint,
  outputDir: string,
): Promise<PublishedOutput | undefined> {
  const { data, outputs, logger } = parts;
  if (!data || !outputs) return undefined;
  const staging = outputs.stagingDir(leaseId);
  try {
    await rm(staging, { recursive: true, force: true });
    await mkdir(staging, { recursive: true, mode: 0o700 });
    await copyTaskFiles(outputDir, staging);
    if ((await readdir(staging)).length === 0) {
      await rm(staging, { recursive: true, force: true });
      return undefined;
    }
    const entry = await data.add(staging, { name: `output of lease ${leaseId}` });
    const digest = outputDigestOf(entry.cid);
    if (!digest) throw new Error(`The data plane gave the output ${entry.cid}, not a CID v1 dag-pb sha2-256 root`);
    logger.info("Output pinned by CID", { leaseId, cid: entry.cid, bytes: entry.bytes });
    return { cid: entry.cid, digest, dir: staging };
  } catch (error) {
    logger.warn("Cannot pin the output by CID; its completion signs the older digest", { leaseId }, error);
    await rm(staging, { recursive: true, force: true }).catch(() => undefined);
    return undefined;
  }
}
