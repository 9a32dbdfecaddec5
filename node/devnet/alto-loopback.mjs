// Preloaded into Alto (`node --import`, node/devnet/bundler.ts): Alto's server listens on host
// "0.0.0.0" (it has no host option), and nothing the devnet starts may listen beyond the loopback
// interface. A TCP listen on every interface ("0.0.0.0", "::") or on no host becomes a listen on
// 127.0.0.1; a listen on a named host, a Unix socket or a handle is left as it is.
import net from "node:net";

const EVERY_INTERFACE = new Set(["0.0.0.0", "::", "::0", "0:0:0:0:0:0:0:0"]);
const LOOPBACK = "127.0.0.1";

/** A TCP port as `listen` takes it: a number, or a string of digits (any other string is a pipe's path). */
const isPort = (value) => typeof value === "number" || (typeof value === "string" && /^\d+$/.test(value));
const isEveryInterface = (host) => host === undefined || host === null || host === "" || EVERY_INTERFACE.has(host);

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const [first, second] = args;
  if (args.length === 0 || typeof first === "function") return listen.call(this, 0, LOOPBACK, ...args);
  if (isPort(first)) {
    if (typeof second === "string") return listen.call(this, first, isEveryInterface(second) ? LOOPBACK : second, ...args.slice(2));
    // listen(port[, backlog][, callback]): no host.
    return listen.call(this, first, LOOPBACK, ...args.slice(1));
  }
  if (first !== null && typeof first === "object" && first.path === undefined && first.fd === undefined && first.handle === undefined && !("_handle" in first)) {
    if (isEveryInterface(first.host)) return listen.call(this, { ...first, host: LOOPBACK }, ...args.slice(1));
  }
  return listen.apply(this, args);
};
