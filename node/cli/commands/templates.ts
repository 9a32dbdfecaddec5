/**
 * `suanli templates`: the template catalog (common/templates/catalog.ts, docs/templates.md), one
 * line per template; `suanli templates show NAME` prints the template and the `suanli submit`
 * command that starts it (its generated secrets drawn for that command, shown once). Offline: the
 * catalog ships with the CLI. `--json` prints data as one line.
 */
import type { Command } from "commander";
import { UnknownTemplateError } from "../../../common/templates/catalog.js";
import { listTemplates, templateTask, type TemplateTaskReturnType } from "../../../sdk/actions/templates.js";
import { CliError, emit, ExitCode } from "../output.js";

/** A shell word, quoted only when it needs to be. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** The `suanli submit` command line that starts the template (GPU type, duration and price left to fill in). */
export function submitCommand({ template, parameters, secrets }: TemplateTaskReturnType): string {
  const words = ["npx", "suanli", "submit", "--gpu", "<GPU>", "--count", String(parameters.gpuCount), "--duration", "<seconds>", "--max-price", "<usd>"];
  words.push("--image", parameters.image, "--min-vram", String(parameters.minVramMiB));
  for (const port of parameters.ports) words.push("--port", String(port));
  for (const [name, value] of Object.entries(template.env)) words.push("--env", `${name}=${value}`);
  for (const [name, value] of Object.entries(secrets)) words.push("--secret-env", `${name}=${value}`);
  if (parameters.checkpointPeriodSeconds !== undefined) words.push("--checkpoint-every", String(parameters.checkpointPeriodSeconds));
  words.push("--", ...parameters.command);
  return words.map((word) => (word.startsWith("<") ? word : shellWord(word))).join(" ");
}

export function registerTemplates(program: Command): void {
  const templates = program
    .command("templates")
    .description("the template catalog: what a task can start from (image, command, ports, GPUs)")
    .option("--json", "print data as one JSON object")
    .action((flags: { json?: boolean }) => {
      const list = listTemplates();
      emit(Boolean(flags.json), { templates: list }, () =>
        [
          ...list.map((t) => `${t.name.padEnd(14)} ${t.title} (${t.gpuCount} GPU, ≥ ${Math.round(t.minVramMiB / 1024)} GiB each; ports ${t.ports.join(", ") || "none"})`),
          "Details and the command that starts one: npx suanli templates show <name>",
        ].join("\n"),
      );
    });

  templates
    .command("show")
    .argument("<name>", "a template's name (npx suanli templates lists them)")
    .description("a template's image, command, ports and environment, and the `suanli submit` line that starts it")
    .option("--json", "print data as one JSON object")
    .action((name: string, flags: { json?: boolean }) => {
      let task: TemplateTaskReturnType;
      try {
        task = templateTask(name);
      } catch (error) {
        if (error instanceof UnknownTemplateError) throw new CliError(error.shortMessage, ExitCode.usage, error.metaMessages);
        throw error;
      }
      const command = submitCommand(task);
      emit(Boolean(flags.json) || Boolean(templates.opts<{ json?: boolean }>().json), { ...task, submit: command }, () =>
        [
          `${task.template.name}: ${task.template.title}`,
          `  ${task.template.description}`,
          `  image ${task.template.image}`,
          `  health ${task.template.healthPath ?? "none (a batch job)"}`,
          `  ${task.template.notes}`,
          ...Object.keys(task.secrets).map((secret) => `  ${secret} was drawn for this command; keep it: it is shown once`),
          "Start it:",
          `  ${command}`,
        ].join("\n"),
      );
    });
}
