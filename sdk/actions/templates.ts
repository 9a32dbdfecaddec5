import { findTemplate, templateCatalog, type Template } from "../../common/templates/catalog.js";

/**
 * The template catalog (docs/templates.md): name, image, command, ports, environment, health path,
 * GPUs and VRAM per template. The same catalog a node serves at `GET /v1/templates`.
 *
 * @example
 * import { listTemplates } from "suanli/sdk";
 * for (const template of listTemplates()) console.log(template.name, template.image);
 */
export function listTemplates(): Template[] {
  return [...templateCatalog().templates];
}

/**
 * What a template gives submitTask: everything but the GPU type, the duration and the price.
 *
 * @example
 * import { templateTask, type TemplateTaskParameters } from "suanli/sdk";
 * const parameters: TemplateTaskParameters = templateTask("vllm-openai").parameters;
 * console.log(parameters.image, parameters.ports); // docker.io/vllm/vllm-openai:v0.6.4.post1 [ 8000 ]
 */
export type TemplateTaskParameters = {
  /** The template's container image: a registry reference pinned to a tag. */
  image: string;
  /** The argv after the image (the arguments of the image's entrypoint when it has one). */
  command: string[];
  /** TCP ports the task serves, reachable with `client.forward`. */
  ports: number[];
  /** The template's environment, your `env` over it, and its generated secrets as `{ value, secret: true }`. */
  env: Record<string, string | { value: string; secret: true }>;
  /** Least memory per GPU the template needs, MiB. */
  minVramMiB: number;
  /** GPUs the template runs on. */
  gpuCount: number;
  /** For a training template: snapshot $SUANLI_CHECKPOINT_DIR this often, seconds. */
  checkpointPeriodSeconds?: number;
};

/**
 * What templateTask answers: the template, the submitTask parameters it gives, and the values of
 * the secrets it drew (a notebook's token): shown to you here only, sent to the task as secret
 * environment variables (never logged or stored by the provider).
 *
 * @example
 * import { templateTask, type TemplateTaskReturnType } from "suanli/sdk";
 * const { secrets }: TemplateTaskReturnType = templateTask("jupyter");
 * console.log(secrets.JUPYTER_TOKEN);
 */
export type TemplateTaskReturnType = { template: Template; parameters: TemplateTaskParameters; secrets: Record<string, string> };

/** 32 random bytes as lowercase hex. */
function randomSecret(): string {
  return Array.from(globalThis.crypto.getRandomValues(new Uint8Array(32)), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/**
 * The submitTask parameters of a catalog template, with its generated secrets drawn; add the GPU
 * type, the duration and the price (and override anything else: later keys win). `env` is added
 * over the template's own. An unknown name throws UnknownTemplateError, listing the known ones.
 *
 * @example
 * import { createClient, templateTask } from "suanli/sdk";
 * const client = createClient({ ... });
 * const { parameters, secrets } = templateTask("jupyter");
 * const { taskId } = await client.submitTask({ ...parameters, gpuType: "A100", duration: 3600, maxPricePerGpuHour: "2.50" });
 * console.log(`token ${secrets.JUPYTER_TOKEN}: npx suanli forward ${taskId} 8888`);
 */
export function templateTask(name: string, options: { env?: Record<string, string> } = {}): TemplateTaskReturnType {
  const template = findTemplate(name);
  const secrets = Object.fromEntries(template.generatedSecrets.map((variable) => [variable, randomSecret()]));
  const env: TemplateTaskParameters["env"] = { ...template.env, ...options.env };
  for (const [variable, value] of Object.entries(secrets)) env[variable] = { value, secret: true };
  return {
    template,
    parameters: {
      image: template.image,
      command: [...template.command],
      ports: [...template.ports],
      env,
      minVramMiB: template.minVramMiB,
      gpuCount: template.gpuCount,
      ...(template.checkpointPeriodSeconds !== undefined ? { checkpointPeriodSeconds: template.checkpointPeriodSeconds } : {}),
    },
    secrets,
  };
}
