import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const SDK_ENTRY = path.join(root, "sdk/index.ts");

const options: ts.CompilerOptions = {
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  target: ts.ScriptTarget.ES2022,
  skipLibCheck: true,
  noEmit: true,
  noLib: true,
  types: [],
};

/**
 * A program over `rootFile` and the project files it imports, nothing from node_modules: the
 * docs live in Suanli's own files, and parsing the typings of viem, zod and libp2p (about 900
 * files) would take this test from about a second to ten. Package imports then resolve to
 * nothing, which only turns their types into `any`. `virtualFiles` (absolute path -> text)
 * stand in for files on disk.
 */
function createSdkProgram(rootFile: string, virtualFiles: Record<string, string> = {}): ts.Program {
  const host = ts.createCompilerHost(options);
  const inPackages = (file: string) => file.split(path.sep).includes("node_modules");
  const { fileExists, directoryExists, getSourceFile } = host;
  host.fileExists = (file) => file in virtualFiles || (!inPackages(file) && fileExists.call(host, file));
  const virtualDirs = new Set(Object.keys(virtualFiles).map((file) => path.dirname(file)));
  host.directoryExists = (dir) => virtualDirs.has(dir) || (!inPackages(dir) && (directoryExists ? directoryExists.call(host, dir) : true));
  host.getSourceFile = (file, languageVersion, ...rest) =>
    file in virtualFiles ? ts.createSourceFile(file, virtualFiles[file]!, languageVersion, true) : getSourceFile.call(host, file, languageVersion, ...rest);
  return ts.createProgram({ rootNames: [rootFile], options, host });
}

type ExportDoc = { name: string; file: string; declaration: ts.Declaration | undefined; description: string; example: string | undefined };

/** Every export of `entry`, re-exports resolved to the declaration they name. */
function exportDocs(program: ts.Program, entry: string): ExportDoc[] {
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entry);
  assert.ok(source, `${entry} is not in the program`);
  const moduleSymbol = checker.getSymbolAtLocation(source);
  assert.ok(moduleSymbol, `${entry} has no module symbol`);
  return checker.getExportsOfModule(moduleSymbol).map((exported) => {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    const declaration = symbol.declarations?.[0];
    const example = symbol
      .getJsDocTags(checker)
      .filter((tag) => tag.name === "example")
      .map((tag) => ts.displayPartsToString(tag.text).trim())
      .find((text) => text.length > 0);
    return {
      name: exported.name,
      file: declaration ? path.relative(root, declaration.getSourceFile().fileName) : "(unresolved)",
      declaration,
      description: ts.displayPartsToString(symbol.getDocumentationComment(checker)).trim(),
      example,
    };
  });
}

/** "name (file): what is missing" for each export without a description or an @example. */
function undocumented(docs: ExportDoc[]): string[] {
  const offenders: string[] = [];
  for (const doc of docs) {
    const missing = [!doc.description && "description", !doc.example && "@example"].filter(Boolean);
    if (missing.length) offenders.push(`${doc.name} (${doc.file}): no ${missing.join(", no ")}`);
  }
  return offenders;
}

function hasDocComment(node: ts.Node): boolean {
  return ts.getJSDocCommentsAndTags(node).some((doc) => ts.isJSDoc(doc) && (ts.getTextOfJSDocComment(doc.comment) ?? "").trim().length > 0);
}

/** The object literal given to the first `z.object(...)` / `z.strictObject(...)` under `node`. */
function zodShape(node: ts.Node): ts.ObjectLiteralExpression | undefined {
  if (
    ts.isCallExpression(node) &&
    ts.isPropertyAccessExpression(node.expression) &&
    ["object", "strictObject"].includes(node.expression.name.text) &&
    node.arguments[0] &&
    ts.isObjectLiteralExpression(node.arguments[0])
  ) {
    return node.arguments[0];
  }
  return ts.forEachChild(node, zodShape);
}

/**
 * The fields of a parameters type that carry no doc comment. Handles the two shapes the SDK
 * uses: a type literal, and `z.input<typeof schema>` (the fields of the schema's object). Any
 * other shape is reported, so a new one cannot slip through unchecked.
 */
function undocumentedFields(program: ts.Program, doc: ExportDoc): string[] {
  const checker = program.getTypeChecker();
  const declaration = doc.declaration;
  if (!declaration || !ts.isTypeAliasDeclaration(declaration)) return [`${doc.name}: not a type alias, fields not checked`];
  let fields: readonly (ts.TypeElement | ts.ObjectLiteralElementLike)[] | undefined;
  const type = declaration.type;
  if (ts.isTypeLiteralNode(type)) {
    fields = type.members;
  } else if (ts.isTypeReferenceNode(type) && type.typeArguments?.length === 1 && ts.isTypeQueryNode(type.typeArguments[0]!)) {
    const schema = checker.getSymbolAtLocation(type.typeArguments[0].exprName)?.valueDeclaration;
    const shape = schema && ts.isVariableDeclaration(schema) && schema.initializer ? zodShape(schema.initializer) : undefined;
    fields = shape?.properties;
  }
  if (!fields?.length) return [`${doc.name}: fields not found (neither a type literal nor z.input<typeof schema>)`];
  return fields.filter((field) => !hasDocComment(field)).map((field) => `${doc.name}.${field.name?.getText() ?? "?"}`);
}

describe("SDK docs: every export of sdk/index.ts has a description and an @example", function () {
  this.timeout(30_000);
  let program: ts.Program;
  let docs: ExportDoc[];

  before(() => {
    program = createSdkProgram(SDK_ENTRY);
    docs = exportDocs(program, SDK_ENTRY);
  });

  it("resolves the SDK's exports to their declarations", () => {
    const names = docs.map((doc) => doc.name);
    for (const name of ["createClient", "SuanliClient", "SubmitTaskParameters", "TaskReceipt", "SuanliError", "InvalidInputError", "NoMatchError", "TaskRecord"]) {
      assert.ok(names.includes(name), `${name} missing from the exports found: ${names.join(", ")}`);
    }
    const unresolved = docs.filter((doc) => !doc.declaration).map((doc) => doc.name);
    assert.deepEqual(unresolved, [], `exports that do not resolve to a declaration: ${unresolved.join(", ")}`);
  });

  it('resolves "suanli/sdk", the import path every example uses, to the SDK', async () => {
    const published = (await import("suanli/sdk")) as Record<string, unknown>;
    const local = (await import("../../sdk/index.js")) as Record<string, unknown>;
    assert.deepEqual(Object.keys(published).sort(), Object.keys(local).sort());
    assert.equal(published.createClient, local.createClient);
  });

  it("documents every export with a description and an @example", () => {
    const offenders = undocumented(docs);
    assert.deepEqual(offenders, [], `exports lacking docs:\n  ${offenders.join("\n  ")}`);
  });

  it("documents every field of the exported *Parameters types", () => {
    const parameterTypes = docs.filter((doc) => doc.name.endsWith("Parameters") && doc.declaration && ts.isTypeAliasDeclaration(doc.declaration));
    assert.ok(parameterTypes.length >= 6, `expected the SDK's parameter types, found ${parameterTypes.map((doc) => doc.name).join(", ")}`);
    const offenders = parameterTypes.flatMap((doc) => undocumentedFields(program, doc));
    assert.deepEqual(offenders, [], `fields without a doc comment:\n  ${offenders.join("\n  ")}`);
  });

  it("catches a re-exported declaration without @example, and a field without a doc", () => {
    const dir = path.join(root, "sdk", "__jsdoc_fixture__");
    const entry = path.join(dir, "index.ts");
    const fixture = createSdkProgram(entry, {
      [entry]: 'export { documented, bare, type Options } from "./impl.js";\n',
      [path.join(dir, "impl.ts")]: [
        "/**\n * Documented.\n *\n * @example\n * documented();\n */",
        "export function documented(): void {}",
        "/** Described, but no example. */",
        "export function bare(): void {}",
        "/**\n * Options.\n *\n * @example\n * const o: Options = { a: 1, b: 2 };\n */",
        "export type Options = {\n  /** Documented field. */\n  a: number;\n  b: number;\n};",
      ].join("\n"),
    });
    const fixtureDocs = exportDocs(fixture, entry);
    assert.deepEqual(undocumented(fixtureDocs), ["bare (sdk/__jsdoc_fixture__/impl.ts): no @example"]);
    assert.deepEqual(
      undocumentedFields(
        fixture,
        fixtureDocs.find((doc) => doc.name === "Options")!,
      ),
      ["Options.b"],
    );
  });
});
