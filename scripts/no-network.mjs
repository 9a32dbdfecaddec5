/**
 * Preloaded with `node --import` into a tool that must work offline (Redocly CLI in
 * scripts/lint-openapi.ts): every outgoing connection and DNS lookup fails at once and is reported
 * on stderr as "NETWORK ATTEMPT <where>", so a caller can fail when the tool tried to reach out.
 */
import dns from "node:dns";
import net from "node:net";

const refuse = (what) => {
  process.stderr.write(`NETWORK ATTEMPT ${what}\n`);
  return new Error(`network access is disabled for this process (${what})`);
};
const originalConnect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function (...args) {
  // net.connect() hands over its normalized [options, callback] pair as the first argument.
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  const options = typeof first === "object" && first !== null ? first : { port: first, host: typeof args[1] === "string" ? args[1] : undefined };
  if (options.path) return originalConnect.apply(this, args); // a local IPC pipe, not the network
  const error = refuse(`${options.host ?? "localhost"}:${options.port}`);
  process.nextTick(() => this.destroy(error));
  return this;
};
dns.lookup = (host, ...rest) => {
  const callback = rest.find((arg) => typeof arg === "function");
  const error = refuse(`dns ${host}`);
  process.nextTick(() => callback?.(error));
};
dns.promises.lookup = async (host) => {
  throw refuse(`dns ${host}`);
};
