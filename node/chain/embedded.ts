import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import type { EthereumProvider } from "hardhat/types/providers";
import { httpServerOptions, limitConnections, type ConnectionLimits } from "../http/limits.js";

export type EmbeddedChain = {
  /** JSON-RPC endpoint of the in-process chain, on 127.0.0.1. */
  rpcUrl: string;
  port: number;
  close(): Promise<void>;
};

/**
 * How long and how many connections the devnet's JSON-RPC server holds (node/http/limits.ts,
 * issue #33 item 11): Hardhat's own server has Node's defaults. Every client of a devnet is on
 * this machine (one address), so the per-address cap is the total's half, both far above what
 * a devnet's nodes, CLIs and tests open at once and below the process's file descriptors (1024
 * on the hosts measured here), which an unbounded flood would exhaust for the chain itself.
 */
export const DEVNET_RPC_LIMITS: ConnectionLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  keepAliveTimeoutMs: 5_000,
  idleTimeoutMs: 120_000,
  maxPerAddress: 256,
  maxTotal: 512,
  maxRequestsPerSocket: 0,
};

/**
 * Largest JSON-RPC request body the devnet reads, bytes. Without a cap, Hardhat's handler buffers
 * whatever arrives within the request timeout. The largest request a devnet needs is a contract
 * deployment: at most 48 KiB of init code (EIP-3860), under 100 KiB as hex; 1 MiB leaves ten times
 * that. Not geth's 5 MiB: Hardhat's reader spends about 0.8 s of CPU per MiB on the 2-core hosts
 * measured here, and a 5 MiB request held the devnet's event loop for 4.2 s.
 */
export const DEVNET_RPC_MAX_BODY_BYTES = 1024 * 1024;

/** JSON-RPC's "invalid request" code: the answer to a body over the cap (with HTTP 413). */
const JSON_RPC_INVALID_REQUEST = -32600;

type HttpHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/**
 * Reads a request body of at most `maxBytes`, counting the bytes as they arrive (a chunked body
 * declares no length; a declared one is refused before a byte is read). Undefined: over the cap,
 * the rest left unread.
 */
function readCappedBody(req: IncomingMessage, maxBytes: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    if (Number(req.headers["content-length"] ?? 0) > maxBytes) return resolve(undefined);
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received <= maxBytes) return void chunks.push(chunk);
      req.off("data", onData).off("end", onEnd).pause();
      resolve(undefined);
    };
    const onEnd = () => resolve(Buffer.concat(chunks));
    req.on("data", onData).once("end", onEnd).once("error", reject);
  });
}

/**
 * Puts a byte cap in front of Hardhat's handler: a body over `maxBytes` is answered 413 with a
 * JSON-RPC error that names the cap. The rest of that body is read and dropped (a socket closed
 * with unread bytes is reset, and the client would lose the answer), up to `maxBytes` more, then
 * the connection is closed; the request timeout bounds a client that stops sending. A body within
 * the cap is handed on in 16 KiB slices, the size Hardhat's reader (`bytes.push(...chunk)`) was
 * written for.
 */
function capRequestBodies(handle: HttpHandler, maxBytes: number): HttpHandler {
  return async (req, res) => {
    const socket = req.socket;
    const body = await readCappedBody(req, maxBytes);
    if (body === undefined) {
      const message = `The request body is larger than ${maxBytes} bytes, the devnet's cap on a JSON-RPC request; send smaller requests (split a batch)`;
      const answer = JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: JSON_RPC_INVALID_REQUEST, message, data: { maxBytes } } });
      res.writeHead(413, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) });
      res.end(answer);
      let dropped = 0;
      req.on("data", (chunk: Buffer) => {
        dropped += chunk.length;
        if (dropped > maxBytes) socket.destroy();
      });
      req.resume();
      return;
    }
    const slices = Array.from({ length: Math.ceil(body.length / 16_384) }, (_, index) => body.subarray(index * 16_384, (index + 1) * 16_384));
    const replay = Object.assign(Readable.from(slices), { method: req.method, headers: req.headers, url: req.url });
    await handle(replay as unknown as IncomingMessage, res);
  };
}

/**
 * Hardhat's JSON-RPC request handler (the one its `network.createServer` serves), imported by file:
 * Hardhat exports the server, whose `http.Server` is private, but not the handler. Hardhat is
 * pinned; an upgrade that moves the file fails here with the path it looked for.
 */
async function hardhatJsonRpcHandler(provider: EthereumProvider): Promise<HttpHandler> {
  const file = new URL("./internal/builtin-plugins/node/json-rpc/handler.js", import.meta.resolve("hardhat"));
  const module = (await import(file.href).catch((error: unknown) => {
    throw new Error(`Hardhat's JSON-RPC handler is not at ${file.pathname} (was Hardhat upgraded?): ${(error as Error).message}`);
  })) as { JsonRpcHandler: new (provider: EthereumProvider) => { handleHttp: HttpHandler } };
  return new module.JsonRpcHandler(provider).handleHttp;
}

/**
 * Starts Hardhat's network in this process behind a JSON-RPC server on 127.0.0.1, so that a
 * demo or a test needs no second terminal. Any viem client can talk to `rpcUrl`. Hardhat is a
 * development dependency: production nodes connect to a real RPC endpoint instead.
 *
 * The server is this project's own `http.Server` with `connections` (default DEVNET_RPC_LIMITS:
 * head, request, keep-alive and idle timeouts, per-address and total caps) and a body cap
 * (`maxBodyBytes`, default DEVNET_RPC_MAX_BODY_BYTES) around Hardhat's request handler; HTTP only (Hardhat's server also speaks WebSocket, which nothing here uses).
 */
export async function startEmbeddedChain(
  options: { port?: number; wallClockBlocks?: boolean; clockOffsetSeconds?: number; connections?: ConnectionLimits; maxBodyBytes?: number } = {},
): Promise<EmbeddedChain> {
  const { network } = await import("hardhat");
  // Hardhat gives every block a timestamp at least one second after the previous one, so a burst
  // of transactions pushes the chain's clock ahead of the wall clock. With wallClockBlocks,
  // blocks mined within one second share its timestamp, as on a real chain.
  // Hardhat dates the genesis block when it starts, and blocks count on from there: a chain made
  // later in the same process runs behind the wall clock by that much. clockOffsetSeconds sets
  // the chain's clock that far from the wall clock instead (a test of a chain far off it).
  const override = {
    ...(options.wallClockBlocks ? { allowBlocksWithSameTimestamp: true } : {}),
    ...(options.clockOffsetSeconds !== undefined ? { initialDate: new Date(Date.now() + options.clockOffsetSeconds * 1000) } : {}),
  };
  const params = Object.keys(override).length > 0 ? { network: "default", override } : "default";
  const connection = await network.create(params);
  const handle = capRequestBodies(await hardhatJsonRpcHandler(connection.provider), options.maxBodyBytes ?? DEVNET_RPC_MAX_BODY_BYTES);
  const limits = options.connections ?? DEVNET_RPC_LIMITS;
  const server: Server = createServer(httpServerOptions(limits), (req, res) => void handle(req, res).catch(() => res.destroy()));
  limitConnections(server, limits, { perAddress: true });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  }).catch(async (error: unknown) => {
    await connection.close();
    throw error;
  });
  const { address, port } = server.address() as AddressInfo;
  let closed = false;
  return {
    rpcUrl: `http://${address}:${port}`,
    port,
    async close() {
      if (closed) return;
      closed = true;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await connection.close();
    },
  };
}
