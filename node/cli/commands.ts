/**
 * The CLI's top-level commands and the modules that register them, apart from node/cli/main.ts (which
 * runs the command line when loaded), so a test can read the table.
 */
import type { Command } from "commander";

/**
 * Each top-level command and the module that registers it. A command line naming one of them loads
 * that module alone (with the code-split bundle, scripts/build-cli.ts, only its part of the import
 * graph is evaluated: `suanli wallet balance` does not evaluate libp2p, Helia or the node); any other
 * line (`--help`, `help submit`, a typo) loads every module, so help lists every command and a typo
 * is answered as before. test/node/cli-lazy-commands.test.ts checks that this table names exactly what
 * each module registers.
 */
export const COMMAND_MODULES = {
  devnet: async (program: Command) => (await import("./commands/devnet.js")).registerDevnet(program),
  node: async (program: Command) => (await import("./commands/node.js")).registerNode(program),
  attestor: async (program: Command) => (await import("./commands/attestor.js")).registerAttestor(program),
  wallet: async (program: Command) => (await import("./commands/wallet.js")).registerWallet(program),
  renter: async (program: Command) => (await import("./commands/renter.js")).registerRenter(program),
  data: async (program: Command) => (await import("./commands/data.js")).registerData(program),
  checkpoints: async (program: Command) => (await import("./commands/checkpoints.js")).registerCheckpoints(program),
  resume: async (program: Command) => (await import("./commands/resume.js")).registerResume(program),
  templates: async (program: Command) => (await import("./commands/templates.js")).registerTemplates(program),
  endpoint: async (program: Command) => (await import("./commands/endpoint.js")).registerEndpoint(program),
  provider: async (program: Command) => (await import("./commands/provider.js")).registerProvider(program),
  governance: async (program: Command) => (await import("./commands/governance.js")).registerGovernance(program),
} as const satisfies Record<string, (program: Command) => Promise<void>>;

/** The top-level command names each module of COMMAND_MODULES registers (the renter's module registers several). */
export const COMMAND_NAMES: Record<keyof typeof COMMAND_MODULES, readonly string[]> = {
  devnet: ["devnet"],
  node: ["node"],
  attestor: ["attestor"],
  wallet: ["wallet"],
  renter: ["offers", "submit", "tasks", "status", "logs", "wait", "cancel", "extend", "output", "forward", "exec"],
  data: ["data"],
  checkpoints: ["checkpoints"],
  resume: ["resume"],
  templates: ["templates"],
  endpoint: ["endpoint"],
  provider: ["provider"],
  governance: ["governance"],
};

/**
 * The modules to load for this command line (the arguments after `suanli`): none for `--version`
 * alone, the one that registers the first word when it names a command, and otherwise all of them.
 */
export function modulesFor(argv: readonly string[]): (keyof typeof COMMAND_MODULES)[] {
  const all = Object.keys(COMMAND_MODULES) as (keyof typeof COMMAND_MODULES)[];
  if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) return [];
  const first = argv[0];
  const owner = all.find((key) => first !== undefined && COMMAND_NAMES[key].includes(first));
  return owner ? [owner] : all;
}
