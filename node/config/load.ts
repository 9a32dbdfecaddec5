import { readFile } from "node:fs/promises";
import path from "node:path";
import type { z } from "zod";
import { SuanliError } from "../../common/errors.js";
import { describeIssues, objectShape, schemaAt, schemaKind } from "../../common/validation.js";

/** A configuration value was missing, of the wrong type, or unknown. Names the key and its source. */
export class ConfigError extends SuanliError {
  override name = "ConfigError";
  /** Dotted keys that were wrong (`p2p.listen`, `log.level`). */
  readonly keys: string[];
  constructor(shortMessage: string, keys: string[], metaMessages?: string[]) {
    super(shortMessage, { metaMessages });
    this.keys = keys;
  }
}

export type ConfigSources = {
  /** Path of a JSON config file. */
  file?: string | undefined;
  /** Environment (defaults to none; pass process.env to read it). Keys: `SUANLI_<KEY>__<SUBKEY>`. */
  env?: Record<string, string | undefined> | undefined;
  /** Flags as dotted keys (`{"p2p.listen": "/ip4/127.0.0.1/tcp/0"}`), the strongest source. */
  flags?: Record<string, unknown> | undefined;
  /** Values beneath everything else (programmatic defaults such as a computed data dir). */
  base?: Record<string, unknown> | undefined;
};

const ENV_PREFIX = "SUANLI_";

/** `rpcUrl` -> `RPC_URL`; path segments joined by `__`: chain.rpcUrl -> SUANLI_CHAIN__RPC_URL. */
export function envNameFor(keyPath: readonly string[]): string {
  return ENV_PREFIX + keyPath.map((key) => key.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase()).join("__");
}

/** Every leaf key path of an object schema (objects are walked, anything else is a leaf). */
export function leafPaths(schema: z.ZodType, prefix: string[] = []): string[][] {
  const shape = objectShape(schema);
  if (!shape) return [prefix];
  const out: string[][] = [];
  for (const [key, child] of Object.entries(shape)) out.push(...leafPaths(child, [...prefix, key]));
  return out;
}

/** Turns a string from the environment or a flag into the type the schema expects at that key. */
function coerce(schema: z.ZodType, raw: unknown): unknown {
  if (typeof raw !== "string") return raw;
  const kind = schemaKind(schema);
  const text = raw.trim();
  switch (kind) {
    case "number":
    case "int": {
      const n = Number(text);
      return text !== "" && Number.isFinite(n) ? n : raw;
    }
    case "bigint":
      return /^-?\d+$/.test(text) ? BigInt(text) : raw;
    case "boolean":
      if (["true", "1", "yes", "on"].includes(text.toLowerCase())) return true;
      if (["false", "0", "no", "off"].includes(text.toLowerCase())) return false;
      return raw;
    case "array":
      if (text.startsWith("[")) return tryJson(text) ?? raw;
      return text === "" ? [] : text.split(",").map((part) => part.trim());
    case "object":
    case "record":
      return tryJson(text) ?? raw;
    default:
      return raw;
  }
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function setAt(target: Record<string, unknown>, keyPath: readonly string[], value: unknown): void {
  let node = target;
  for (const key of keyPath.slice(0, -1)) {
    const next = node[key];
    if (next === null || typeof next !== "object" || Array.isArray(next)) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  const last = keyPath[keyPath.length - 1];
  if (last === undefined) throw new Error("setAt needs a non-empty key path");
  node[last] = value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    out[key] = isPlainObject(value) && isPlainObject(out[key]) ? deepMerge(out[key] as Record<string, unknown>, value) : value;
  }
  return out;
}

/** Records where each dotted key's value came from, so errors can name the source. */
function recordOrigins(value: unknown, prefix: string[], origin: string, into: Map<string, string>): void {
  if (isPlainObject(value)) {
    for (const [key, child] of Object.entries(value)) recordOrigins(child, [...prefix, key], origin, into);
  } else {
    into.set(prefix.join("."), origin);
  }
}

/**
 * Loads a configuration from (weakest first) base values, a JSON file, the environment and
 * flags; validates the merged result with `schema` (strict objects: unknown keys are errors).
 * Throws ConfigError naming each bad key, where its value came from and what is accepted.
 *
 * @example
 * const config = await loadConfig(nodeConfigSchema, { file: "provider.json", env: process.env, flags: { "log.level": "debug" } });
 */
export async function loadConfig<S extends z.ZodType>(schema: S, sources: ConfigSources): Promise<z.output<S>> {
  const origins = new Map<string, string>();
  let merged: Record<string, unknown> = {};

  if (sources.base) merged = deepMerge(merged, sources.base);

  if (sources.file) {
    const file = path.resolve(sources.file);
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (error) {
      throw new ConfigError(`Cannot read config file ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, [], ["Pass --config with the path of a JSON file."]);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      throw new ConfigError(`Config file ${file} is not valid JSON: ${(error as Error).message}`, []);
    }
    if (!isPlainObject(parsed)) throw new ConfigError(`Config file ${file} must hold a JSON object at the top level`, []);
    recordOrigins(parsed, [], `file ${file}`, origins);
    merged = deepMerge(merged, parsed);
  }

  if (sources.env) {
    for (const keyPath of leafPaths(schema)) {
      const name = envNameFor(keyPath);
      const raw = sources.env[name];
      if (raw === undefined) continue;
      const leaf = schemaAt(schema, keyPath);
      setAt(merged, keyPath, leaf ? coerce(leaf, raw) : raw);
      origins.set(keyPath.join("."), `environment ${name}`);
    }
  }

  if (sources.flags) {
    for (const [dotted, raw] of Object.entries(sources.flags)) {
      if (raw === undefined) continue;
      const keyPath = dotted.split(".");
      const leaf = schemaAt(schema, keyPath);
      if (!leaf) {
        const accepted = leafPaths(schema).map((p) => `--${p.join(".")}`);
        throw new ConfigError(`Unknown config flag --${dotted}`, [dotted], [`Accepted: ${accepted.join(", ")}`]);
      }
      setAt(merged, keyPath, coerce(leaf, raw));
      origins.set(dotted, `flag --${dotted}`);
    }
  }

  const result = schema.safeParse(merged);
  if (result.success) return result.data as z.output<S>;
  const issues = describeIssues(schema, result.error);
  const lines = issues.map((issue) => {
    const origin = origins.get(issue.path);
    return `${issue.path || "(root)"}: ${issue.message}${origin ? ` (from ${origin})` : ""}`;
  });
  throw new ConfigError(
    `Invalid configuration: ${lines.join("; ")}`,
    issues.map((issue) => issue.path),
    ["Every key, its type and its default are listed in docs/configuration.md."],
  );
}
