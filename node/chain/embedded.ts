import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
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

type HttpHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

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
 * head, request, keep-alive and idle timeouts, per-address and total caps) around Hardhat's
 * request handler; HTTP only (Hardhat's server also speaks WebSocket, which nothing here uses).
 */
export async function startEmbeddedChain(
  options: { port?: number; wallClockBlocks?: boolean; clockOffsetSeconds?: number; connections?: ConnectionLimits } = {},
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
  const handle = await hardhatJsonRpcHandler(connection.provider);
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
