/**
 * The data routes of the HTTP API (docs/data.md, "HTTP API"): add (a file's bytes or a folder as
 * tar, streamed), pin by CID (fetched from the network), list, remove and get content-addressed
 * data on the node. Shared by the node
 * (validation, OpenAPI) and the SDK (parsing the answers).
 */
import { z } from "zod";
import { queryInt } from "./primitives.js";

/** The media types of data in transit: a file's bytes as they are, a folder as a tar of its contents. */
export const DATA_MEDIA_TYPES = { file: "application/octet-stream", folder: "application/x-tar" } as const;

/** Response headers of GET /v1/data/{cid}. */
export const DATA_HEADERS = {
  /** `file` or `folder` (then the body is a tar of its contents). */
  kind: "x-suanli-data-kind",
  /** Bytes of file content (a folder: all its files). */
  bytes: "x-suanli-data-bytes",
} as const;

const cidText = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9]+$/, "expected a CID (bafy... or Qm...)");

export const dataCidParamsSchema = z.strictObject({
  cid: cidText.describe("The data's root CID (v1 bafy..., or v0 Qm...)."),
});

/** A name a data root carries (one path segment, as DataStore entry names). */
const dataName = z
  .string()
  .min(1)
  .max(200)
  .refine((name) => name !== "." && name !== ".." && !/[/\\\0]/.test(name), "expected one path segment: no /, \\, NUL, . or ..");

export const dataAddQuerySchema = z.strictObject({
  name: dataName.optional().describe("The name kept with the pin (the file or folder name; default `data`). Does not change the CID."),
});

export const dataGetQuerySchema = z.strictObject({
  timeoutMs: queryInt(100, 86_400_000).optional().describe("How long the node waits for blocks it lacks, 100..86400000 ms (default: its data.fetchTimeoutMs)."),
  providers: z
    .string()
    .max(4000)
    .optional()
    .describe("Comma-separated multiaddrs (each ending in /p2p/<peer id>) of nodes known to have the data: the node dials them for blocks it lacks."),
});

/** A multiaddr that names its peer, as a provider hint (e.g. /ip4/203.0.113.5/tcp/4001/p2p/12D3KooW...). */
const providerAddr = z
  .string()
  .min(1)
  .max(500)
  .regex(/^\/.+\/p2p\/[A-Za-z0-9]+$/, "expected a multiaddr ending in /p2p/<peer id>");

export const dataPinBodySchema = z.strictObject({
  cid: cidText.describe("The root to fetch (every block, verified) and pin."),
  name: dataName.optional().describe("The name kept with the pin (default: the CID). Does not change the CID."),
  providers: z
    .array(providerAddr)
    .max(16)
    .optional()
    .describe("Multiaddrs (each ending in /p2p/<peer id>) of nodes known to have the data: the node dials them for blocks it lacks."),
  timeoutMs: z.number().int().min(100).max(86_400_000).optional().describe("How long the node waits for blocks it lacks, 100..86400000 ms (default: its data.fetchTimeoutMs)."),
});
export type DataPinBody = z.input<typeof dataPinBodySchema>;

export const dataEntrySchema = z.strictObject({
  cid: z.string().describe("Root CID."),
  name: z.string(),
  bytes: z.number().int().min(0).describe("Bytes of the DAG's blocks on this node."),
  pinned: z.boolean().describe("Pinned (added or pinned by hand: kept) or cached (fetched for a task or a download: evicted least recently used first)."),
  addedAt: z.number().int().min(0).describe("Unix milliseconds."),
  lastUsed: z.number().int().min(0).describe("Unix milliseconds."),
});
export type DataEntryView = z.output<typeof dataEntrySchema>;

/** A node's libp2p identity: what another node needs to fetch the data this one holds. */
export const dataNodeIdentitySchema = z.strictObject({
  peerId: z.string().describe("The node's libp2p peer id."),
  addrs: z.array(z.string()).describe("The node's multiaddrs, each ending in /p2p/<peer id>: the provider hints another node dials to fetch what this one holds."),
});
export type DataNodeIdentity = z.output<typeof dataNodeIdentitySchema>;

export const dataListSchema = z.strictObject({
  items: z.array(dataEntrySchema).describe("Pinned and cached roots, newest first."),
  node: dataNodeIdentitySchema.optional().describe("This node's libp2p identity (absent from nodes before it): the SDK names it as a place to fetch checkpoints it copied here."),
  pinnedBytes: z.number().int().min(0),
  pinnedLimitBytes: z.number().int().min(0).describe("data.pinnedBytes"),
  cachedBytes: z.number().int().min(0),
  cacheLimitBytes: z.number().int().min(0).describe("data.cacheBytes"),
});
export type DataList = z.output<typeof dataListSchema>;

export const dataRemovedSchema = z.strictObject({
  cid: z.string(),
  removed: z.enum(["pinned", "cached"]).describe("What was removed: the pin (its blocks nothing else holds are deleted) or a cached copy."),
});
export type DataRemoved = z.output<typeof dataRemovedSchema>;
