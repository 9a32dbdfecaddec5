/**
 * node/cli/main.ts loads only the module of the command it runs (node/cli/commands.ts): the table
 * that says which module registers which top-level command must name exactly what each module
 * registers, or a command would be missing from its own command line.
 */
import assert from "node:assert/strict";
import { Command } from "commander";
import { COMMAND_MODULES, COMMAND_NAMES, modulesFor } from "../../node/cli/commands.js";

describe("suanli: each command line loads the module of its command", function () {
  this.timeout(60_000);

  it("the table names exactly the top-level commands each module registers, each once", async () => {
    const everyName: string[] = [];
    for (const [key, register] of Object.entries(COMMAND_MODULES)) {
      const program = new Command("suanli");
      await register(program);
      const names = program.commands.map((command) => command.name());
      assert.deepEqual(names, [...COMMAND_NAMES[key as keyof typeof COMMAND_MODULES]], `module ${key}`);
      everyName.push(...names);
    }
    assert.equal(new Set(everyName).size, everyName.length, `no command registered twice: ${everyName.join(" ")}`);
  });

  it("a command's first word picks its module; --version alone none; help, a typo or no command all of them", () => {
    const all = Object.keys(COMMAND_MODULES);
    assert.deepEqual(modulesFor(["wallet", "balance", "--devnet-account", "4"]), ["wallet"]);
    assert.deepEqual(modulesFor(["status", "task-1"]), ["renter"]);
    assert.deepEqual(modulesFor(["exec", "task-1", "--", "ls"]), ["renter"]);
    assert.deepEqual(modulesFor(["node", "start"]), ["node"]);
    assert.deepEqual(modulesFor(["--version"]), []);
    assert.deepEqual(modulesFor(["-V"]), []);
    assert.deepEqual(modulesFor([]), all);
    assert.deepEqual(modulesFor(["--help"]), all);
    assert.deepEqual(modulesFor(["help", "submit"]), all);
    assert.deepEqual(modulesFor(["sumbit"]), all);
    assert.deepEqual(modulesFor(["--version", "wallet"]), all);
  });
});
