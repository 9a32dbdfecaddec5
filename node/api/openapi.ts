/**
 * The OpenAPI 3.1 document, generated from the route table and the same zod schemas the server
 * validates with. JSON Schema comes from zod's own `z.toJSONSchema` on the wire side of each schema
 * (`io: "input"`): amounts are zod codecs whose wire form is a decimal string.
 *
 * (fastify-type-provider-zod + @fastify/swagger were tried: the bridge documents responses from
 * the output side of a schema, which for codecs is a bigint and comes out as an empty schema.)
 */
import { templateCatalogSchema } from "../../common/templates/catalog.js";
import { z } from "zod";
import { leasePageSchema, leaseViewSchema, machinePageSchema, machineViewSchema, providerPageSchema, providerViewSchema } from "../../common/api/chain.js";
import { offerRemovedEventSchema, resetEventSchema } from "../../common/api/events.js";
import {
  apiErrorSchema,
  healthSchema,
  marketStatsSchema,
  matchRequestSchema,
  matchResultSchema,
  nodeInfoSchema,
  reservationAnswerSchema,
  reservationBodySchema,
} from "../../common/api/market.js";
import { offerPageSchema, offerViewSchema } from "../../common/api/offers.js";
import { dataEntrySchema, dataListSchema, dataPinBodySchema, dataRemovedSchema } from "../../common/api/data.js";
import {
  cancelRelayAnswerSchema,
  cancelRelayBodySchema,
  logsRelayAnswerSchema,
  logsRelayBodySchema,
  renterAuthApiSchema,
  statusRelayAnswerSchema,
  statusRelayBodySchema,
  outputAuthApiSchema,
  outputListRelayBodySchema,
  outputManifestApiSchema,
  outputReadRelayBodySchema,
  taskRelayAnswerSchema,
  taskRelayBodySchema,
} from "../../common/api/relay.js";
import { openApiPath, type RouteSpec } from "./route.js";

type Json = Record<string, unknown>;

/** Schemas documented once under components/schemas and referenced by name. */
export const apiComponents = z.registry<{ id: string }>();
const named: [z.ZodType, string][] = [
  [offerViewSchema, "Offer"],
  [offerPageSchema, "OfferPage"],
  [providerViewSchema, "Provider"],
  [providerPageSchema, "ProviderPage"],
  [machineViewSchema, "Machine"],
  [machinePageSchema, "MachinePage"],
  [leaseViewSchema, "Lease"],
  [leasePageSchema, "LeasePage"],
  [marketStatsSchema, "MarketStats"],
  [matchRequestSchema, "MatchRequest"],
  [matchResultSchema, "MatchResult"],
  [reservationBodySchema, "ReservationRequest"],
  [reservationAnswerSchema, "ReservationAnswer"],
  [healthSchema, "Health"],
  [nodeInfoSchema, "NodeInfo"],
  [apiErrorSchema, "Error"],
  [offerRemovedEventSchema, "OfferRemovedEvent"],
  [resetEventSchema, "ResetEvent"],
  [renterAuthApiSchema, "RenterAuth"],
  [taskRelayBodySchema, "TaskRequest"],
  [taskRelayAnswerSchema, "TaskAnswer"],
  [statusRelayBodySchema, "StatusRequest"],
  [statusRelayAnswerSchema, "TaskStatus"],
  [logsRelayBodySchema, "LogsRequest"],
  [logsRelayAnswerSchema, "LogsAnswer"],
  [cancelRelayBodySchema, "CancelRequest"],
  [cancelRelayAnswerSchema, "CancelAnswer"],
  [outputAuthApiSchema, "OutputAuth"],
  [outputListRelayBodySchema, "OutputListRequest"],
  [outputReadRelayBodySchema, "OutputReadRequest"],
  [outputManifestApiSchema, "OutputManifest"],
  [dataEntrySchema, "DataEntry"],
  [dataListSchema, "DataList"],
  [dataRemovedSchema, "DataRemoved"],
  [dataPinBodySchema, "DataPinRequest"],
  [templateCatalogSchema, "TemplateCatalog"],
];
for (const [schema, id] of named) apiComponents.add(schema, { id });

const REF_PREFIX = "#/components/schemas/";

function stripIdentity(schema: Json): Json {
  const { $schema: _schema, $id: _id, ...rest } = schema;
  return rest;
}

function jsonSchema(schema: z.ZodType): Json {
  const id = apiComponents.get(schema)?.id;
  if (id) return { $ref: `${REF_PREFIX}${id}` };
  return stripIdentity(z.toJSONSchema(schema, { io: "input", target: "draft-2020-12", unrepresentable: "throw" }) as Json);
}

function parameters(schema: z.ZodType | undefined, where: "query" | "path"): Json[] {
  if (!schema) return [];
  const object = z.toJSONSchema(schema, { io: "input", target: "draft-2020-12", unrepresentable: "throw" }) as {
    properties?: Record<string, Json>;
    required?: string[];
  };
  return Object.entries(object.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    return {
      name,
      in: where,
      required: where === "path" || (object.required ?? []).includes(name),
      ...(description ? { description } : {}),
      schema: rest,
    };
  });
}

export type OpenApiInfo = { title: string; version: string; description: string };

/** What each tag groups, shown by documentation viewers; a route with a tag not listed here is a build error. */
export const API_TAGS: Record<string, string> = {
  node: "This node: identity, health, metrics and this document",
  offers: "Live, validated GPU offers from the peer-to-peer network",
  providers: "Provider and machine records read from the ProviderRegistry contract",
  leases: "Leases read from the LeaseMarket contract, and renters' signed requests relayed to their providers",
  market: "Market statistics, matching (dry run) and reservations",
  events: "Server-sent events: live offer and lease changes",
  explorer: "The explorer web page and its assets",
  data: "Content-addressed data this node holds (add, list, remove, get); only for clients on the node's own machine",
  console: "The renter console web page (the visitor's own wallet submits and watches tasks through the browser SDK) and its assets",
};

export function buildOpenApiDocument(routes: readonly RouteSpec[], info: OpenApiInfo): Json {
  const paths: Record<string, Record<string, Json>> = {};
  for (const route of routes) {
    const responses: Record<string, Json> = {};
    for (const [code, response] of Object.entries(route.responses)) {
      const entry: Json = { description: response.description };
      if (response.events) {
        // OpenAPI 3.1 has no keyword for the items of a stream (3.2's itemSchema): the schema is
        // the union of the events' data, and the description maps event names to components.
        const events = Object.entries(response.events).map(([name, schema]) => ({ name, schema: jsonSchema(schema) }));
        const names = events.map(({ name, schema }) => `\`${name}\`: ${String(schema.$ref ?? "").replace(REF_PREFIX, "") || "inline"}`).join(", ");
        entry.content = {
          [response.contentType ?? "text/event-stream"]: {
            schema: { description: `The JSON \`data\` of each event, by event name: ${names}.`, oneOf: events.map(({ schema }) => schema) },
          },
        };
      } else if (response.schema) entry.content = { [response.contentType ?? "application/json"]: { schema: jsonSchema(response.schema) } };
      else if (response.contentType) entry.content = { [response.contentType]: { schema: { type: "string" } } };
      else if (response.contentTypes) entry.content = Object.fromEntries(response.contentTypes.map((type) => [type, { schema: { type: "string", contentMediaType: type } }]));
      if (response.headers) {
        entry.headers = Object.fromEntries(Object.entries(response.headers).map(([name, description]) => [name, { description, schema: { type: "string" } }]));
      }
      responses[code] = entry;
    }
    const operation: Json = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: [route.tag],
      parameters: [...parameters(route.params, "path"), ...parameters(route.querystring, "query")],
      responses,
    };
    if (route.body) operation.requestBody = { required: true, content: { "application/json": { schema: jsonSchema(route.body) } } };
    if (route.streamBody) {
      operation.requestBody = {
        required: true,
        content: Object.fromEntries(Object.entries(route.streamBody).map(([type, description]) => [type, { schema: { type: "string", contentMediaType: type, description } }])),
      };
    }
    const path = openApiPath(route.url);
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation };
  }

  const components = z.toJSONSchema(apiComponents, {
    io: "input",
    target: "draft-2020-12",
    unrepresentable: "throw",
    uri: (id) => `${REF_PREFIX}${id}`,
  }) as { schemas: Record<string, Json> };
  const schemas = Object.fromEntries(Object.entries(components.schemas).map(([id, schema]) => [id, stripIdentity(schema)]));

  const tags = [...new Set(routes.map((route) => route.tag))].map((name) => {
    const description = API_TAGS[name];
    if (!description) throw new Error(`OpenAPI tag "${name}" has no description: add it to API_TAGS (node/api/openapi.ts)`);
    return { name, description };
  });

  return {
    openapi: "3.1.0",
    info: { ...info, license: { name: "Apache-2.0", identifier: "Apache-2.0" } },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    // Relative: the document is served by the node it describes, at whatever address (or proxy) the client used.
    servers: [{ url: "/", description: "The node that serves this document" }],
    // No HTTP-level authentication: reads are public, and renters' requests carry an EIP-712
    // signature in their body (RenterAuth) that the node checks against the chain.
    security: [],
    tags,
    paths,
    components: { schemas },
  };
}
