/**
 * The headless Chromium that browser tests drive with playwright-core (which downloads no browser):
 * `SUANLI_CHROMIUM` when set (a path, or `npm` to force the packaged one), else Debian's
 * /usr/bin/chromium when installed (.ci/run installs it: faster to start), else the Chromium that
 * the @sparticuz/chromium devDependency ships inside its npm package (brotli-compressed, unpacked
 * to the temp folder on first use, with the NSS libraries it needs), so `npm ci && npm test`
 * needs no browser installed by hand.
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type BrowserContext } from "playwright-core";

export type ChromiumBinary = {
  executablePath: string;
  /** Environment the binary needs (the packaged one: LD_LIBRARY_PATH to its libraries). */
  env: Record<string, string>;
  source: "SUANLI_CHROMIUM" | "debian" | "npm";
};

const DEBIAN_CHROMIUM = "/usr/bin/chromium";
let packaged: Promise<ChromiumBinary> | undefined;

/** Unpacks (once per machine: the temp folder keeps it) the Chromium shipped in @sparticuz/chromium. */
export function packagedChromium(): Promise<ChromiumBinary> {
  packaged ??= (async () => {
    // The package exports only its entry (build/index.js); the compressed binaries are in ../bin.
    const bin = path.join(path.dirname(fileURLToPath(import.meta.resolve("@sparticuz/chromium"))), "..", "bin");
    const { default: Chromium, inflate } = await import("@sparticuz/chromium");
    // Its WebGL stack is not needed; skipping it skips unpacking swiftshader.
    Chromium.setGraphicsMode = false;
    const executablePath = await Chromium.executablePath(bin);
    // The binary links NSS, which a bare Debian lacks: the package ships it (built for Amazon Linux 2023, glibc-compatible).
    const libraries = path.join(await inflate(path.join(bin, "al2023.tar.br")), "lib");
    const env = { LD_LIBRARY_PATH: [libraries, process.env.LD_LIBRARY_PATH].filter(Boolean).join(":") };
    return { executablePath, env, source: "npm" as const };
  })();
  return packaged;
}

/** The Chromium to test with, in the order the module comment gives. */
export async function findChromium(): Promise<ChromiumBinary> {
  const chosen = process.env.SUANLI_CHROMIUM;
  if (chosen === "npm") return packagedChromium();
  if (chosen) {
    if (!existsSync(chosen)) throw new Error(`SUANLI_CHROMIUM is ${chosen}, which does not exist: unset it to use Debian's chromium or the packaged one, or set it to "npm"`);
    return { executablePath: chosen, env: {}, source: "SUANLI_CHROMIUM" };
  }
  if (existsSync(DEBIAN_CHROMIUM)) return { executablePath: DEBIAN_CHROMIUM, env: {}, source: "debian" };
  return packagedChromium();
}

/** The flags every browser test uses: headless, no sandbox (root in CI), nothing fetched from outside. */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  // Resolve no host name but loopback: the page may reach the node and nothing else.
  "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
];

/** A fresh persistent context (its own profile folder, removed by `close`) on the Chromium findChromium picks. */
export async function launchChromium(binary?: ChromiumBinary): Promise<{ context: BrowserContext; binary: ChromiumBinary; close(): Promise<void> }> {
  const chosen = binary ?? (await findChromium());
  const profile = await mkdtemp(path.join(tmpdir(), "suanli-chromium-"));
  try {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: chosen.executablePath,
      headless: true,
      args: CHROMIUM_ARGS,
      env: { ...(process.env as Record<string, string>), ...chosen.env },
    });
    return {
      context,
      binary: chosen,
      async close() {
        await context.close().catch(() => undefined);
        await rm(profile, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(profile, { recursive: true, force: true });
    throw error;
  }
}
