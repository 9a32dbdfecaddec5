/**
 * Which addresses renter-controlled traffic may reach: a task's own connections (sandbox.ts) and
 * the provider's fetches of renter-supplied URLs (bundle.ts). Public unicast is allowed; the
 * host's loopback, link-local (cloud metadata at 169.254.169.254), the private and shared ranges,
 * multicast, reserved and documentation ranges, and IPv6 forms that embed an IPv4 address are
 * refused unless the operator allow-lists a range that contains the address.
 *
 * Address parsing and range classification come from ipaddr.js (the library Express uses for
 * the same job), not from hand-written regexes.
 */
import ipaddr from "ipaddr.js";

/** IPv4 ranges a task's network namespace routes to "prohibit" (EACCES) unless allow-listed. */
export const BLOCKED_IPV4_RANGES = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.0.2.0/24",
  "192.88.99.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "224.0.0.0/4",
  "240.0.0.0/4",
] as const;

/** ipaddr.js range names that are public, routable unicast. Everything else is refused. */
const PUBLIC_RANGES = new Set(["unicast"]);

export type ParsedCidr = { text: string; address: ipaddr.IPv4 | ipaddr.IPv6; prefix: number };

/** Parses "10.1.0.0/16", "fd00::/8" or a bare address (a /32 or /128). Throws on anything else. */
export function parseCidr(text: string): ParsedCidr {
  const [address, prefix] = text.includes("/") ? ipaddr.parseCIDR(text) : [ipaddr.parse(text), ipaddr.parse(text).kind() === "ipv4" ? 32 : 128];
  return { text, address, prefix };
}

/** Whether `text` is a CIDR range or an address ipaddr.js accepts (for config validation). */
export function isCidr(text: string): boolean {
  try {
    parseCidr(text);
    return true;
  } catch {
    return false;
  }
}

/** The address as ipaddr.js sees it, with an IPv4-mapped IPv6 address (::ffff:a.b.c.d) unwrapped. */
function normalize(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) return (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed;
}

function inRange(address: ipaddr.IPv4 | ipaddr.IPv6, cidr: ParsedCidr): boolean {
  if (address.kind() !== cidr.address.kind()) return false;
  return address.match(cidr.address, cidr.prefix);
}

export type AddressVerdict = { allowed: true } | { allowed: false; range: string };

/**
 * Whether renter-controlled traffic may reach `address`: public unicast always; anything else
 * only inside an allow-listed range. The verdict names the range class for logs (never shown to
 * the renter beyond "refused by the provider's policy").
 */
export function checkAddress(address: string, allow: readonly ParsedCidr[] = []): AddressVerdict {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = normalize(address);
  } catch {
    return { allowed: false, range: "unparsable" };
  }
  if (allow.some((cidr) => inRange(parsed, cidr))) return { allowed: true };
  const range = parsed.range();
  if (PUBLIC_RANGES.has(range)) {
    // ipaddr.js calls some special IPv4 blocks "unicast" (198.51.100.0/24, 203.0.113.0/24,
    // 192.88.99.0/24): refuse everything in our own list too.
    if (parsed.kind() === "ipv4" && BLOCKED_IPV4_RANGES.some((blocked) => inRange(parsed, parseCidr(blocked)))) return { allowed: false, range: "reserved" };
    return { allowed: true };
  }
  return { allowed: false, range };
}

/** Whether an allow-listed range fully contains `blocked` (so its "prohibit" route is left out). */
export function coveredByAllowList(blocked: string, allow: readonly ParsedCidr[]): boolean {
  const range = parseCidr(blocked);
  return allow.some((cidr) => cidr.address.kind() === range.address.kind() && cidr.prefix <= range.prefix && range.address.match(cidr.address, cidr.prefix));
}
