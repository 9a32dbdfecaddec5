/**
 * The submit form of the renter console: the env rows, reading the fields into the SDK's
 * submitTask parameters, and marking the fields an error names.
 */
import type { SubmitTaskParameters } from "../../../../sdk/browser.js";
import { $ } from "./dom.js";

let envCounter = 0;

export function addEnvRow(): void {
  const n = ++envCounter;
  const li = document.createElement("li");
  li.dataset.env = String(n);
  const name = input(`env-name-${n}`, "text", "NAME");
  const value = input(`env-value-${n}`, "text", "value");
  const secretId = `env-secret-${n}`;
  const secret = document.createElement("input");
  secret.type = "checkbox";
  secret.id = secretId;
  secret.addEventListener("change", () => {
    // A secret is not shown on screen (and not kept by the browser's form history).
    value.type = secret.checked ? "password" : "text";
  });
  const secretLabel = document.createElement("label");
  secretLabel.className = "check";
  secretLabel.append(secret, " Secret");
  const remove = document.createElement("button");
  remove.type = "button";
  remove.textContent = "Remove";
  remove.setAttribute("aria-label", `Remove variable ${n}`);
  remove.addEventListener("click", () => {
    li.remove();
    $<HTMLButtonElement>("#env-add").focus();
  });
  li.append(labelled(name, `Variable ${n} name`), labelled(value, `Variable ${n} value`), secretLabel, remove);
  $("#env-rows").append(li);
  name.focus();
}

function input(id: string, type: string, placeholder: string): HTMLInputElement {
  const element = document.createElement("input");
  element.id = id;
  element.type = type;
  element.placeholder = placeholder;
  element.spellcheck = false;
  element.autocomplete = "off";
  return element;
}

/** Wraps an input in a label whose text is for screen readers only (the row's layout shows what it is). */
function labelled(element: HTMLInputElement, text: string): HTMLLabelElement {
  const label = document.createElement("label");
  const span = document.createElement("span");
  span.className = "visually-hidden";
  span.textContent = text;
  label.append(span, element);
  return label;
}

export const FIELD_INPUTS: Record<string, string> = {
  gpuType: "#gpu-type",
  gpuCount: "#gpu-count",
  duration: "#duration",
  maxPricePerGpuHour: "#max-price",
  cpuCores: "#cpu-cores",
  memoryGiB: "#memory-gib",
  diskGiB: "#disk-gib",
  bundleUrl: "#bundle-url",
  sha256: "#bundle-sha256",
  imageUrl: "#image",
  command: "#command",
};

export class FormError extends Error {
  override name = "InvalidInputError";
  constructor(
    message: string,
    readonly fields: string[],
  ) {
    super(message);
  }
}

export function readForm(): SubmitTaskParameters {
  const text = (selector: string) => $<HTMLInputElement>(selector).value.trim();
  const number = (selector: string) => (text(selector) === "" ? undefined : Number(text(selector)));
  const required = (selector: string, label: string, field: string) => {
    const value = text(selector);
    if (value === "") throw new FormError(`The ${label} is required`, [field]);
    return value;
  };
  const kind = document.querySelector<HTMLInputElement>('input[name="kind"]:checked')?.value ?? "bundle";
  const env: Record<string, string | { value: string; secret: true }> = {};
  for (const row of document.querySelectorAll<HTMLLIElement>("#env-rows li")) {
    const n = row.dataset.env!;
    const name = text(`#env-name-${n}`);
    const value = $<HTMLInputElement>(`#env-value-${n}`).value;
    const secret = $<HTMLInputElement>(`#env-secret-${n}`).checked;
    if (!name && !value) continue;
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new FormError(`Variable ${n}: the name must be letters, digits and _ (not starting with a digit)`, [`env-name-${n}`]);
    if (name in env) throw new FormError(`Variable ${n}: ${name} is given twice`, [`env-name-${n}`]);
    env[name] = secret ? { value, secret: true } : value;
  }
  return {
    gpuType: required("#gpu-type", "GPU type", "gpu-type"),
    gpuCount: number("#gpu-count") as number,
    duration: number("#duration") as number,
    maxPricePerGpuHour: text("#max-price") || undefined,
    cpuCores: number("#cpu-cores"),
    memoryGiB: number("#memory-gib"),
    diskGiB: number("#disk-gib"),
    attestedOnly: $<HTMLInputElement>("#attested-only").checked,
    ...(kind === "bundle" ? { bundleUrl: text("#bundle-url") || undefined, sha256: text("#bundle-sha256") || undefined } : { image: text("#image") || undefined }),
    command: required("#command", "command", "command"),
    env,
  };
}

export function markInvalid(fields: string[]): void {
  for (const element of document.querySelectorAll("#submit-form [aria-invalid]")) element.removeAttribute("aria-invalid");
  let first: HTMLElement | undefined;
  for (const field of fields) {
    const top = field.split(".")[0]!;
    const selector = FIELD_INPUTS[top] ?? (top.startsWith("env-") ? `#${top}` : top === "env" ? "#env-rows input" : undefined);
    const element = selector ? document.querySelector<HTMLElement>(selector) : null;
    if (!element) continue;
    element.setAttribute("aria-invalid", "true");
    element.setAttribute("aria-errormessage", "submit-error");
    first ??= element;
  }
  first?.focus();
}
