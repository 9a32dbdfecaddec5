/**
 * A minimal Prometheus endpoint: `GET /metrics` answers the registry's text exposition, anything
 * else 404. For nodes that do not run the HTTP API (which serves the same registry at its own
 * `/metrics`).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import { SuanliError } from "../../common/errors.js";
import { httpServerOptions, limitConnections, type ConnectionLimits } from "../http/limits.js";
import type { Logger } from "../log/logger.js";
import { METRICS_CONNECTION_DEFAULTS } from "./options.js";

export class MetricsServerError extends SuanliError {
  override name = "MetricsServerError";
}

export type MetricsServer = {
  /** `http://host:port` */
  url: string;
  close(): Promise<void>;
};

/**
 * @example
 * const server = await startMetricsServer(metrics.registry, { host: "127.0.0.1", port: 9464 }, logger);
 * // curl http://127.0.0.1:9464/metrics
 * await server.close();
 */
export async function startMetricsServer(
  registry: Registry,
  options: { host: string; port: number; connections?: ConnectionLimits | undefined },
  logger: Logger,
): Promise<MetricsServer> {
  const limits = options.connections ?? METRICS_CONNECTION_DEFAULTS;
  const server: Server = createServer(httpServerOptions(limits), (req, res) => {
    const url = (req.url ?? "/").split("?")[0];
    if (url !== "/metrics" || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(404, { "content-type": "text/plain" }).end("Not found: the metrics are at /metrics\n");
      return;
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { "content-type": registry.contentType });
        res.end(req.method === "HEAD" ? undefined : text);
      },
      (error: unknown) => {
        logger.warn("Cannot collect metrics", {}, error);
        res.writeHead(500, { "content-type": "text/plain" }).end("metrics collection failed\n");
      },
    );
  });
  limitConnections(server, limits, { perAddress: true });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        new MetricsServerError(`Cannot serve metrics on ${options.host}:${options.port}: ${error.code ?? error.message}`, {
          cause: error,
          metaMessages: ["Choose another metrics.port, or 0 for any free port."],
        }),
      ),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  logger.info("Metrics served", { url: `${url}/metrics` });
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
