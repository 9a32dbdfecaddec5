/**
 * The TypeScript code blocks of README.md and docs/*.md compile against the real exports
 * (issue #22): every ```ts block is type-checked as a module at the repository root, so an import
 * of a name that does not exist, a wrong parameter or a wrong property fails here.
 *
 * Snippets are excerpts: the values they take from the surrounding prose (`client`, `bundleUrl`,
 * `taskId`...) are not declared in them, so "Cannot find name" (and what follows from it: a
 * shorthand property of such a name, an untyped callback passed to one) is tolerated. Signature
 * sketches that are not code are fenced as `text`.
 * Browser snippets use an injected wallet: `window.ethereum` is declared for them.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Diagnostics a snippet may have because it is an excerpt (see above). */
const TOLERATED = new Set([
  2304, // Cannot find name 'x'.
  2552, // Cannot find name 'x'. Did you mean 'y'?
  18004, // No value exists in scope for the shorthand property 'x' (a value from the prose).
  7006, // Parameter 'x' implicitly has an 'any' type: a callback passed to a name from the prose.
]);

const PRELUDE = "declare global { interface Window { ethereum: { request(args: { method: string }): Promise<any> } } }\n";

type Snippet = { file: string; line: number; code: string; virtualPath: string };

function snippets(): Snippet[] {
  const files = [
    "README.md",
    ...readdirSync(path.join(root, "docs"))
      .filter((name) => name.endsWith(".md"))
      .map((name) => `docs/${name}`),
  ];
  const out: Snippet[] = [];
  for (const file of files) {
    const text = readFileSync(path.join(root, file), "utf8");
    for (const match of text.matchAll(/^```(?:ts|typescript)\n([\s\S]*?)^```/gm)) {
      const line = text.slice(0, match.index).split("\n").length + 1;
      const virtualPath = path.join(root, `__doc_${file.replace(/[^A-Za-z0-9]/g, "_")}_${line}.ts`);
      out.push({ file, line, code: match[1]!, virtualPath });
    }
  }
  return out;
}

describe("TypeScript in the docs type-checks against the real exports (issue #22)", function () {
  this.timeout(120_000);

  it("every ts block of README.md and docs/*.md compiles (only names taken from the prose may be missing)", () => {
    const found = snippets();
    assert.ok(found.length >= 5, `expected the docs' TypeScript blocks, found ${found.length}`);
    const config = ts.getParsedCommandLineOfConfigFile(path.join(root, "tsconfig.json"), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined })!;
    const sources = new Map(found.map((snippet) => [snippet.virtualPath, `${PRELUDE}${snippet.code}\nexport {};\n`]));
    const host = ts.createCompilerHost(config.options);
    const getSourceFile = host.getSourceFile.bind(host);
    host.getSourceFile = (fileName, languageVersion, onError, shouldCreate) => {
      const text = sources.get(path.resolve(fileName));
      return text !== undefined ? ts.createSourceFile(fileName, text, languageVersion, true) : getSourceFile(fileName, languageVersion, onError, shouldCreate);
    };
    const fileExists = host.fileExists.bind(host);
    host.fileExists = (fileName) => sources.has(path.resolve(fileName)) || fileExists(fileName);
    const readFile = host.readFile.bind(host);
    host.readFile = (fileName) => sources.get(path.resolve(fileName)) ?? readFile(fileName);

    const program = ts.createProgram({ rootNames: [...sources.keys()], options: { ...config.options, noEmit: true, noUnusedLocals: false }, host });
    const problems: string[] = [];
    for (const snippet of found) {
      const source = program.getSourceFile(snippet.virtualPath)!;
      const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
      for (const diagnostic of diagnostics) {
        if (TOLERATED.has(diagnostic.code)) continue;
        const { line } = diagnostic.start !== undefined ? source.getLineAndCharacterOfPosition(diagnostic.start) : { line: 0 };
        // The prelude is one line; the snippet's first line follows the fence.
        problems.push(`${snippet.file}:${snippet.line + line - 1}: TS${diagnostic.code} ${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`);
      }
    }
    assert.deepEqual(problems, [], `TypeScript errors in the docs:\n${problems.join("\n")}`);
  });
});
