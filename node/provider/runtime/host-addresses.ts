/**
 * The host's own addresses: every address on any of its interfaces, whatever range it is in. A
 * renter-supplied URL on one of them reaches the provider's own services (an API, a database, an
 * SSH server bound to the public address), so the fetch policy treats them as the host, like
 * loopback (issue #33, item 10). Read from the kernel at every check, never cached: interfaces
 * and addresses come and go (DHCP, VPNs, a hot-plugged NIC, a cloud's secondary IP).
 *
 * An address the host is reached by only through NAT (a cloud's elastic IP) is not on any
 * interface and is not known here; what answers there is what the internet sees anyway.
 */
import { networkInterfaces } from "node:os";
import ipaddr from "ipaddr.js";
import type { ParsedCidr } from "./network-policy.js";

/** The address in one canonical form: IPv4-mapped IPv6 unwrapped, zone id dropped; undefined when unparsable. */
function canonical(address: string): string | undefined {
  try {
    const parsed = ipaddr.parse(address.replace(/%.*$/, ""));
    if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) return (parsed as ipaddr.IPv6).toIPv4Address().toString();
    return parsed.toNormalizedString();
  } catch {
    return undefined;
  }
}

/** Every address of every interface of this host (loopback included), canonical, read now. */
export function ownAddresses(): Set<string> {
  const out = new Set<string>();
  for (const entries of Object.values(networkInterfaces())) {
    for (const entry of entries ?? []) {
      const address = canonical(entry.address);
      if (address) out.add(address);
    }
  }
  return out;
}

/** Whether `address` is one of this host's own (see ownAddresses); `own` is for callers that check many at once. */
export function isOwnAddress(address: string, own: ReadonlySet<string> = ownAddresses()): boolean {
  const key = canonical(address);
  return key !== undefined && own.has(key);
}

/**
 * Whether an allow-list entry names exactly this address (a /32 or /128): the only way to open
 * the host's own address, so allow-listing a range a host address happens to be in (the LAN's
 * 10.0.0.0/8 for a private registry) does not open the node's own ports.
 */
export function allowsExactly(address: string, allow: readonly ParsedCidr[]): boolean {
  const key = canonical(address);
  return allow.some((cidr) => cidr.prefix === (cidr.address.kind() === "ipv4" ? 32 : 128) && canonical(cidr.address.toString()) === key);
}
