/** Ports for tests that must know a port before the process that binds it starts. */
import { createServer, type AddressInfo } from "node:net";

/** A TCP port of 127.0.0.1 that is free right now (another process may take it before you bind it: bind soon). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
