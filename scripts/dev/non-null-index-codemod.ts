/**
 * Codemod for `noUncheckedIndexedAccess` in tests: inserts a non-null assertion (`!`) at each
 * expression the compiler reports as possibly undefined, so that an index read a test knows to
 * be in range (it just built the array) type-checks. Source code (common/, node/, sdk/, bench/,
 * scripts/) is fixed by hand instead (a clear error, a default, or `!` only where the index is
 * proven in range). `--paths common/,node/` points it elsewhere: its output there is only a
 * draft to review site by site (replace each `!` whose index is not proven in range).
 *
 * Run (from the repository root, after `hardhat build` so that artifacts/ types exist):
 *
 *   npx tsx scripts/dev/non-null-index-codemod.ts            # rewrites files under test/
 *   npx tsx scripts/dev/non-null-index-codemod.ts --dry-run  # lists what it would change
 *   npx tsx scripts/dev/non-null-index-codemod.ts --paths bench/  # another folder (then review)
 *
 * It type-checks tsconfig.check.json (every .ts file) with `noUncheckedIndexedAccess: true`,
 * edits, and repeats until no diagnostic it knows how to fix is left (at most 8 rounds; a fix can
 * uncover the next one, `a[0][1]`). Idempotent: on code that already type-checks it changes
 * nothing. What it cannot fix is printed with its position and the script exits 1.
 */
import ts from "typescript";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const root = process.cwd();
const dryRun = process.argv.includes("--dry-run");
const pathsAt = process.argv.indexOf("--paths");
const prefixes = pathsAt >= 0 ? (process.argv[pathsAt + 1] ?? "").split(",").filter((p) => p !== "") : ["test/"];
if (prefixes.length === 0) throw new Error("--paths needs a comma-separated list of folder prefixes, e.g. --paths common/,node/");

/** The diagnostics that mean "this value may be undefined" under noUncheckedIndexedAccess. */
const CODES = new Set([
  18048, // 'x' is possibly 'undefined'.
  2532, // Object is possibly 'undefined'.
  2345, // Argument of type 'T | undefined' is not assignable to parameter of type 'T'.
  2322, // Type 'T | undefined' is not assignable to type 'T'.
  2538, // Type 'undefined' cannot be used as an index type.
  2339, // Property 'p' does not exist on type 'T | undefined' (a union member lacks it).
  2769, // No overload matches this call (an argument may be undefined).
  2722, // Cannot invoke an object which is possibly 'undefined'.
  2488, // Type 'T | undefined' must have a '[Symbol.iterator]()' method.
  2464, // A computed property name must be of type 'string', 'number', 'symbol', or 'any'.
]);

function program(configFile: string): ts.Program {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    path.join(root, configFile),
    { noUncheckedIndexedAccess: true },
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
      },
    },
  );
  if (!parsed) throw new Error(`Cannot read ${configFile}`);
  return ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options });
}

/** The innermost node whose span is exactly [start, end), or the innermost one containing it. */
function nodeAt(sourceFile: ts.SourceFile, start: number, end: number): ts.Node {
  let found: ts.Node = sourceFile;
  const visit = (node: ts.Node): void => {
    if (node.getStart(sourceFile) <= start && node.getEnd() >= end) {
      found = node;
      ts.forEachChild(node, visit);
    }
  };
  ts.forEachChild(sourceFile, visit);
  return found;
}

/** Expressions after which `!` can be written without parentheses. */
function assertable(node: ts.Node): node is ts.Expression {
  return (
    ts.isIdentifier(node) ||
    ts.isElementAccessExpression(node) ||
    ts.isPropertyAccessExpression(node) ||
    ts.isCallExpression(node) ||
    ts.isParenthesizedExpression(node) ||
    ts.isNonNullExpression(node)
  );
}

/**
 * `const x = a[i]` then `x.y`: the assertion goes on the index read in the declaration (once)
 * rather than on every use, when the declaration is a plain `const` in the same file.
 */
function declarationRead(checker: ts.TypeChecker, sourceFile: ts.SourceFile, node: ts.Identifier): ts.Expression | undefined {
  const symbol =
    ts.isShorthandPropertyAssignment(node.parent) && node.parent.name === node ? checker.getShorthandAssignmentValueSymbol(node.parent) : checker.getSymbolAtLocation(node);
  const declaration = symbol?.valueDeclaration;
  if (!declaration || !ts.isVariableDeclaration(declaration) || declaration.getSourceFile() !== sourceFile || !ts.isIdentifier(declaration.name)) return undefined;
  if (!(declaration.parent.flags & ts.NodeFlags.Const) || declaration.type) return undefined;
  const init = declaration.initializer;
  if (!init || !ts.isElementAccessExpression(init) || init.questionDotToken) return undefined;
  return init;
}

type Insertion = { at: number; text: string };

function mayBeUndefined(type: ts.Type): boolean {
  return (type.flags & ts.TypeFlags.Undefined) !== 0 || (type.isUnion() && type.types.some((member) => (member.flags & ts.TypeFlags.Undefined) !== 0));
}

/** What to write where for a diagnostic, or undefined when this script has no safe fix. */
function insertionFor(checker: ts.TypeChecker, sourceFile: ts.SourceFile, diagnostic: ts.Diagnostic): Insertion | undefined {
  const start = diagnostic.start ?? 0;
  let node = nodeAt(sourceFile, start, start + (diagnostic.length ?? 0));
  // A declaration or property reported by its name: the value is its initializer.
  if (
    ts.isIdentifier(node) &&
    node.parent &&
    (ts.isVariableDeclaration(node.parent) || ts.isPropertyAssignment(node.parent)) &&
    node.parent.name === node &&
    node.parent.initializer
  ) {
    node = node.parent.initializer;
  }
  // `const { a, b } = x[i]` or `const [a] = x[i]` reported at a bound name: the value destructured is the initializer.
  if (ts.isIdentifier(node) && ts.isBindingElement(node.parent)) {
    let pattern: ts.Node = node.parent.parent;
    while (ts.isBindingElement(pattern.parent)) pattern = pattern.parent.parent;
    const declaration = pattern.parent;
    if (!ts.isVariableDeclaration(declaration) || !declaration.initializer || node.parent.name !== node) return undefined;
    node = declaration.initializer;
  }
  if (ts.isComputedPropertyName(node)) node = node.expression;
  // `a.b` where the diagnostic names the property (2339): the undefined value is `a`.
  if (diagnostic.code === 2339 && ts.isIdentifier(node) && ts.isPropertyAccessExpression(node.parent) && node.parent.name === node) node = node.parent.expression;
  // A call whose callee may be undefined (2722) or an overload mismatch reported at the callee.
  if (ts.isCallExpression(node) && diagnostic.code === 2722) node = node.expression;
  if (ts.isIdentifier(node)) {
    const read = declarationRead(checker, sourceFile, node);
    if (read) node = read;
    else if (ts.isShorthandPropertyAssignment(node.parent) && node.parent.name === node) {
      return mayBeUndefined(checker.getTypeAtLocation(node)) ? { at: node.getEnd(), text: `: ${node.text}!` } : undefined;
    }
  }
  if (ts.isNonNullExpression(node)) return undefined; // already asserted: the problem is elsewhere
  if (!assertable(node)) return undefined;
  // Only a value that may itself be undefined: `{ a: T | undefined }` is left to a person.
  if (!mayBeUndefined(checker.getTypeAtLocation(node))) return undefined;
  // `x?.[0]!` is rejected by lint (no-non-null-asserted-optional-chain) and means something else:
  // `x?.[0].y` becomes `x?.[0]?.y` (undefined when the element is missing, as when x is).
  if ((ts.isElementAccessExpression(node) || ts.isPropertyAccessExpression(node) || ts.isCallExpression(node)) && node.flags & ts.NodeFlags.OptionalChain) {
    const parent = node.parent;
    if ((ts.isPropertyAccessExpression(parent) || ts.isElementAccessExpression(parent)) && parent.expression === node && !parent.questionDotToken) {
      return { at: node.getEnd(), text: ts.isPropertyAccessExpression(parent) ? "?" : "?." };
    }
    return undefined;
  }
  // A plain assignment target (`a[i] = v`) is not a read: never assert it (`a[i] += v` is both, and may be).
  const parent = node.parent;
  if (parent && ts.isBinaryExpression(parent) && parent.left === node && parent.operatorToken.kind === ts.SyntaxKind.EqualsToken) return undefined;
  return { at: node.getEnd(), text: "!" };
}

/** Applies insertions from the end backwards (earlier positions stay valid), skipping any that would not parse. */
function applyInsertions(fileName: string, text: string, insertions: Map<number, string>): { text: string; applied: number } {
  const parseErrors = (t: string) =>
    (ts.createSourceFile(fileName, t, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS) as unknown as { parseDiagnostics: unknown[] }).parseDiagnostics.length;
  const before = parseErrors(text);
  let applied = 0;
  for (const [at, insert] of [...insertions].sort((a, b) => b[0] - a[0])) {
    const next = `${text.slice(0, at)}${insert}${text.slice(at)}`;
    if (parseErrors(next) > before) {
      console.log(`  skipped (would not parse): ${path.relative(root, fileName)} at offset ${at}`);
      continue;
    }
    text = next;
    applied++;
  }
  return { text, applied };
}

const MAX_ROUNDS = 8;
let total = 0;
let left: string[] = [];
for (let round = 1; round <= MAX_ROUNDS; round++) {
  const edits = new Map<string, Map<number, string>>();
  left = [];
  for (const config of ["tsconfig.check.json"]) {
    const prog = program(config);
    const checker = prog.getTypeChecker();
    for (const sourceFile of prog.getSourceFiles()) {
      const relative = path.relative(root, sourceFile.fileName).split(path.sep).join("/");
      if (relative.startsWith("..") || relative.startsWith("node_modules/") || !prefixes.some((p) => relative.startsWith(p))) continue;
      for (const diagnostic of prog.getSemanticDiagnostics(sourceFile)) {
        if (!CODES.has(diagnostic.code)) continue;
        const at = insertionFor(checker, sourceFile, diagnostic);
        const { line, character } = sourceFile.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
        const where = `${relative}:${line + 1}:${character + 1} TS${diagnostic.code}`;
        if (at === undefined) {
          left.push(`${where} ${ts.flattenDiagnosticMessageText(diagnostic.messageText, " ")}`);
          continue;
        }
        const inserts = edits.get(sourceFile.fileName) ?? new Map<number, string>();
        inserts.set(at.at, at.text);
        edits.set(sourceFile.fileName, inserts);
      }
    }
  }
  let count = 0;
  for (const [file, inserts] of edits) {
    const { text, applied } = applyInsertions(file, readFileSync(file, "utf8"), inserts);
    count += applied;
    if (dryRun) console.log(`${path.relative(root, file)}: ${applied} assertion(s)`);
    else if (applied > 0) writeFileSync(file, text);
  }
  if (count === 0) break;
  total += count;
  console.log(`round ${round}: ${count} assertion(s) in ${edits.size} file(s)${dryRun ? " (dry run)" : ""}`);
  if (dryRun) break;
}
console.log(`${total} assertion(s) inserted${dryRun ? " (dry run: none written)" : ""}`);
if (left.length > 0) {
  console.log(`${left.length} diagnostic(s) this script cannot fix:`);
  for (const line of left) console.log(`  ${line}`);
  process.exitCode = 1;
}
