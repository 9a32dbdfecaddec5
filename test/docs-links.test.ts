/**
 * The README a newcomer reads in ten minutes (issue #40 item 8), and the links that carry them
 * into docs/: the README stays short (what Suanli is, the two commands, one tested path per role,
 * the layout), each role section runs its commands (a `readme-test` block) and links to its guide,
 * and every relative link of README.md, sdk/README.md and docs/*.md names a file that exists and,
 * for a Markdown file, a heading that exists (GitHub's anchor for it).
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, spaces, `-` and `_` kept), spaces to `-`, repeats numbered. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const heading = !fenced && /^#{1,6}\s+(.*)$/.exec(line);
    if (!heading) continue;
    const base = heading[1]!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** The relative links of a Markdown file outside code: `[text](target)`, with the line each is on. */
function relativeLinks(markdown: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  let fenced = false;
  markdown.split("\n").forEach((line, index) => {
    if (line.startsWith("```")) fenced = !fenced;
    if (fenced) return;
    const prose = line.replace(/`[^`]*`/g, "");
    for (const match of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!;
      if (/^[a-z]+:/i.test(target)) continue;
      links.push({ line: index + 1, target });
    }
  });
  return links;
}

const files = [
  "README.md",
  "sdk/README.md",
  ...readdirSync(path.join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];

describe("README and docs: a ten-minute README, and links that lead somewhere (issue #40 item 8)", () => {
  it("computes GitHub's anchors the way GitHub does", () => {
    const anchors = headingAnchors(
      "# Suanli (算力)\n## Gas\n```sh\n# not a heading\n```\n### CPU targets of issue #19: what is reached\n## Gas\n#### Renter console (in the browser)\n",
    );
    assert.deepEqual([...anchors], ["suanli-算力", "gas", "cpu-targets-of-issue-19-what-is-reached", "gas-1", "renter-console-in-the-browser"]);
  });

  it("the README reads in ten minutes: at most 2,500 words, and each role section runs its commands and links to its guide", () => {
    const readme = readFileSync(path.join(root, "README.md"), "utf8");
    const words = readme.split(/\s+/).filter(Boolean).length;
    assert.ok(words <= 2_500, `README.md has ${words} words; a ten-minute read is at most 2,500 (move reference detail into docs/)`);
    for (const role of ["Provider", "Renter", "dApp developer", "Attestor"]) {
      const start = readme.indexOf(`\n### ${role}\n`);
      assert.ok(start >= 0, `README.md has a "### ${role}" section`);
      const end = readme.indexOf("\n##", start + 5);
      const section = readme.slice(start, end < 0 ? undefined : end);
      assert.match(section, /<!-- readme-test /, `the ${role} section runs its commands (a readme-test block)`);
      assert.match(section, /\]\(docs\/[\w-]+\.md/, `the ${role} section links to its guide in docs/`);
    }
  });

  it("every relative link of README.md, sdk/README.md and docs/*.md names a file and heading that exist", () => {
    const broken: string[] = [];
    for (const file of files) {
      const markdown = readFileSync(path.join(root, file), "utf8");
      for (const { line, target } of relativeLinks(markdown)) {
        const [pathPart, anchor] = target.split("#", 2) as [string, string | undefined];
        const resolved = pathPart === "" ? path.join(root, file) : path.resolve(path.dirname(path.join(root, file)), decodeURIComponent(pathPart));
        if (!existsSync(resolved)) {
          broken.push(`${file}:${line}: ${target} (no such file)`);
          continue;
        }
        if (anchor !== undefined && resolved.endsWith(".md") && !headingAnchors(readFileSync(resolved, "utf8")).has(decodeURIComponent(anchor).toLowerCase())) {
          broken.push(`${file}:${line}: ${target} (no heading with that anchor)`);
        }
      }
    }
    assert.deepEqual(broken, [], `broken links:\n${broken.join("\n")}`);
  });
});
