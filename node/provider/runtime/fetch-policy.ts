/**
 * Fetching renter-supplied URLs under the provider's policy. A renter must not be able to make the
 * provider read its own files (`file:`) or talk to services only the provider's host can reach
 * (loopback, cloud metadata at 169.254.169.254, the private network): that is SSRF.
 *
 * - `file:` only when the operator enables it (devnet and tests do);
 * - http(s) only to addresses network-policy.ts calls public, or inside an allow-listed range,
 *   and never to an address of the host's own interfaces (host-addresses.ts: its public address
 *   is the host as much as 127.0.0.1 is) unless the allow-list names that very address;
 * - the check runs on every address the name resolves to, inside the connection's own DNS
 *   lookup, so the socket connects to exactly the address that was checked (a name that answers
 *   "public" to the check and "127.0.0.1" to the connect — DNS rebinding — cannot slip through);
 * - redirects are followed by hand (at most 5), each hop checked again the same way;
 * - a refusal says "refused by the provider's policy" and never what a private service answered.
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { FetchRefusedError } from "../errors.js";
import { allowsExactly, isOwnAddress } from "./host-addresses.js";
import { checkAddress, parseCidr, type ParsedCidr } from "./network-policy.js";

export type FetchPolicy = {
  /** Accept `file:` URLs (a path the node can read). Off by default: any file would do. */
  allowFileUrls: boolean;
  /** CIDR ranges that may be fetched from although they are loopback, link-local or private. */
  allowNetworks: string[];
};

export const DEFAULT_FETCH_POLICY: FetchPolicy = { allowFileUrls: false, allowNetworks: [] };

export const MAX_REDIRECTS = 5;

/** The parts of a policy the checks use, parsed once. */
export type CompiledFetchPolicy = { allowFileUrls: boolean; allow: ParsedCidr[] };

export function compileFetchPolicy(policy: Partial<FetchPolicy> = {}): CompiledFetchPolicy {
  return { allowFileUrls: policy.allowFileUrls ?? false, allow: (policy.allowNetworks ?? []).map(parseCidr) };
}

/** The URL without query, fragment or credentials (signed URLs carry tokens that must not reach logs). */
function shown(url: URL): string {
  return url.protocol === "file:" ? `file://${url.pathname}` : `${url.protocol}//${url.host}${url.pathname}`;
}

/**
 * Whether renter-supplied fetches may reach `address`: public (or allow-listed) and not one of the
 * host's own interface addresses, unless an allow-list entry names that address itself.
 */
export function addressPermitted(address: string, policy: CompiledFetchPolicy): boolean {
  if (!checkAddress(address, policy.allow).allowed) return false;
  return !isOwnAddress(address) || allowsExactly(address, policy.allow);
}

/**
 * A DNS lookup for http(s).request that refuses a name when any address it resolves to is outside
 * the policy, and hands the connection only checked addresses.
 */
export function policedLookup(policy: CompiledFetchPolicy, url: URL): LookupFunction {
  return ((hostname: string, options: { family?: number | string; all?: boolean }, callback: (...args: unknown[]) => void) => {
    const family = options.family === "IPv4" ? 4 : options.family === "IPv6" ? 6 : typeof options.family === "number" ? options.family : 0;
    dnsLookup(hostname, { all: true, family, verbatim: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error);
      const refused = addresses.find((entry) => !addressPermitted(entry.address, policy));
      const first = addresses[0];
      if (refused || !first) return callback(new FetchRefusedError(shown(url), `${hostname} resolves to an address the provider does not fetch from`));
      if (options.all) callback(null, addresses);
      else callback(null, first.address, first.family);
    });
  }) as LookupFunction;
}

/** Throws FetchRefusedError when `url` may not be fetched at all (scheme, literal address). */
export function checkUrl(url: URL, policy: CompiledFetchPolicy, options: { redirected?: boolean } = {}): void {
  if (url.protocol === "file:") {
    if (!policy.allowFileUrls || options.redirected) throw new FetchRefusedError(shown(url), "file: URLs are not accepted");
    return;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new FetchRefusedError(shown(url), `${url.protocol} URLs are not accepted (http: and https: are)`);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  // A literal address never goes through DNS (so not through policedLookup): check it here.
  if (isIP(host) && !addressPermitted(host, policy)) throw new FetchRefusedError(shown(url), "the address is this host's own, loopback, link-local, private or reserved");
}

export type PolicedResponse = { response: IncomingMessage; url: URL };

/**
 * GETs an http(s) URL under the policy, following up to MAX_REDIRECTS redirects, each checked.
 * Resolves with the final response (any status: the caller judges it); rejects with
 * FetchRefusedError for a refused hop, or with the network error.
 */
export async function policedGet(target: URL, policy: CompiledFetchPolicy, signal: AbortSignal): Promise<PolicedResponse> {
  let url = target;
  for (let hop = 0; ; hop++) {
    checkUrl(url, policy, { redirected: hop > 0 });
    const response = await requestOnce(url, policy, signal);
    const location = response.headers.location;
    if (response.statusCode && [301, 302, 303, 307, 308].includes(response.statusCode) && location) {
      response.resume();
      if (hop >= MAX_REDIRECTS) throw new FetchRefusedError(shown(target), `more than ${MAX_REDIRECTS} redirects`);
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        throw new FetchRefusedError(shown(target), "a redirect to an invalid URL");
      }
      url = next;
      continue;
    }
    return { response, url };
  }
}

function requestOnce(url: URL, policy: CompiledFetchPolicy, signal: AbortSignal): Promise<IncomingMessage> {
  const client = url.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const request = client.request(url, { method: "GET", lookup: policedLookup(policy, url), signal, headers: { "user-agent": "suanli-provider", accept: "*/*" } }, resolve);
    request.once("error", reject);
    request.end();
  });
}

/**
 * Throws FetchRefusedError for a container image reference the engine would resolve somewhere the
 * policy forbids: a transport prefix (`oci-archive:/path`, `docker-archive:`, `dir:`,
 * `containers-storage:`, `docker-daemon:` — files or stores of the host), or a registry named by a
 * loopback, link-local, private or host's own literal address or `localhost` (unless allow-listed). Registry
 * names are resolved by the engine, not here: the operator's firewall covers what DNS returns.
 */
export function checkImageReference(image: string, policy: CompiledFetchPolicy): void {
  const slash = image.indexOf("/");
  const first = slash === -1 ? image : image.slice(0, slash);
  // Without a slash "name:tag" is a Docker Hub image; with one, a first segment with ":" must be host:port.
  if (slash !== -1 && first.includes(":") && !/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(first)) {
    throw new FetchRefusedError(image, `the image reference names a transport (${first}); only registry references are accepted`);
  }
  // Podman reads these transports before any registry syntax ("containers-storage:name" is not name:tag).
  if (/^(docker|docker-archive|docker-daemon|oci|oci-archive|dir|containers-storage|ostree|sif|tarball):/i.test(image)) {
    throw new FetchRefusedError(image, "the image reference names a transport; only registry references are accepted");
  }
  if (slash === -1 || !(first.includes(".") || first.includes(":") || first === "localhost")) return; // a Docker Hub path
  const host = first.replace(/:\d{1,5}$/, "").replace(/^\[|\]$/g, "");
  if (host.toLowerCase() === "localhost" || host.toLowerCase().endsWith(".localhost")) {
    if (!checkAddress("127.0.0.1", policy.allow).allowed) throw new FetchRefusedError(image, "the registry is on this host's loopback");
    return;
  }
  if (isIP(host) && !addressPermitted(host, policy)) throw new FetchRefusedError(image, "the registry address is this host's own, loopback, link-local, private or reserved");
}

/**
 * The fully qualified form of a registry reference the policy accepts (checkImageReference): a
 * Docker Hub path gets its registry written out (`busybox:1` is `docker.io/library/busybox:1`,
 * `org/app` is `docker.io/org/app`), as Docker reads it. Podman would otherwise resolve a short
 * name through `unqualified-search-registries` and short-name aliases in registries.conf, which
 * may name registries the policy never saw (a private or loopback one): the engine is only ever
 * handed a name whose registry the node has checked.
 */
export function qualifiedImageReference(image: string, policy: CompiledFetchPolicy): string {
  checkImageReference(image, policy);
  const slash = image.indexOf("/");
  const first = slash === -1 ? image : image.slice(0, slash);
  if (slash !== -1 && (first.includes(".") || first.includes(":") || first === "localhost")) return image;
  return `docker.io/${slash === -1 ? "library/" : ""}${image}`;
}
