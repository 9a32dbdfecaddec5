import type { JsonRpcServer } from "hardhat/types/network";

export type EmbeddedChain = {
  /** JSON-RPC endpoint of the in-process chain, on 127.0.0.1. */
  rpcUrl: string;
  port: number;
  close(): Promise<void>;
};

/**
 * Starts Hardhat's network in this process behind a JSON-RPC server on 127.0.0.1, so that a
 * demo or a test needs no second terminal. Any viem client can talk to `rpcUrl`. Hardhat is a
 * development dependency: production nodes connect to a real RPC endpoint instead.
 */
export async function startEmbeddedChain(options: { port?: number; wallClockBlocks?: boolean; clockOffsetSeconds?: number } = {}): Promise<EmbeddedChain> {
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
  const server: JsonRpcServer = await network.createServer(params, "127.0.0.1", options.port ?? 0);
  const { address, port } = await server.listen();
  let closed = false;
  return {
    rpcUrl: `http://${address}:${port}`,
    port,
    async close() {
      if (closed) return;
      closed = true;
      await server.close();
    },
  };
}
