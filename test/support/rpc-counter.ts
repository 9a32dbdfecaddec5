/**
 * A JSON-RPC proxy on 127.0.0.1 in front of the devnet that counts the calls passing through:
 * a node pointed at it (chain.rpcUrl) shows which chain reads a request cost it.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { toFunctionSelector, type Abi } from "viem";

type RpcCall = { method: string; params?: unknown[] };

export type RpcCounter = {
  url: string;
  /** Every call seen, in order. */
  calls: RpcCall[];
  /** eth_call requests whose calldata starts with the selector of `functionName` in `abi`. */
  ethCalls(abi: Abi, functionName: string): number;
  /** The calldata of those requests. */
  ethCallData(abi: Abi, functionName: string): string[];
  close(): Promise<void>;
};

export async function startRpcCounter(upstream: string): Promise<RpcCounter> {
  const calls: RpcCall[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      try {
        const parsed = JSON.parse(body.toString("utf8")) as RpcCall | RpcCall[];
        for (const call of Array.isArray(parsed) ? parsed : [parsed]) calls.push({ method: call.method, params: call.params });
      } catch {
        // not ours to judge: the upstream answers it
      }
      fetch(upstream, { method: "POST", headers: { "content-type": "application/json" }, body })
        .then(async (answer) => {
          res.writeHead(answer.status, { "content-type": "application/json" });
          res.end(Buffer.from(await answer.arrayBuffer()));
        })
        .catch((error: unknown) => {
          res.writeHead(502);
          res.end(String(error));
        });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const counter: RpcCounter = {
    url: `http://127.0.0.1:${port}`,
    calls,
    ethCalls(abi, functionName) {
      return counter.ethCallData(abi, functionName).length;
    },
    ethCallData(abi, functionName) {
      const item = abi.find((entry) => entry.type === "function" && entry.name === functionName);
      if (!item) throw new Error(`no function ${functionName} in the abi`);
      const selector = toFunctionSelector(item as never).toLowerCase();
      return calls
        .filter((call) => call.method === "eth_call")
        .map((call) => {
          const tx = call.params?.[0] as { data?: string; input?: string } | undefined;
          return (tx?.data ?? tx?.input ?? "").toLowerCase();
        })
        .filter((data) => data.startsWith(selector));
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return counter;
}
