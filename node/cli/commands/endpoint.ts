/**
 * `suanli endpoint`: a running task's port served to the world through a gateway
 * (docs/endpoints.md). `create TASK... --port P --gateway URL [--public] [--health-path /health]`
 * (one replica per task) has the wallet sign the
 * endpoint record and the gateway's delegation, registers it, and prints the URL (and a bearer
 * token when it is not public); `token ID` mints another token; `revoke ID TOKEN` and `delete ID`
 * ask the gateway (signed by the wallet); `stats ID` prints its figures.
 */
import type { Command } from "commander";
import { getEndpointStats } from "../../../sdk/index.js";
import { emit } from "../output.js";
import { withClient, withRenterFlags } from "./renter-client.js";
import type { RenterFlags } from "./renter-output.js";
import { FlagProblems } from "../preflight.js";

type EndpointFlags = RenterFlags & { port?: string; gateway?: string; public?: boolean; ttl?: string; tokenTtl?: string; rank?: string; healthPath?: string };

export function registerEndpoint(program: Command): void {
  const endpoint = program.command("endpoint").description("serve a running task's port at a public URL through a gateway node (docs/endpoints.md)");

  withRenterFlags(
    endpoint
      .command("create")
      .description(
        "register an endpoint for a task's port on a gateway and print its URL: suanli endpoint create <taskId> --port 8000 --gateway https://gw.example (several task ids: one replica each)",
      )
      .argument("<taskId...>")
      .requiredOption("--port <port>", "the task's port (one it declared with --port at submit)")
      .requiredOption("--gateway <url>", "the gateway's base URL")
      .option("--public", "anyone may call it (default: only bearers of tokens this command prints)")
      .option("--ttl <seconds>", "how long it is served (default a day, at most a week)")
      .option("--token-ttl <seconds>", "how long the printed token is valid (default: as long as the endpoint)")
      .option("--rank <n>", "a group task's machine (default 0)")
      .option("--health-path <path>", "a path the gateway GETs on each replica to know it is ready (2xx or 3xx), e.g. /health"),
  ).action(async (taskIds: string[], flags: EndpointFlags) => {
    const problems = new FlagProblems();
    const port = problems.number("port", flags.port);
    const ttlSeconds = problems.number("ttl", flags.ttl);
    const tokenTtl = problems.number("token-ttl", flags.tokenTtl);
    const rank = problems.number("rank", flags.rank);
    await withClient(
      flags,
      true,
      async (client) => {
        const created = await client.createEndpoint({
          gatewayUrl: flags.gateway!,
          taskIds,
          port: port!,
          public: Boolean(flags.public),
          ttlSeconds,
          rank,
          healthPath: flags.healthPath,
        });
        const token = flags.public
          ? undefined
          : await client.mintEndpointToken({ endpointId: created.endpointId, ttlSeconds: tokenTtl ?? created.expiresAt - Math.floor(Date.now() / 1000) });
        emit(
          Boolean(flags.json),
          { endpointId: created.endpointId, url: created.url, expiresAt: created.expiresAt, public: Boolean(flags.public), ...(token ? { token: token.token } : {}) },
          () =>
            [
              `Endpoint ${created.endpointId}: ${created.url}`,
              `  served until ${new Date(created.expiresAt * 1000).toISOString()} (port ${port} of task ${taskIds.join(", ")}${taskIds.length > 1 ? `: ${taskIds.length} replicas` : ""})`,
              ...(token ? [`  token (send as "Authorization: Bearer <token>"): ${token.token}`] : ["  public: anyone with the URL may call it"]),
            ].join("\n"),
        );
      },
      problems,
    );
  });

  withRenterFlags(
    endpoint
      .command("token")
      .description("mint a bearer token for an endpoint, signed by the wallet: suanli endpoint token <endpointId>")
      .argument("<endpointId>")
      .option("--ttl <seconds>", "how long it is valid (default a day)"),
  ).action(async (endpointId: string, flags: EndpointFlags) => {
    const problems = new FlagProblems();
    const ttlSeconds = problems.number("ttl", flags.ttl);
    await withClient(
      flags,
      true,
      async (client) => {
        const token = await client.mintEndpointToken({ endpointId, ttlSeconds });
        emit(Boolean(flags.json), token, () => token.token);
      },
      problems,
    );
  });

  withRenterFlags(
    endpoint
      .command("revoke")
      .description("revoke a token of an endpoint at its gateway: suanli endpoint revoke <endpointId> <token> --gateway URL")
      .argument("<endpointId>")
      .argument("<token>")
      .requiredOption("--gateway <url>", "the gateway's base URL"),
  ).action(async (endpointId: string, token: string, flags: EndpointFlags) => {
    await withClient(flags, true, async (client) => {
      await client.revokeEndpointToken({ gatewayUrl: flags.gateway!, endpointId, token });
      emit(Boolean(flags.json), { endpointId, revoked: true }, () => `Token revoked on endpoint ${endpointId}`);
    });
  });

  withRenterFlags(
    endpoint
      .command("delete")
      .description("remove an endpoint from its gateway: suanli endpoint delete <endpointId> --gateway URL")
      .argument("<endpointId>")
      .requiredOption("--gateway <url>", "the gateway's base URL"),
  ).action(async (endpointId: string, flags: EndpointFlags) => {
    await withClient(flags, true, async (client) => {
      await client.deleteEndpoint({ gatewayUrl: flags.gateway!, endpointId });
      emit(Boolean(flags.json), { endpointId, deleted: true }, () => `Endpoint ${endpointId} deleted`);
    });
  });

  endpoint
    .command("stats")
    .description("an endpoint's requests by status, latency and bytes at its gateway: suanli endpoint stats <endpointId> --gateway URL")
    .argument("<endpointId>")
    .requiredOption("--gateway <url>", "the gateway's base URL")
    .option("--json", "print data as one JSON object")
    .action(async (endpointId: string, flags: { gateway: string; json?: boolean }) => {
      const stats = await getEndpointStats(flags.gateway, endpointId);
      const ms = (value: number | null) => (value === null ? "-" : `${value} ms`);
      emit(Boolean(flags.json), stats, () =>
        [
          `Endpoint ${endpointId}: ${stats.requests.total} requests (${
            Object.entries(stats.requests.byStatus)
              .map(([status, count]) => `${status}: ${count}`)
              .join(", ") || "none"
          })`,
          `  latency to the answer's head: p50 ${ms(stats.latencyMs.p50)}, p90 ${ms(stats.latencyMs.p90)}, p99 ${ms(stats.latencyMs.p99)}`,
          `  ${stats.bytesOut} bytes sent back${stats.endsAt === null ? "; no lease runs" : `; its last lease stops at ${new Date(stats.endsAt * 1000).toISOString()}`}`,
          ...stats.replicas.map(
            (replica) =>
              `  replica lease ${replica.leaseId}: ${replica.state}, ${replica.outstanding} in flight, ${replica.requests} requests, ${replica.failures} failures${
                replica.lastCheck ? `, last check ${replica.lastCheck.ok ? "passed" : "failed"} (${replica.lastCheck.detail})` : ""
              }`,
          ),
        ].join("\n"),
      );
    });
}
