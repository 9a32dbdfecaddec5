import { FORWARD_PROTOCOL } from "../../common/p2p/protocols.js";
import { FORWARD_FRAME_BYTES, TASK_IO_CONTROL_MAX_BYTES, forwardOpenedSchema } from "../../common/protocols/task-io.js";
import { InvalidInputError } from "../../common/errors.js";
import type { SuanliContext } from "../internal/context.js";
import { openTaskStream } from "../internal/task-io.js";
import { taskAttempt } from "./downloadOutput.js";
import { runDetached } from "../../common/detached.js";

/**
 * Options of `client.forward`.
 *
 * @example
 * import { createClient, type ForwardPortParameters } from "suanli/sdk";
 * const options: ForwardPortParameters = { port: 8000, localPort: 18000 };
 * const tunnel = await client.forward(taskId, options);
 */
export type ForwardPortParameters = {
  /** The task's port: one its spec declared in `ports`. */
  port: number;
  /** Local port to listen on, on 127.0.0.1 (default: a free one). */
  localPort?: number;
  /** For a group task: which machine, by rank (default 0). */
  rank?: number;
  /** Called with each connection that failed to open (the task stopped listening, the lease ended). */
  onError?: (error: Error) => void;
};

/**
 * A local port that leads to the task's port; `close()` stops listening and closes every
 * connection.
 *
 * @example
 * import { createClient, type ForwardPortReturnType } from "suanli/sdk";
 * const tunnel: ForwardPortReturnType = await client.forward(taskId, { port: 8000 });
 * console.log(await (await fetch(`http://127.0.0.1:${tunnel.localPort}/`)).text());
 * await tunnel.close();
 */
export type ForwardPortReturnType = { localPort: number; close(): Promise<void> };

/**
 * Forwards a local TCP port (on 127.0.0.1) to a port of the running task, through the provider
 * over libp2p: each local connection becomes one stream, authorized by the renter's wallet. Only
 * ports the task declared in `ports` are reachable; the provider caps connections and bandwidth
 * per lease and closes everything when the lease ends. The first connection is opened at once to
 * check access: an undeclared port, another wallet, or nothing listening throws here. Node only.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const { localPort, close } = await client.forward(taskId, { port: 8000 });
 * const page = await fetch(`http://127.0.0.1:${localPort}/v1/models`);
 * console.log(await page.json());
 * await close();
 */
export async function forwardPort(ctx: SuanliContext, taskId: string, parameters: ForwardPortParameters): Promise<ForwardPortReturnType> {
  const { port, localPort = 0 } = parameters ?? {};
  if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new InvalidInputError("forward", [{ path: "port", message: "expected a TCP port, 1 to 65535" }]);
  if (!Number.isInteger(localPort) || localPort < 0 || localPort > 65_535)
    throw new InvalidInputError("forward", [{ path: "localPort", message: "expected a TCP port, 0 to 65535" }]);
  const attempt = await taskAttempt(ctx, taskId, parameters.rank ?? 0);
  const net = await import("node:net");
  const { pipeSocket, FORWARD_EOF_FRAME } = await import("../../common/p2p/socket-pipe.js");
  const open = () =>
    openTaskStream(
      ctx,
      attempt,
      FORWARD_PROTOCOL,
      "forward",
      { port },
      { responseSchema: forwardOpenedSchema, maxFrameBytes: Math.max(FORWARD_FRAME_BYTES, TASK_IO_CONTROL_MAX_BYTES) },
    );
  // Access check: an error comes back here, not on the first local connection.
  const probe = await open();
  await probe.lp.write(FORWARD_EOF_FRAME).catch(() => undefined);
  await probe.stream.close().catch(() => undefined);

  const sockets = new Set<import("node:net").Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.pause();
    open().then(
      ({ lp, stream }) => {
        socket.resume();
        runDetached(pipeSocket(socket, lp, stream, undefined, 24 * 3600 * 1000), undefined, "Piping a forwarded connection");
      },
      (error: unknown) => {
        parameters.onError?.(error as Error);
        socket.destroy();
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(localPort, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  return {
    localPort: typeof address === "object" && address ? address.port : localPort,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
