/**
 * The template catalog (issue #37, docs/templates.md): what a renter starts from in one step — an
 * upstream public image, the command, the ports it serves, its environment, the health path, the
 * GPUs it needs. Versioned (`version`), validated with zod when first read, shared by the node's
 * API (`GET /v1/templates`), the SDK (`listTemplates`, `templateTask`) and the CLI
 * (`suanli templates`). No Node or DOM imports: the browser SDK reads it too.
 *
 * The images are the projects' own, pinned to a tag; the command is what follows the image on the
 * container engine's command line (after the image's ENTRYPOINT when it has one: vLLM's and
 * Ollama's images start their server and take its arguments).
 */
import { z } from "zod";
import { SuanliError } from "../errors.js";

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const templateSchema = z
  .strictObject({
    /** The name renters type: lowercase letters, digits and dashes. */
    name: z
      .string()
      .min(2)
      .max(40)
      .regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, "expected lowercase letters, digits and single dashes, e.g. vllm-openai"),
    title: z.string().min(1).max(80),
    description: z.string().min(1).max(400),
    /** A registry reference with a tag or digest (never a moving `latest`). */
    image: z
      .string()
      .min(1)
      .max(512)
      .regex(/^[a-z0-9.-]+(:\d+)?\/[\w./-]+(:[\w.-]+|@sha256:[0-9a-f]{64})$/, "expected host/name:tag or host/name@sha256:<digest>")
      .refine((image) => !image.endsWith(":latest"), "pin a tag: latest moves"),
    /** The argv after the image (its ENTRYPOINT's arguments when it has one). */
    command: z.array(z.string().min(1).max(1000)).min(1).max(64),
    /** TCP ports the task serves (reachable with `suanli forward`). */
    ports: z.array(z.number().int().min(1).max(65_535)).max(16),
    env: z.record(z.string().regex(ENV_NAME, "expected an environment variable name"), z.string().max(4000)),
    /** Environment variables drawn at random for each task (a notebook's token), passed as secrets and shown to the renter once. */
    generatedSecrets: z.array(z.string().regex(ENV_NAME, "expected an environment variable name")).max(8),
    /** An HTTP path answering 200 once the server is up (on the first port), or null for a batch job. */
    healthPath: z
      .string()
      .regex(/^\/[\w./-]*$/, "expected a path starting with /")
      .nullable(),
    /** Least memory per GPU the template needs, MiB (a match constraint). */
    minVramMiB: z.number().int().min(1).max(1_048_576),
    gpuCount: z.number().int().min(1).max(64),
    /** Snapshot $SUANLI_CHECKPOINT_DIR this often (training templates). */
    checkpointPeriodSeconds: z.number().int().min(10).max(86_400).optional(),
    notes: z.string().max(1000),
  })
  .superRefine((template, ctx) => {
    for (const name of template.generatedSecrets) {
      if (name in template.env) ctx.addIssue({ code: "custom", path: ["generatedSecrets"], message: `${name} is also in env: a variable is either set or generated` });
    }
    if (template.healthPath !== null && template.ports.length === 0) ctx.addIssue({ code: "custom", path: ["healthPath"], message: "a health path needs a port to serve it on" });
  });
/**
 * One template of the catalog: its name, image, command, ports, environment, generated secrets,
 * health path, GPUs and VRAM (docs/templates.md).
 *
 * @example
 * import { listTemplates, type Template } from "suanli/sdk";
 * const jupyter: Template | undefined = listTemplates().find((template) => template.name === "jupyter");
 * console.log(jupyter?.image, jupyter?.healthPath);
 */
export type Template = z.output<typeof templateSchema>;

export const templateCatalogSchema = z
  .strictObject({
    /** Raised whenever a template changes in a way that changes what a task runs. */
    version: z.number().int().min(1),
    templates: z.array(templateSchema).min(1).max(200),
  })
  .superRefine((catalog, ctx) => {
    const seen = new Set<string>();
    catalog.templates.forEach((template, index) => {
      if (seen.has(template.name)) ctx.addIssue({ code: "custom", path: ["templates", index, "name"], message: `${template.name} is named twice` });
      seen.add(template.name);
    });
  });
export type TemplateCatalog = z.output<typeof templateCatalogSchema>;

const GiB = 1024;

/** The catalog as written; read it through {@link templateCatalog}, which validates it. */
export const TEMPLATE_CATALOG_SOURCE: z.input<typeof templateCatalogSchema> = {
  version: 1,
  templates: [
    {
      name: "vllm-openai",
      title: "vLLM, OpenAI-compatible server",
      description: "Serves a Hugging Face model with vLLM behind the OpenAI API (/v1/completions, /v1/chat/completions) on port 8000.",
      image: "docker.io/vllm/vllm-openai:v0.6.4.post1",
      command: ["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--host", "0.0.0.0", "--port", "8000"],
      ports: [8000],
      env: { HF_HOME: "/tmp/hf" },
      generatedSecrets: [],
      healthPath: "/health",
      minVramMiB: 16 * GiB,
      gpuCount: 1,
      notes: "The command is the server's arguments (the image's entrypoint is the server): replace --model with yours; a gated model needs HF_TOKEN as a secret env.",
    },
    {
      name: "jupyter",
      title: "JupyterLab with PyTorch (CUDA 12)",
      description: "A JupyterLab server with PyTorch and CUDA 12 on port 8888, protected by a token drawn for the task.",
      image: "quay.io/jupyter/pytorch-notebook:cuda12-python-3.11",
      command: ["start-notebook.py", "--ServerApp.ip=0.0.0.0", "--ServerApp.port=8888"],
      ports: [8888],
      env: {},
      generatedSecrets: ["JUPYTER_TOKEN"],
      healthPath: "/api",
      minVramMiB: 8 * GiB,
      gpuCount: 1,
      notes: "Open http://127.0.0.1:8888/lab?token=<JUPYTER_TOKEN> after `suanli forward TASK 8888`; the token is shown once, when the task is made.",
    },
    {
      name: "comfyui",
      title: "ComfyUI",
      description: "The ComfyUI node editor for diffusion models on port 8188.",
      image: "docker.io/yanwk/comfyui-boot:cu124-slim",
      command: ["bash", "/runner-scripts/entrypoint.sh"],
      ports: [8188],
      env: { CLI_ARGS: "--listen 0.0.0.0 --port 8188" },
      generatedSecrets: [],
      healthPath: "/system_stats",
      minVramMiB: 12 * GiB,
      gpuCount: 1,
      notes: "Models are downloaded at first start into the task's workspace; mount your own with --input CID:/data/models.",
    },
    {
      name: "pytorch-train",
      title: "PyTorch training job",
      description: "PyTorch 2.5 with CUDA 12.4 running a training script, checkpointing every 10 minutes into $SUANLI_CHECKPOINT_DIR.",
      image: "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
      command: ["python", "train.py"],
      ports: [],
      env: {},
      generatedSecrets: [],
      healthPath: null,
      minVramMiB: 16 * GiB,
      gpuCount: 1,
      checkpointPeriodSeconds: 600,
      notes:
        "Replace the command with your script (ship it with --bundle or --input); write checkpoints to $SUANLI_CHECKPOINT_DIR and start from $SUANLI_RESUMED_FROM when it is set (docs/data.md).",
    },
    {
      name: "ollama",
      title: "Ollama",
      description: "The Ollama model server (its own API and an OpenAI-compatible /v1) on port 11434.",
      image: "docker.io/ollama/ollama:0.4.7",
      command: ["serve"],
      ports: [11434],
      env: { OLLAMA_HOST: "0.0.0.0:11434" },
      generatedSecrets: [],
      healthPath: "/api/version",
      minVramMiB: 8 * GiB,
      gpuCount: 1,
      notes: "Pull a model once it runs: `suanli exec TASK -- ollama pull llama3.2`.",
    },
  ],
};

let parsed: TemplateCatalog | undefined;

/** The catalog, validated (once). */
export function templateCatalog(): TemplateCatalog {
  parsed ??= templateCatalogSchema.parse(TEMPLATE_CATALOG_SOURCE);
  return parsed;
}

/**
 * A name that is not in the catalog; the message lists the known ones (also in `known`).
 *
 * @example
 * import { templateTask, UnknownTemplateError } from "suanli/sdk";
 * try {
 *   templateTask("jupyterlab");
 * } catch (error) {
 *   if (error instanceof UnknownTemplateError) console.error(error.shortMessage, error.known);
 * }
 */
export class UnknownTemplateError extends SuanliError {
  override name = "UnknownTemplateError";
  readonly known: string[];
  constructor(name: string, known: string[]) {
    super(`No template named ${JSON.stringify(name.slice(0, 80))}`, { metaMessages: [`The catalog has ${known.join(", ")} (\`suanli templates\` lists them).`] });
    this.known = known;
  }
}

/** The template named `name`, or UnknownTemplateError listing the known names. */
export function findTemplate(name: string, catalog: TemplateCatalog = templateCatalog()): Template {
  const found = catalog.templates.find((template) => template.name === name);
  if (!found)
    throw new UnknownTemplateError(
      name,
      catalog.templates.map((template) => template.name),
    );
  return found;
}
