/**
 * Lints the node's OpenAPI document with Redocly CLI's recommended rules, offline: the CLI runs
 * with its telemetry and update check off and with every outgoing connection refused
 * (scripts/no-network.mjs), and a connection it tries counts as a failure.
 *
 * `npx tsx scripts/lint-openapi.ts` lints the document of an API server over a small in-memory
 * market (the same document every node serves); test/node/api-openapi-lint.test.ts runs it too.
 */
import { execFile } from "node:child_process";
import { copyFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

export type OpenApiLintResult = {
  /** Redocly's exit status: 0 when no error was found. */
  exitCode: number;
  /** What Redocly printed (stylish format). */
  output: string;
  /** Connections or DNS lookups the CLI tried (and was refused). */
  networkAttempts: string[];
};

/** Runs `redocly lint` on `document` with scripts/openapi-lint/redocly.yaml (recommended rules) and its ignore file. */
export async function lintOpenApi(document: unknown): Promise<OpenApiLintResult> {
  const dir = await mkdtemp(path.join(tmpdir(), "suanli-openapi-lint-"));
  try {
    await writeFile(path.join(dir, "openapi.json"), JSON.stringify(document, null, 2));
    await copyFile(path.join(here, "openapi-lint/redocly.yaml"), path.join(dir, "redocly.yaml"));
    await copyFile(path.join(here, "openapi-lint/.redocly.lint-ignore.yaml"), path.join(dir, ".redocly.lint-ignore.yaml"));
    const cli = path.join(path.dirname(require.resolve("@redocly/cli/package.json")), "bin/cli.js");
    const args = ["--import", pathToFileURL(path.join(here, "no-network.mjs")).href, cli, "lint", "openapi.json", "--config", "redocly.yaml", "--format", "stylish"];
    const env = { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1", FORCE_COLOR: "0" };
    const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, args, { cwd: dir, env, timeout: 120_000 }, (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      });
    });
    const output = `${stdout}${stderr}`;
    const networkAttempts = [...output.matchAll(/^NETWORK ATTEMPT (.+)$/gm)].map((match) => match[1]!);
    return { exitCode: code, output, networkAttempts };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { startApiFixture } = await import("../test/support/api-fixture.js");
  const fixture = await startApiFixture();
  const response = await fixture.api.app.inject({ method: "GET", url: "/openapi.json" });
  await fixture.close();
  const result = await lintOpenApi(response.json());
  process.stdout.write(result.output);
  if (result.networkAttempts.length > 0) process.stderr.write(`Redocly tried to reach the network: ${result.networkAttempts.join(", ")}\n`);
  process.exitCode = result.exitCode === 0 && result.networkAttempts.length === 0 ? 0 : 1;
}
