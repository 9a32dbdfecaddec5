/**
 * The data routes (docs/data.md, "HTTP API"): add a file or a folder (streamed), pin a CID fetched
 * from the network, list, remove and get content-addressed data held by this node's DataStore. Data on a node's disk belongs to
 * whoever runs the node, and no wallet owns it, so there is no signature to check as on the lease
 * routes: these routes answer only clients on the node's own machine (loopback address and Host,
 * no X-Forwarded-For unless api.trustProxy), never a browser (a request with an Origin header: a
 * web page must not use a renter's local node), and add/remove share the `write` rate limit.
 */
import type { FastifyRequest } from "fastify";
import type { Readable } from "node:stream";
import ipaddr from "ipaddr.js";
import {
  DATA_HEADERS,
  DATA_MEDIA_TYPES,
  dataAddQuerySchema,
  dataCidParamsSchema,
  dataEntrySchema,
  dataGetQuerySchema,
  dataListSchema,
  dataPinBodySchema,
  dataRemovedSchema,
} from "../../common/api/data.js";
import { SuanliError } from "../../common/errors.js";
import { parseCid } from "../data/verify.js";
import { addUpload, openDownload, type UploadKind } from "../data/transfer.js";
import { ApiError, TooManyStreamsError } from "./errors.js";
import { defineRoute, type RouteSpec } from "./route.js";
import type { RouteDeps } from "./route-deps.js";
import { badInput, error, rateLimited } from "./route-responses.js";

/** Uploads and downloads in progress at once, all clients together. */
const MAX_TRANSFERS = 4;

/** The node runs without its data plane (data.enabled false) (503). */
export class DataDisabledError extends ApiError {
  override name = "DataDisabledError";
  constructor() {
    super(503, "This node's data plane is off: set data.enabled to true in its configuration (or SUANLI_DATA__ENABLED=true) and restart it; docs/data.md");
  }
}

/** A data route asked from another machine, through a proxy, or by a browser (403). */
export class DataAccessRefusedError extends ApiError {
  override name = "DataAccessRefusedError";
  constructor(reason: string) {
    super(403, `The data routes answer only clients on the node's own machine: ${reason}`);
  }
}

/** DELETE /v1/data/{cid} for a root this node neither pins nor caches (404). */
export class DataNotHeldError extends ApiError {
  override name = "DataNotHeldError";
  constructor(cid: string) {
    super(404, `This node neither pins nor caches ${cid}; GET /v1/data lists what it holds`);
  }
}

/** The data plane's own errors, under their own names, with the status each maps to. */
const DATA_ERROR_STATUS: Record<string, number> = {
  InvalidCidError: 400,
  DataSourceError: 400,
  DataNotFoundError: 404,
  DataQuotaError: 413,
  UnsafeDataError: 422,
};

function asApiError(cause: unknown): unknown {
  if (!(cause instanceof SuanliError) || cause instanceof ApiError) return cause;
  const status = DATA_ERROR_STATUS[cause.name];
  if (status === undefined) return cause;
  const mapped = new ApiError(status, [cause.shortMessage, ...(cause.metaMessages ?? [])].join(" "), { cause });
  mapped.name = cause.name;
  return mapped;
}

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]"]);

function isLoopbackIp(ip: string): boolean {
  try {
    const parsed = ipaddr.process(ip);
    return parsed.range() === "loopback";
  } catch {
    return false;
  }
}

/** Only the node's own machine, never a browser (see the file comment). */
function checkLocal(request: FastifyRequest): void {
  if (request.headers.origin !== undefined) throw new DataAccessRefusedError("a browser's request (it carries an Origin header) is refused");
  if (!isLoopbackIp(request.ip)) throw new DataAccessRefusedError(`the client ${request.ip} is not on a loopback address`);
  const host = (request.headers.host ?? "").toLowerCase().replace(/:\d+$/, "");
  if (!LOOPBACK_NAMES.has(host) && !/^127\.\d+\.\d+\.\d+$/.test(host)) {
    throw new DataAccessRefusedError(`the Host header ${JSON.stringify(host.slice(0, 80))} is not a loopback name (use http://127.0.0.1:<port>)`);
  }
}

/** Bytes that may still be pinned: data.pinnedBytes less what `held` pins (a transfer past it is cut off early; the store checks again). */
function pinnedRoom(held: readonly { pinned: boolean; bytes: number }[], store: { options: { pinnedBytes: number } }): number {
  return Math.max(0, store.options.pinnedBytes - held.filter((entry) => entry.pinned).reduce((sum, entry) => sum + entry.bytes, 0));
}

function isReadable(body: unknown): body is Readable {
  return typeof body === "object" && body !== null && typeof (body as Readable).pipe === "function";
}

const dataTag = "data";
const refused = error("Not a client on the node's own machine (loopback address and Host, no browser Origin) (DataAccessRefusedError)");
const disabled = error("The node runs without its data plane: data.enabled is false (DataDisabledError); the message says how to enable it");
const busy = error(`Rate limit exceeded, or ${MAX_TRANSFERS} data transfers are already in progress (TooManyStreamsError)`);

/** The data routes, in the order the OpenAPI document lists them. */
export function dataRoutes(deps: RouteDeps): RouteSpec[] {
  let transfers = 0;
  /** The store, once the caller is allowed and the data plane is on. */
  const open = (request: FastifyRequest) => {
    checkLocal(request);
    if (!deps.data) throw new DataDisabledError();
    return deps.data;
  };
  const slot = () => {
    if (transfers >= MAX_TRANSFERS) throw new TooManyStreamsError(`This node runs at most ${MAX_TRANSFERS} data transfers at once; retry when one ends`);
    transfers++;
    let released = false;
    return () => {
      if (!released) transfers--;
      released = true;
    };
  };

  return [
    defineRoute({
      method: "POST",
      url: "/v1/data",
      operationId: "addData",
      summary: "Add a file or a folder to this node (pinned), streamed",
      description:
        `The body is a file's bytes (\`${DATA_MEDIA_TYPES.file}\`) or a folder as a tar of its contents (\`${DATA_MEDIA_TYPES.folder}\`: regular files and ` +
        "folders only, names relative to the folder). The node stages it on disk, imports it as UnixFS (CID v1, raw leaves; a folder wrapped as one directory) " +
        "and pins it. The upload may be at most data.pinnedBytes less what is pinned already (413 past it), and must finish within " +
        "api.connections.requestTimeoutMs. Only clients on the node's own machine (403 otherwise).",
      tag: dataTag,
      querystring: dataAddQuerySchema,
      streamBody: { [DATA_MEDIA_TYPES.file]: "A file's bytes", [DATA_MEDIA_TYPES.folder]: "A folder as a tar of its contents" },
      rateLimit: "write",
      responses: {
        200: { description: "The pinned root", schema: dataEntrySchema },
        400: error("A bad query, a tar that cannot be read, or an entry that is not a regular file or folder (DataSourceError)"),
        403: refused,
        413: error("Over data.pinnedBytes (DataQuotaError)"),
        415: error(`The body is neither ${DATA_MEDIA_TYPES.file} nor ${DATA_MEDIA_TYPES.folder}`),
        429: busy,
        503: disabled,
      },
      handler: async ({ query, body, request }) => {
        const data = open(request);
        const mediaType = (request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
        const kind: UploadKind | undefined = mediaType === DATA_MEDIA_TYPES.file ? "file" : mediaType === DATA_MEDIA_TYPES.folder ? "folder" : undefined;
        if (!kind || !isReadable(body)) throw new ApiError(415, `Send the data as ${DATA_MEDIA_TYPES.file} (a file) or ${DATA_MEDIA_TYPES.folder} (a folder)`);
        const release = slot();
        try {
          return await addUpload(data.store, body, { kind, name: query.name ?? "data", staging: data.staging, maxBytes: pinnedRoom(await data.store.list(), data.store) });
        } catch (cause) {
          throw asApiError(cause);
        } finally {
          release();
        }
      },
    }),
    defineRoute({
      method: "POST",
      url: "/v1/data/pins",
      operationId: "pinData",
      summary: "Fetch a CID from the network (every block verified) and pin it on this node",
      description:
        "Blocks the node lacks are fetched over bitswap from its connected peers and the `providers` given, each verified against its CID, then the root is pinned " +
        "(a cached copy becomes pinned). A renter keeps a checkpoint or an output past its provider's retention this way. The data may be at most " +
        "data.pinnedBytes less what is pinned already (413 past it). Pinning a root already pinned answers it again. Only clients on the node's own machine (403 otherwise).",
      tag: dataTag,
      body: dataPinBodySchema,
      rateLimit: "write",
      responses: {
        200: { description: "The pinned root", schema: dataEntrySchema },
        400: error("A bad body: not a CID, a provider that is not a multiaddr ending in /p2p/<peer id> (InvalidCidError, or the field named)"),
        403: refused,
        404: error("No reachable node served the data in time (DataNotFoundError)"),
        413: error("Over data.pinnedBytes (DataQuotaError)"),
        429: busy,
        503: disabled,
      },
      handler: async ({ body, request }) => {
        const data = open(request);
        const release = slot();
        try {
          const cid = parseCid(body.cid).toString();
          const held = await data.store.list();
          const already = held.find((entry) => entry.cid === cid && entry.pinned);
          if (already) return already;
          return await data.store.pin(cid, { name: body.name, providers: body.providers, timeoutMs: body.timeoutMs, maxBytes: pinnedRoom(held, data.store) });
        } catch (cause) {
          throw asApiError(cause);
        } finally {
          release();
        }
      },
    }),
    defineRoute({
      method: "GET",
      url: "/v1/data",
      operationId: "listData",
      summary: "The data this node holds: pinned and cached roots, and the node's libp2p identity",
      tag: dataTag,
      responses: { 200: { description: "Roots, newest first, and the totals against the caps", schema: dataListSchema }, 403: refused, 429: rateLimited, 503: disabled },
      handler: async ({ request }) => {
        const { store } = open(request);
        const items = await store.list();
        const sum = (pinned: boolean) => items.filter((entry) => entry.pinned === pinned).reduce((total, entry) => total + entry.bytes, 0);
        return {
          items,
          node: store.identity(),
          pinnedBytes: sum(true),
          pinnedLimitBytes: store.options.pinnedBytes,
          cachedBytes: sum(false),
          cacheLimitBytes: store.options.cacheBytes,
        };
      },
    }),
    defineRoute({
      method: "DELETE",
      url: "/v1/data/:cid",
      operationId: "removeData",
      summary: "Unpin a root (or drop a cached one); its blocks nothing else holds are deleted",
      tag: dataTag,
      params: dataCidParamsSchema,
      rateLimit: "write",
      responses: {
        200: { description: "What was removed", schema: dataRemovedSchema },
        400: error("Not a CID (InvalidCidError)"),
        403: refused,
        404: error("This node neither pins nor caches the CID (DataNotHeldError)"),
        429: rateLimited,
        503: disabled,
      },
      handler: async ({ params, request }) => {
        const { store } = open(request);
        try {
          const cid = parseCid(params.cid).toString();
          if (await store.unpin(cid)) return { cid, removed: "pinned" as const };
          if ((await store.list()).some((entry) => entry.cid === cid && !entry.pinned)) {
            await store.dropCached(cid);
            return { cid, removed: "cached" as const };
          }
          throw new DataNotHeldError(cid);
        } catch (cause) {
          throw asApiError(cause);
        }
      },
    }),
    defineRoute({
      method: "GET",
      url: "/v1/data/:cid",
      operationId: "getData",
      summary: "Stream data back: a file's bytes, or a folder as a tar of its contents",
      description:
        "Blocks the node lacks are fetched over bitswap from its connected peers and the `providers` given, and kept in its cache (data.cacheBytes). " +
        "Every block is verified against its CID, and the client can re-import what it receives to check the root CID. " +
        `The \`${DATA_HEADERS.kind}\` header says which form the body is. Only clients on the node's own machine (403 otherwise).`,
      tag: dataTag,
      params: dataCidParamsSchema,
      querystring: dataGetQuerySchema,
      responses: {
        200: {
          description: "The data",
          contentTypes: [DATA_MEDIA_TYPES.file, DATA_MEDIA_TYPES.folder],
          headers: { [DATA_HEADERS.kind]: "`file` or `folder`", [DATA_HEADERS.bytes]: "Bytes of file content (a folder: all its files)" },
        },
        400: badInput,
        403: refused,
        404: error("No reachable node served the data in time (DataNotFoundError)"),
        413: error("Larger than data.cacheBytes (DataQuotaError)"),
        422: error("The DAG cannot be written as files: an entry name that would leave the folder, too deep (UnsafeDataError)"),
        429: busy,
        503: disabled,
      },
      handler: async ({ params, query, request, reply }) => {
        const data = open(request);
        const release = slot();
        let download;
        try {
          const providers = (query.providers ?? "")
            .split(",")
            .map((address) => address.trim())
            .filter(Boolean);
          download = await openDownload(data.store, params.cid, { staging: data.staging, timeoutMs: query.timeoutMs, providers });
        } catch (cause) {
          release();
          throw asApiError(cause);
        }
        const { stream, cleanup } = download;
        stream.once("close", () => {
          release();
          cleanup().catch(() => undefined);
        });
        reply
          .header("content-type", DATA_MEDIA_TYPES[download.kind])
          .header("cache-control", "no-store")
          .header(DATA_HEADERS.kind, download.kind)
          .header(DATA_HEADERS.bytes, String(download.bytes));
        return reply.send(stream);
      },
    }),
  ];
}
