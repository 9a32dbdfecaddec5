/**
 * The template catalog (common/templates/catalog.ts, docs/templates.md): every template validates
 * and becomes a task the SDK accepts; the SDK draws each generated secret afresh; the schema names
 * what is wrong with a bad entry; the node serves the same catalog at GET /v1/templates; the CLI
 * lists it and prints a `suanli submit` line whose flags the CLI accepts.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import type { AddressInfo } from "node:net";
import { TEMPLATE_CATALOG_SOURCE, templateCatalog, templateCatalogSchema, UnknownTemplateError } from "../../common/templates/catalog.js";
import { listTemplates, parseSubmitParameters, templateTask } from "../../sdk/index.js";
import { startApiFixture } from "../support/api-fixture.js";
import { lastJson, runCli } from "../support/cli.js";

const renterChoice = { gpuType: "A100", duration: 3600, maxPricePerGpuHour: "2.50" };

describe("template catalog", function () {
  this.timeout(60_000);

  it("has the five templates the issue names, each a task the SDK accepts as it stands", () => {
    assert.deepEqual(
      listTemplates().map((t) => t.name),
      ["vllm-openai", "jupyter", "comfyui", "pytorch-train", "ollama"],
    );
    for (const name of listTemplates().map((t) => t.name)) {
      const { template, parameters } = templateTask(name);
      const { spec, request } = parseSubmitParameters({ ...parameters, ...renterChoice });
      assert.equal(spec.image, template.image, name);
      assert.deepEqual(spec.command, template.command, name);
      assert.deepEqual(spec.ports ?? [], template.ports, name);
      assert.equal(request.minVramMiB, template.minVramMiB, name);
      assert.equal(request.gpuCount, template.gpuCount, name);
      assert.ok(!template.image.endsWith(":latest"), `${name} pins its image`);
    }
    assert.deepEqual(parseSubmitParameters({ ...templateTask("pytorch-train").parameters, ...renterChoice }).spec.checkpoint, { periodSeconds: 600 });
  });

  it("draws each generated secret afresh, as a secret environment variable; the renter's env adds to the template's", () => {
    const one = templateTask("jupyter");
    const two = templateTask("jupyter");
    assert.match(one.secrets.JUPYTER_TOKEN!, /^[0-9a-f]{64}$/);
    assert.notEqual(one.secrets.JUPYTER_TOKEN, two.secrets.JUPYTER_TOKEN);
    assert.deepEqual(one.parameters.env.JUPYTER_TOKEN, { value: one.secrets.JUPYTER_TOKEN, secret: true });
    const vllm = templateTask("vllm-openai", { env: { HF_TOKEN: "hf_x" } });
    assert.deepEqual(vllm.parameters.env, { HF_HOME: "/tmp/hf", HF_TOKEN: "hf_x" });
    assert.deepEqual(vllm.secrets, {});
  });

  it("an unknown name is UnknownTemplateError listing the known ones", () => {
    assert.throws(
      () => templateTask("jupyterlab"),
      (error: unknown) => error instanceof UnknownTemplateError && /No template named "jupyterlab"/.test(error.message) && /vllm-openai, jupyter, comfyui/.test(error.message),
    );
  });

  it("the schema names what is wrong: a name twice, a moving tag, a generated secret also set, a health path without a port", () => {
    const base = TEMPLATE_CATALOG_SOURCE.templates[0]!;
    const problems = (templates: unknown[]) => {
      const result = templateCatalogSchema.safeParse({ version: 1, templates });
      assert.equal(result.success, false);
      return result.error!.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
    };
    assert.deepEqual(problems([base, base]), ["templates.1.name: vllm-openai is named twice"]);
    assert.deepEqual(problems([{ ...base, image: "docker.io/vllm/vllm-openai:latest" }]), ["templates.0.image: pin a tag: latest moves"]);
    assert.deepEqual(problems([{ ...base, env: { TOKEN: "x" }, generatedSecrets: ["TOKEN"] }]), [
      "templates.0.generatedSecrets: TOKEN is also in env: a variable is either set or generated",
    ]);
    assert.deepEqual(problems([{ ...base, ports: [] }]), ["templates.0.healthPath: a health path needs a port to serve it on"]);
  });

  it("GET /v1/templates serves the same catalog", async () => {
    const fx = await startApiFixture();
    try {
      const response = await fx.api.app.inject({ method: "GET", url: "/v1/templates" });
      assert.equal(response.statusCode, 200);
      assert.deepEqual(response.json(), templateCatalog());
    } finally {
      await fx.close();
    }
  });

  it("suanli templates lists them; `templates show` prints a submit line whose flags the CLI accepts; an unknown name exits 2", async () => {
    const listed = await runCli(["templates", "--json"]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(
      lastJson<{ templates: { name: string }[] }>(listed.stdout).templates.map((t) => t.name),
      listTemplates().map((t) => t.name),
    );
    const shown = await runCli(["templates", "show", "vllm-openai", "--json"]);
    assert.equal(shown.code, 0, shown.stderr);
    const line = lastJson<{ submit: string }>(shown.stdout).submit;
    assert.equal(
      line,
      "npx suanli submit --gpu <GPU> --count 1 --duration <seconds> --max-price <usd> --image docker.io/vllm/vllm-openai:v0.6.4.post1 --min-vram 16384 --port 8000 --env HF_HOME=/tmp/hf -- --model Qwen/Qwen2.5-0.5B-Instruct --host 0.0.0.0 --port 8000",
    );
    const unknown = await runCli(["templates", "show", "nope"]);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /No template named "nope"[\s\S]*vllm-openai, jupyter/);

    // With <GPU>, <seconds> and <usd> given values, the line passes the CLI's flag checks and goes on to reach the chain (here a port that closes every connection).
    const server: Server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const rpcUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const args = line.replace("<GPU>", "A100").replace("<seconds>", "600").replace("<usd>", "2").split(" ").slice(2);
      const submitted = await runCli([...args.slice(0, args.indexOf("--")), "--rpc-url", rpcUrl, "--devnet-account", "5", ...args.slice(args.indexOf("--"))]);
      assert.notEqual(submitted.code, 2, `the printed flags are accepted: ${submitted.stderr}`);
      assert.doesNotMatch(submitted.stderr, /problems? with the command line/);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
