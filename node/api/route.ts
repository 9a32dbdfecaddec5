/**
 * One table of routes is both what the server registers and what the OpenAPI document describes,
 * so the two cannot drift. A route names its zod schemas; the server validates with them and the
 * document is generated from them.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";

export type HttpMethod = "GET" | "POST" | "DELETE";

export type ResponseSpec = {
  description: string;
  /** JSON body schema (a registered component, see openapi.ts), or a non-JSON media type. */
  schema?: z.ZodType;
  contentType?: string;
  /** Several non-JSON media types the body may come in (which one: see the headers). */
  contentTypes?: string[];
  /**
   * For `text/event-stream`: the schema of each event's JSON data, by event name (registered
   * components). Documentation only: the stream is written by its handler.
   */
  events?: Record<string, z.ZodType>;
  /** Response headers worth documenting (name → description). */
  headers?: Record<string, string>;
};

type AnyObject = z.ZodType<Record<string, unknown>, Record<string, unknown>>;

export type RouteContext<Q extends AnyObject | undefined, P extends AnyObject | undefined, B extends z.ZodType | undefined> = {
  query: Q extends z.ZodType ? z.output<Q> : undefined;
  params: P extends z.ZodType ? z.output<P> : undefined;
  body: B extends z.ZodType ? z.output<B> : undefined;
  /** The body as the client sent it, before validation (what a relay forwards unchanged). */
  rawBody: unknown;
  request: FastifyRequest;
  reply: FastifyReply;
};

export type RouteSpec<
  Q extends AnyObject | undefined = AnyObject | undefined,
  P extends AnyObject | undefined = AnyObject | undefined,
  B extends z.ZodType | undefined = z.ZodType | undefined,
> = {
  method: HttpMethod;
  /** fastify path syntax (`/v1/offers/:key`); the document shows `{key}`. */
  url: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  querystring?: Q;
  params?: P;
  body?: B;
  /**
   * The body is not JSON but a stream the handler reads itself (media type → description): the
   * handler gets the request stream as `body`, unparsed and unvalidated, not capped by api.maxBodyBytes.
   */
  streamBody?: Record<string, string>;
  responses: Record<number, ResponseSpec>;
  /** `write`: the stricter per-client limit; `none`: not rate-limited (Prometheus scrapes). */
  rateLimit?: "default" | "write" | "none";
  /**
   * Returns the 200 body (encoded with responses[200].schema), or sends the reply itself and
   * returns the reply.
   */
  handler: (context: RouteContext<Q, P, B>) => Promise<unknown>;
};

/** Declares a route with its types inferred from the schemas. */
export function defineRoute<Q extends AnyObject | undefined = undefined, P extends AnyObject | undefined = undefined, B extends z.ZodType | undefined = undefined>(
  spec: RouteSpec<Q, P, B>,
): RouteSpec {
  return spec as unknown as RouteSpec;
}

/** `/v1/offers/:key` → `/v1/offers/{key}`. */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
}
