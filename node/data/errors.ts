/**
 * Errors of the data plane. Each class has a stable `name` callers and tests match on; errors a
 * renter's input causes carry `blame: "renter"` (see node/provider/errors.ts `blameOf`).
 */
import { SuanliError } from "../../common/errors.js";

/** A string that is not a CID (v0 or v1). */
export class InvalidCidError extends SuanliError {
  override name = "InvalidCidError";
  readonly blame = "renter" as const;
  constructor(value: string, cause?: unknown) {
    super(`"${value.slice(0, 80)}" is not a CID`, { cause, metaMessages: ["A CID looks like bafy... (v1) or Qm... (v0); `suanli data add` prints one."] });
  }
}

/** The blocks of a CID could not be had in time: nobody reachable has them, or they stopped serving. */
export class DataNotFoundError extends SuanliError {
  override name = "DataNotFoundError";
  readonly blame = "renter" as const;
  readonly cid: string;
  constructor(cid: string, timeoutMs: number, cause?: unknown) {
    super(`The data ${cid} could not be fetched within ${timeoutMs} ms`, {
      cause,
      metaMessages: ["Keep a node that pinned it running (`suanli data add` on your node), or pass its address as a provider hint."],
    });
    this.cid = cid;
  }
}

/** Data over the node's configured size caps. */
export class DataQuotaError extends SuanliError {
  override name = "DataQuotaError";
  readonly blame = "renter" as const;
  constructor(what: string, bytes: number, limit: number) {
    super(`${what}: ${bytes} bytes is over the limit of ${limit} bytes`, {
      metaMessages: ["Remove data you no longer need (`suanli data rm`) or raise data.pinnedBytes / data.cacheBytes."],
    });
  }
}

/** A DAG that cannot be written as files: an entry name that would escape the folder, a non-UnixFS node. */
export class UnsafeDataError extends SuanliError {
  override name = "UnsafeDataError";
  readonly blame = "renter" as const;
  constructor(cid: string, reason: string) {
    super(`The data ${cid} cannot be written out: ${reason}`);
  }
}

/** A local path that cannot be imported (missing, a symlink, a device). */
export class DataSourceError extends SuanliError {
  override name = "DataSourceError";
  constructor(file: string, reason: string, cause?: unknown) {
    super(`Cannot import ${file}: ${reason}`, { cause });
  }
}

/** A peer opened more bitswap streams to this node at once than `data.serving.maxStreamsPerPeer` (the stream is reset with it). */
export class ServingLimitError extends SuanliError {
  override name = "ServingLimitError";
  constructor(peer: string, maxStreamsPerPeer: number) {
    super(`Too many bitswap streams from ${peer}: at most ${maxStreamsPerPeer} at once (data.serving.maxStreamsPerPeer)`);
  }
}
