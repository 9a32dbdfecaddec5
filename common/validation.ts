import type { z } from "zod";
import { InvalidInputError } from "./errors.js";

type AnySchema = z.ZodType;
type Def = { type: string; shape?: Record<string, AnySchema>; innerType?: AnySchema; in?: AnySchema; element?: AnySchema; options?: AnySchema[] };

function defOf(schema: AnySchema): Def {
  return (schema as unknown as { _zod: { def: Def } })._zod.def;
}

/** Strips wrappers (optional, default, nullable, pipe...) down to the schema that holds the data. */
export function unwrapSchema(schema: AnySchema): AnySchema {
  let current = schema;
  for (let i = 0; i < 16; i++) {
    const def = defOf(current);
    if (def.innerType) current = def.innerType;
    else if (def.type === "pipe" && def.in) current = def.in;
    else break;
  }
  return current;
}

/** The base type name of a schema after unwrapping: "object", "number", "array", ... */
export function schemaKind(schema: AnySchema): string {
  return defOf(unwrapSchema(schema)).type;
}

/** The object shape of a schema (after unwrapping), or undefined if it is not an object. */
export function objectShape(schema: AnySchema): Record<string, AnySchema> | undefined {
  const def = defOf(unwrapSchema(schema));
  return def.type === "object" ? def.shape : undefined;
}

/** The schema found at a path of keys inside an object schema (array indexes step into elements). */
export function schemaAt(schema: AnySchema, path: readonly PropertyKey[]): AnySchema | undefined {
  let current: AnySchema | undefined = schema;
  for (const key of path) {
    if (!current) return undefined;
    const def = defOf(unwrapSchema(current));
    if (def.type === "object") current = def.shape?.[String(key)];
    else if (def.type === "array") current = def.element;
    else return undefined;
  }
  return current;
}

export type InputIssue = { path: string; message: string };

/**
 * Turns zod issues into one issue per offending key, with dotted paths. Unknown keys are named
 * one by one together with the keys accepted at that level.
 */
export function describeIssues(schema: AnySchema, error: z.ZodError): InputIssue[] {
  const out: InputIssue[] = [];
  for (const issue of error.issues) {
    const base = issue.path.map(String);
    if (issue.code === "unrecognized_keys") {
      const shape = objectShape(schemaAt(schema, issue.path) ?? schema);
      const accepted = shape ? Object.keys(shape).join(", ") : "";
      for (const key of issue.keys) {
        out.push({
          path: [...base, key].join("."),
          message: `unknown key${accepted ? ` (accepted keys here: ${accepted})` : ""}`,
        });
      }
    } else {
      out.push({ path: base.join("."), message: issue.message });
    }
  }
  return out;
}

/**
 * Parses `input` with `schema`; on failure throws an InvalidInputError that names every bad
 * field and says what is accepted. `what` names the input ("task request", "offer message").
 */
export function parseInput<S extends AnySchema>(schema: S, input: unknown, what: string, hints: string[] = []): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data as z.output<S>;
  throw new InvalidInputError(what, describeIssues(schema, result.error), hints);
}
