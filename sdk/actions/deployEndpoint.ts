/**
 * deployEndpoint (issue 37, docs/endpoints.md "Autoscaling"): an endpoint whose replicas the SDK
 * rents and releases by load. The parameters are checked here, all of them before anything is
 * rented; the loop itself is sdk/internal/autoscaler.ts.
 */
import { z } from "zod";
import { usdSchema, perHour, formatUsd } from "../../common/matching/money.js";
import { findTemplate } from "../../common/templates/catalog.js";
import { InvalidInputError } from "../../common/errors.js";
import { SESSION_MAX_SECONDS } from "../../common/sessions.js";
import { parseInput } from "../../common/validation.js";
import type { SuanliContext } from "../internal/context.js";
import { Autoscaler, type AutoscalerEvent, type AutoscaledReplica } from "../internal/autoscaler.js";
import type { SubmitTaskParameters } from "../types.js";
import { parseSubmitParameters } from "./submitTask.js";
import { templateTask } from "./templates.js";

export type { AutoscalerEvent, AutoscaledReplica };

const deploySchema = z
  .strictObject({
    /** The gateway's base URL (its `gateway.publicUrl`). */
    gatewayUrl: z.string().url(),
    /** A catalog template (docs/templates.md): its image, command, ports, environment and health path; `task` adds the GPU type, duration and price. */
    template: z.string().min(1).optional(),
    /** One replica's submitTask parameters (with a template: added over the template's). */
    task: z.custom<Partial<SubmitTaskParameters>>((value) => typeof value === "object" && value !== null && !Array.isArray(value), "expected submitTask's parameters (an object)"),
    /** The task's port the endpoint serves (default: the template's first port, or the task's only one). */
    port: z.number().int().min(1).max(65_535).optional(),
    /** The path the gateway checks on each replica (default: the template's; none without one). Recommended: a replica joins the endpoint as soon as it is rented. */
    healthPath: z.string().max(256).optional(),
    /** Anyone may call it (default false: bearers of tokens of the current endpoint id). */
    public: z.boolean().default(false),
    /** How many replicas (leases) serve it: `{ min, max }`. */
    replicas: z
      .strictObject({
        /** Replicas always kept (at least 1): rented at the start, and again when one ends (preempted, faulted, out of time). */
        min: z.number().int().min(1).max(64),
        /** Replicas at most (the record's limit is 64). */
        max: z.number().int().min(1).max(64),
      })
      .refine((value) => value.min <= value.max, { message: "min must not be greater than max", path: ["min"] }),
    /** When to add and release replicas: the target of requests in flight per replica, and how long the load must stay low before one is released. */
    scale: z.strictObject({
      /** Requests in flight per replica the loop aims at: it adds one while the load per replica is above this. */
      targetConcurrency: z.number().positive({ error: "must be greater than 0 (requests in flight per replica)" }),
      /** How long the load must stay low enough for one replica fewer before one is released. */
      scaleDownAfterSeconds: z.number().nonnegative(),
      /** How long the load must stay above target before one is added (default 0: the first sample above). */
      scaleUpAfterSeconds: z.number().nonnegative().default(0),
      /** How often the loop reads the gateway's stats, ms (default 2,000; at least 100). */
      intervalMs: z.number().int().min(100).default(2000),
      /** How long a superseded record may keep serving its requests in flight before it is deleted and its released lease closed, ms (default 30,000). */
      drainMs: z.number().int().nonnegative().default(30_000),
    }),
    /** The spend cap, USD per hour over every replica (a new replica counted at its price cap): a replica that would pass it is not rented. */
    maxSpendPerHour: usdSchema({ max: 10n ** 18n, what: "the spend per hour" }),
    /** Seconds each endpoint record is served (default a day, at most a week). */
    ttlSeconds: z
      .number()
      .int()
      .min(60)
      .max(SESSION_MAX_SECONDS)
      .default(24 * 3600),
    /** Told of each change: replicas added and removed, records registered, a replica refused by the spend cap, a failed step. */
    onEvent: z.custom<(event: AutoscalerEvent) => void>((value) => typeof value === "function", "expected a function").optional(),
  })
  .refine((value) => value.template !== undefined || value.task.image !== undefined || value.task.bundleUrl !== undefined || value.task.imageUrl !== undefined, {
    message: "give a template, or the task's image (task.image, task.imageUrl) or bundle (task.bundleUrl)",
    path: ["template"],
  });

/**
 * What deployEndpoint takes.
 *
 * @example
 * import type { DeployEndpointParameters } from "suanli/sdk";
 * const options: DeployEndpointParameters = {
 *   gatewayUrl: "https://gw.example", template: "vllm-openai",
 *   task: { gpuType: "A100", duration: 3600, interruptible: true, bidPerGpuHour: "0.90" },
 *   replicas: { min: 1, max: 4 }, scale: { targetConcurrency: 8, scaleDownAfterSeconds: 120 }, maxSpendPerHour: "4", public: true,
 * };
 */
export type DeployEndpointParameters = z.input<typeof deploySchema>;

/**
 * The running autoscaler: the current record's id and URL (both change with each change of the
 * replica set: each is a new signed record), the replicas, and `stop`.
 *
 * @example
 * import type { DeployedEndpoint } from "suanli/sdk";
 * const deployed: DeployedEndpoint = await client.deployEndpoint(options);
 * console.log(deployed.url, deployed.replicas().length);
 * await deployed.stop(); // deletes the record and closes every lease it rented
 */
export type DeployedEndpoint = {
  readonly endpointId: string;
  readonly url: string;
  /** The replicas in the current record, oldest first. */
  replicas(): AutoscaledReplica[];
  /**
   * Stops the loop, deletes its records at the gateway and (default) closes every lease it rented,
   * refunding what they did not use; `{ closeLeases: false }` leaves the leases running (their
   * tasks go on until their time ends, `client.cancel(taskId)` closes them).
   */
  stop(options?: { closeLeases?: boolean }): Promise<void>;
};

/**
 * Serves a program from replicas the SDK rents and releases by load (docs/endpoints.md
 * "Autoscaling"): rents `replicas.min` leases, registers a signed endpoint record over them at the
 * gateway, then every `scale.intervalMs` reads the gateway's stats (requests in flight per
 * replica): above `targetConcurrency` it rents one more (up to `max`, within `maxSpendPerHour`);
 * when one fewer would do for `scaleDownAfterSeconds` it takes one out of a new record, lets its
 * requests finish and closes its lease (billed to the second, the rest refunded). A replica whose
 * lease ends (preempted, faulted, out of time) leaves the record, and one is rented in its place
 * while below `min`. Every parameter is checked before anything is rented (InvalidInputError).
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const deployed = await client.deployEndpoint({
 *   gatewayUrl: "https://gw.example", template: "vllm-openai", public: true,
 *   task: { gpuType: "A100", duration: 3600, interruptible: true, bidPerGpuHour: "0.90" },
 *   replicas: { min: 1, max: 4 }, scale: { targetConcurrency: 8, scaleDownAfterSeconds: 120 }, maxSpendPerHour: "4",
 *   onEvent: (event) => console.log(event.type, event),
 * });
 * console.log(`serving at ${deployed.url}`);
 */
export async function deployEndpoint(ctx: SuanliContext, parameters: DeployEndpointParameters): Promise<DeployedEndpoint> {
  const options = parseInput(deploySchema, parameters, "deployEndpoint parameters");
  const template = options.template === undefined ? undefined : findTemplate(options.template);
  const task = { ...(template ? templateTask(template.name).parameters : {}), ...options.task } as SubmitTaskParameters;
  // The task's parameters as submitTask checks them: a bad one is refused here, before any lease.
  const { request, spec } = parseSubmitParameters(task);
  const ports = spec.ports ?? [];
  const port = options.port ?? template?.ports[0] ?? (ports.length === 1 ? ports[0] : undefined);
  if (port === undefined || !ports.includes(port)) {
    throw new InvalidInputError("deployEndpoint parameters", [
      { path: "port", message: `must be one of the task's ports (task.ports: ${ports.length ? ports.join(", ") : "none declared"})` },
    ]);
  }
  const replicaCap = perHour(request.interruptible ? request.bidPerUnitSecond! : request.maxPricePerUnitSecond) * BigInt(request.gpuCount);
  if (replicaCap * BigInt(options.replicas.min) > options.maxSpendPerHour) {
    throw new InvalidInputError("deployEndpoint parameters", [
      {
        path: "maxSpendPerHour",
        message: `${formatUsd(options.maxSpendPerHour)} USD/h cannot pay for ${options.replicas.min} replica(s) of up to ${formatUsd(replicaCap)} USD/h each (replicas.min at the task's price cap)`,
      },
    ]);
  }
  const autoscaler = new Autoscaler(ctx, {
    gatewayUrl: options.gatewayUrl,
    task,
    port,
    healthPath: options.healthPath ?? template?.healthPath ?? "",
    public: options.public,
    ttlSeconds: options.ttlSeconds,
    min: options.replicas.min,
    max: options.replicas.max,
    targetConcurrency: options.scale.targetConcurrency,
    scaleUpAfterMs: options.scale.scaleUpAfterSeconds * 1000,
    scaleDownAfterMs: options.scale.scaleDownAfterSeconds * 1000,
    intervalMs: options.scale.intervalMs,
    drainMs: options.scale.drainMs,
    maxSpendPerHour: options.maxSpendPerHour,
    replicaCapPerHour: replicaCap,
    onEvent: options.onEvent,
  });
  await autoscaler.start();
  return {
    get endpointId() {
      return autoscaler.current.endpointId;
    },
    get url() {
      return autoscaler.current.url;
    },
    replicas: () => autoscaler.replicas(),
    stop: (stopOptions) => autoscaler.stop(stopOptions?.closeLeases ?? true),
  };
}
