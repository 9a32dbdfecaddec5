/**
 * IPv6 targets on this host for the network-policy tests (issue #33 item 2): services bound to
 * `::` (every address, both families) and to `::1`, and a unique ULA address the test adds to the
 * host's `lo` (as a provider's LAN or VPN interface carries one), removed after. Adding it needs
 * root or passwordless sudo (CI has one of them); without either the host's own non-loopback IPv6
 * addresses are the targets, and a host with none fails the test saying so.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:net";
import { networkInterfaces } from "node:os";
import { promisify } from "node:util";

const exec = promisify(execFile);

export type HostIpv6 = {
  /** Port of a TCP service on `::` (answers "host-v6-any"), reachable over IPv4 too. */
  anyPort: number;
  /** Port of a TCP service on `::1` only (answers "host-v6-loopback"). */
  loopbackPort: number;
  /** The ULA this fixture added to `lo`, if it could. */
  ula: string | undefined;
  /** Every non-loopback IPv6 address of the host (the added ULA included), link-local left out (it needs a zone). */
  addresses: string[];
  close(): Promise<void>;
};

function listen(host: string, answer: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => {
      socket.on("error", () => undefined);
      socket.end(`${answer}\n`);
    });
    server.once("error", reject);
    server.listen({ port: 0, host, ipv6Only: false }, () => resolve(server));
  });
}

async function ip(args: string[]): Promise<boolean> {
  const attempts: [string, string[]][] = process.getuid?.() === 0 ? [["ip", args]] : [["sudo", ["-n", "ip", ...args]]];
  for (const [file, argv] of attempts) {
    try {
      await exec(file, argv, { timeout: 10_000 });
      return true;
    } catch {
      // not permitted here
    }
  }
  return false;
}

/** The host's non-loopback, non-link-local IPv6 addresses, read now. */
export function hostIpv6Addresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((entry) => entry !== undefined && entry.family === "IPv6" && !entry.internal && !entry.address.toLowerCase().startsWith("fe80"))
    .map((entry) => entry!.address);
}

export async function startHostIpv6(): Promise<HostIpv6> {
  const any = await listen("::", "host-v6-any");
  const loopback = await listen("::1", "host-v6-loopback");
  const candidate = `fd5a:${randomBytes(2).toString("hex")}:${randomBytes(2).toString("hex")}::1`;
  const ula = (await ip(["-6", "addr", "add", `${candidate}/128`, "dev", "lo"])) ? candidate : undefined;
  const addresses = [...new Set([...(ula ? [ula] : []), ...hostIpv6Addresses()])];
  if (addresses.length === 0) {
    any.close();
    loopback.close();
    throw new Error("this host has no IPv6 address besides ::1 and the test cannot add one to lo (run as root or with passwordless sudo)");
  }
  return {
    anyPort: (any.address() as { port: number }).port,
    loopbackPort: (loopback.address() as { port: number }).port,
    ula,
    addresses,
    async close() {
      await Promise.all([any, loopback].map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
      if (ula) await ip(["-6", "addr", "del", `${ula}/128`, "dev", "lo"]);
    },
  };
}

/** [label, host, port] triples for every IPv6 way to the host: `::1` on both services, each address on the `::` one. */
export function ipv6Targets(host: HostIpv6): [string, string, number][] {
  return [
    ["v6-loopback-any", "::1", host.anyPort],
    ["v6-loopback-only", "::1", host.loopbackPort],
    ...host.addresses.map((address, i): [string, string, number] => [`v6-host-${i}`, address, host.anyPort]),
  ];
}
