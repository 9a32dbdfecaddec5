/** Ports for tests that must know a port before the process that binds it starts. */
import { readFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";

/**
 * Where picked ports come from: under the host's ephemeral range (Linux: 32768–60999 by default,
 * /proc/sys/net/ipv4/ip_local_port_range), which neither listen(0) nor an outgoing connection is
 * ever given. A port picked from the ephemeral range could be taken before its process binds it by
 * any of the many connections the other lane's tests open (CI once saw a soak attestor's port so
 * taken: EADDRINUSE). Undefined where the range leaves no room below it: listen(0) then.
 */
function pickRange(): { low: number; high: number } | undefined {
  let ephemeralLow = 32_768;
  try {
    ephemeralLow = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || ephemeralLow;
  } catch {
    // not Linux: assume the IANA default range starts above ours (49152)
  }
  const high = Math.min(ephemeralLow, 32_768);
  const low = 20_000;
  return high - low >= 2_000 ? { low, high } : undefined;
}
const RANGE = pickRange();

async function bind(port: number): Promise<number | undefined> {
  const server = createServer();
  const bound = await new Promise<boolean>((resolve) => {
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => resolve(true));
  });
  if (!bound) return undefined;
  const { port: got } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return got;
}

/**
 * A TCP port of 127.0.0.1 that is free right now, picked at random below the ephemeral range
 * (see RANGE): only another picker can take it before you bind it. Bind soon.
 */
export async function freePort(): Promise<number> {
  if (RANGE) {
    for (let attempt = 0; attempt < 100; attempt++) {
      const port = await bind(RANGE.low + Math.floor(Math.random() * (RANGE.high - RANGE.low)));
      if (port !== undefined) return port;
    }
  }
  const port = await bind(0);
  if (port === undefined) throw new Error("no free TCP port on 127.0.0.1");
  return port;
}
