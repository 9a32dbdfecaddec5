import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  // The README test's scratch files in the repository root (test/e2e/readme.test.ts SCRATCH, also in .gitignore): CI lints
  // beside the tests, so the README's renter.ts can exist while ESLint walks the tree.
  {
    ignores: [
      "node_modules/",
      "artifacts/",
      "cache/",
      "build/",
      ".docs-check-*/",
      "common/abi.ts",
      "coverage/",
      "**/*.cjs",
      "node/api/explorer/dist/",
      "node/api/console/dist/",
      "renter.ts",
      "job/",
      ".suanli-*/",
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: 2023,
      sourceType: "module",
      globals: {
        process: "readonly",
        console: "readonly",
        Buffer: "readonly",
        URL: "readonly",
        setTimeout: "readonly",
        clearTimeout: "readonly",
        setInterval: "readonly",
        clearInterval: "readonly",
        AbortController: "readonly",
        AbortSignal: "readonly",
        TextEncoder: "readonly",
        TextDecoder: "readonly",
        fetch: "readonly",
        performance: "readonly",
        queueMicrotask: "readonly",
        structuredClone: "readonly",
      },
    },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      "@typescript-eslint/no-non-null-assertion": "off",
      "no-constant-condition": ["error", { checkLoops: false }],
    },
  },
  // Type-aware rules for every .ts file: a promise is awaited, returned, or handed to
  // runDetached (common/detached.ts), which logs its failure; no async function where a void
  // callback is expected. tsconfig.check.json holds every .ts file in one program (one program to
  // build, not two: the type-aware lint is CI's costliest check).
  {
    files: ["**/*.ts"],
    languageOptions: { parserOptions: { project: ["./tsconfig.check.json"], tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": ["error", { ignoreVoid: false, allowForKnownSafePromises: [{ from: "package", package: "fastify", name: "FastifyReply" }] }],
      "@typescript-eslint/no-misused-promises": "error",
    },
  },
  // The DOM's globals only where a browser runs the code: the pages (node/api/<page>/src) and the
  // Chromium tests' page callbacks. tsconfig.check.json gives every file the DOM's types, so this
  // is what keeps `document` or `window` out of the daemon, the SDK (its browser entry takes what
  // the page hands it, such as an EIP-1193 provider) and the shared code.
  {
    files: ["**/*.ts"],
    ignores: [
      "node/api/*/src/**",
      "test/e2e/explorer.test.ts",
      "test/e2e/chromium.test.ts",
      "test/e2e/console.test.ts",
      "test/e2e/console-passkey.test.ts",
      "test/support/console-page.ts",
    ],
    rules: {
      "no-restricted-globals": [
        "error",
        ...["window", "document", "navigator", "localStorage", "sessionStorage", "location", "history", "self", "HTMLElement", "customElements", "alert", "confirm", "prompt"].map(
          (name) => ({ name, message: `${name} is a browser global: only browser pages (node/api/<page>/src) and the Chromium tests may use it (tsconfig.check.json).` }),
        ),
      ],
    },
  },
  // The layers (docs/architecture.md): common/ imports neither the daemon nor the SDK, the SDK
  // never imports the daemon. Relative specifiers only (the project has no path aliases).
  {
    files: ["common/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        { patterns: [{ regex: "^(\\.\\./)+(node|sdk)/", message: "common/ is shared by the daemon and the SDK: it must not import node/ or sdk/." }] },
      ],
    },
  },
  {
    files: ["sdk/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [{ regex: "^(\\.\\./)+node/", message: "The SDK never imports the daemon (node/): move what both need to common/." }] }],
    },
  },
  {
    files: ["test/**/*.ts"],
    languageOptions: { globals: { describe: "readonly", it: "readonly", before: "readonly", after: "readonly", beforeEach: "readonly", afterEach: "readonly" } },
  },
);
