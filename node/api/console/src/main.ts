/**
 * The renter console: a page any node serves at /console/ where a renter's own browser wallet
 * (an EIP-1193 provider, `window.ethereum`), or a passkey owning an ERC-4337 smart account
 * (passkey.ts), shows its balance and the live offers, submits a task, watches its state and logs,
 * reads its receipt and cancels, extends or downloads it. Everything goes through the browser SDK
 * (sdk/browser.ts): requests to providers through this node's relay, signed by a session key the
 * wallet delegates to (or the account approves) once (session.ts); payments by the wallet, or by
 * the smart account's user operations through the node's bundler, gas paid by the sponsor. Secret
 * env values are sealed by the SDK, in this page, to the provider's key before they leave it.
 * Everything shown comes from the network or the user, so it is written as text, never as HTML.
 */
import { consoleConfigSchema } from "../../../../common/api/console.js";
import { nodeInfoSchema } from "../../../../common/api/market.js";
import { runDetached } from "../../../../common/detached.js";
import { $, cell } from "./dom.js";
import { describe, getJson, show, state, tokens, type TaskRow } from "./state.js";
import { addEnvRow, FormError, markInvalid, readForm } from "./form.js";
import { downloadSelected } from "./download.js";
import { refreshOffers } from "./offers.js";
import { passkeyUnavailable, rememberedPasskey } from "./passkey.js";
import { connect, connectPasskey, refreshBalances } from "./signin.js";
import type { SubmitTaskParameters, TaskReceipt, TaskStatus } from "../../../../sdk/browser.js";

const FINAL_STATES = new Set(["succeeded", "failed", "exceeded", "stopped", "preempted"]);
const ENDED_LEASES = new Set(["Ended", "Settled", "Cancelled"]);
const STATUS_INTERVAL_MS = 3000;

// ---------------------------------------------------------------------------------------------
// Submit
// The form itself: form.ts.

async function submit(event: SubmitEvent): Promise<void> {
  event.preventDefault();
  const client = state.client;
  if (!client) return;
  const button = $<HTMLButtonElement>("#submit-button");
  show("#submit-error", undefined);
  markInvalid([]);
  let parameters: SubmitTaskParameters;
  try {
    parameters = readForm();
  } catch (error) {
    show("#submit-error", describe(error));
    markInvalid((error as FormError).fields ?? []);
    return;
  }
  button.disabled = true;
  state.progressTarget = "#submit-status";
  show("#submit-status", "Matching offers…");
  try {
    const submitted = await client.submitTask(parameters);
    const row: TaskRow = { submitted, state: "submitted", units: submitted.attempt.units, model: submitted.attempt.model };
    state.tasks.set(submitted.taskId, row);
    renderTasks();
    show("#submit-status", `Submitted ${submitted.taskId}: lease ${submitted.leaseId} with ${submitted.provider}, deposit ${tokens(submitted.attempt.deposit)}.`);
    // Secret values leave the form once sent: they are the renter's, not the page's.
    for (const secret of document.querySelectorAll<HTMLInputElement>('#env-rows input[type="password"]')) secret.value = "";
    runDetached(refreshBalances(), console, "refreshBalances");
    selectTask(submitted.taskId);
  } catch (error) {
    show("#submit-status", undefined);
    show("#submit-error", describe(error));
    markInvalid((error as { fields?: string[] }).fields ?? []);
  } finally {
    button.disabled = false;
  }
}

// ---------------------------------------------------------------------------------------------
// Tasks

function renderTasks(): void {
  const rows = [...state.tasks.values()].reverse();
  $("#tasks-table").hidden = rows.length === 0;
  $("#tasks-empty").hidden = rows.length > 0;
  $("#tasks-table tbody").replaceChildren(
    ...rows.map((task) => {
      const row = document.createElement("tr");
      row.dataset.task = task.submitted.taskId;
      row.append(cell(task.submitted.taskId), cell(String(task.submitted.leaseId), "num"), cell(`${task.units}× ${task.model}`), cell(task.state, "state"));
      const open = document.createElement("button");
      open.type = "button";
      open.className = "secondary";
      open.textContent = "Open";
      open.setAttribute("aria-label", `Open task ${task.submitted.taskId}`);
      open.addEventListener("click", () => selectTask(task.submitted.taskId));
      const action = document.createElement("td");
      action.append(open);
      row.append(action);
      if (task.submitted.taskId === state.selected) row.setAttribute("aria-current", "true");
      return row;
    }),
  );
}

function stopWatching(): void {
  state.watch?.abort();
  state.watch = undefined;
}

function selectTask(taskId: string): void {
  stopWatching();
  const task = state.tasks.get(taskId);
  if (!task) return;
  state.selected = taskId;
  const watch = new AbortController();
  state.watch = watch;
  $("#task-id").textContent = taskId;
  $("#task-lease").textContent = String(task.submitted.leaseId);
  $("#task-provider").textContent = task.submitted.provider;
  $("#task-state").textContent = task.state;
  $("#task-cost").textContent = "";
  $("#task-end").textContent = "";
  $("#task-logs").replaceChildren();
  $("#receipt").hidden = true;
  $("#task-message").textContent = "";
  show("#task-error", undefined);
  setTaskButtons(true);
  $("#task").hidden = false;
  $("#task").dataset.task = taskId;
  renderTasks();
  runDetached(followLogs(taskId, watch.signal), console, "followLogs");
  runDetached(pollStatus(taskId, watch.signal), console, "pollStatus");
  $("#task-heading").scrollIntoView({ block: "start" });
}

function setTaskButtons(running: boolean): void {
  $<HTMLButtonElement>("#task-cancel").disabled = !running;
  $<HTMLButtonElement>("#task-extend").disabled = !running;
}

async function followLogs(taskId: string, signal: AbortSignal): Promise<void> {
  const pre = $("#task-logs");
  try {
    for await (const line of state.client!.logs(taskId, { follow: true, waitMs: 10_000, signal })) {
      if (signal.aborted) return;
      const span = document.createElement("span");
      span.className = line.stream;
      span.textContent = `${line.stream === "stdout" ? "" : `[${line.stream}] `}${line.text}\n`;
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(span);
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    }
    if (!signal.aborted) pre.dataset.done = "true";
  } catch (error) {
    if (!signal.aborted) show("#task-error", `Logs: ${describe(error)}`);
  }
}

async function pollStatus(taskId: string, signal: AbortSignal): Promise<void> {
  const client = state.client!;
  for (;;) {
    if (signal.aborted || state.finished.has(taskId)) return;
    let status: TaskStatus | undefined;
    try {
      status = await client.status(taskId);
    } catch (error) {
      if (!signal.aborted) show("#task-error", `Status: ${describe(error)}`);
    }
    if (signal.aborted || state.finished.has(taskId)) return;
    if (status) {
      renderStatus(taskId, status);
      if (FINAL_STATES.has(status.state) || ENDED_LEASES.has(status.lease.status)) {
        setTaskButtons(false);
        await showReceipt(taskId, () => client.wait(taskId, { signal }), signal);
        return;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, STATUS_INTERVAL_MS));
  }
}

function renderStatus(taskId: string, status: TaskStatus): void {
  const task = state.tasks.get(taskId);
  const text = `${status.state} (lease ${status.lease.status}${status.lease.endReason !== "None" ? `, ${status.lease.endReason}` : ""})`;
  if (task && task.state !== status.state) {
    task.state = status.state;
    renderTasks();
  }
  $("#task-state").textContent = text;
  $("#task-state").dataset.state = status.state;
  // Once the lease has ended its deposit field is the provider's final total (the rest came back):
  // "X of X deposited" read as if the whole deposit was spent (issue #40 item 6).
  const ended = status.lease.status === "Ended" || status.lease.status === "Settled";
  $("#task-cost").textContent = ended
    ? `${tokens(status.lease.deposit)} in all (final; the rest of the deposit came back)`
    : `${tokens(status.lease.accruedNow)} of ${tokens(status.lease.deposit)} deposited`;
  $("#task-end").textContent = status.lease.end ? new Date(status.lease.end * 1000).toLocaleString() : "not started";
  if (status.error) show("#task-error", `${status.error.name}: ${status.error.message}`);
}

async function showReceipt(taskId: string, read: () => Promise<TaskReceipt>, signal?: AbortSignal): Promise<void> {
  let receipt: TaskReceipt;
  try {
    receipt = await read();
  } catch (error) {
    if (!signal?.aborted) show("#task-error", `Receipt: ${describe(error)}`);
    return;
  }
  if (signal?.aborted || state.selected !== taskId) return;
  state.finished.add(taskId);
  const facts: [string, string][] = [
    ["State", receipt.state],
    ["Exit code", receipt.exitCode === null ? "none" : String(receipt.exitCode)],
    [
      "Completion",
      receipt.completion
        ? `${receipt.completion.verified ? "verified on-chain" : "not verified (on-chain record only: no signed report from the provider matched it)"} · exit ${receipt.completion.exitCode} · ${receipt.completion.unitSeconds} GPU-seconds · output ${receipt.completion.outputDigest}`
        : "no completion report (the task did not complete)",
    ],
    ["Paid", tokens(receipt.totalCost)],
    ["Refunded", tokens(receipt.totalRefunded)],
    ["Gas used", String(receipt.totalGasUsed)],
    ...receipt.leases.map((lease): [string, string] => [
      `Lease ${lease.leaseId}`,
      `${lease.units}× ${lease.model}, ${lease.seconds} s, ${lease.status} (${lease.endReason}), cost ${tokens(lease.cost)}`,
    ]),
  ];
  const list = $("#receipt-facts");
  list.replaceChildren(
    ...facts.flatMap(([term, value]) => {
      const dt = document.createElement("dt");
      dt.textContent = term;
      const dd = document.createElement("dd");
      dd.textContent = value;
      if (term === "Completion") dd.className = receipt.completion?.verified ? "ok completion" : "error completion";
      return [dt, dd];
    }),
  );
  $("#receipt").hidden = false;
  $("#receipt").dataset.state = receipt.state;
  const last = receipt.leases.at(-1);
  $("#task-state").textContent = `${receipt.state}${last ? ` (lease ${last.status}, ${last.endReason})` : ""}`;
  $("#task-state").dataset.state = receipt.state;
  const task = state.tasks.get(taskId);
  if (task) {
    task.state = receipt.state;
    renderTasks();
  }
  setTaskButtons(false);
  runDetached(refreshBalances(), console, "refreshBalances");
}

/** Who is asked for a payment: the wallet, or the passkey for the smart account's one user operation. */
const approves = (walletDoes: string) => (state.signer === "passkey" ? "your passkey approves one user operation" : `the wallet ${walletDoes}`);

async function cancelSelected(): Promise<void> {
  const taskId = state.selected;
  if (!taskId) return;
  setTaskButtons(false);
  state.progressTarget = "#task-message";
  $("#task-message").textContent = `Cancelling: stopping the task and closing the lease (${approves("sends the transaction")})…`;
  show("#task-error", undefined);
  try {
    const receipt = await state.client!.cancel(taskId);
    $("#task-message").textContent = `Cancelled. Refunded ${tokens(receipt.totalRefunded)}.`;
    await showReceipt(taskId, async () => receipt);
  } catch (error) {
    $("#task-message").textContent = "";
    show("#task-error", describe(error));
    setTaskButtons(true);
  }
}

async function extendSelected(): Promise<void> {
  const taskId = state.selected;
  if (!taskId) return;
  const seconds = Number($<HTMLInputElement>("#extend-seconds").value);
  show("#task-error", undefined);
  const button = $<HTMLButtonElement>("#task-extend");
  button.disabled = true;
  state.progressTarget = "#task-message";
  $("#task-message").textContent = `Extending by ${seconds} s (${approves("approves and sends the deposit")})…`;
  try {
    const extended = await state.client!.extend(taskId, { seconds });
    $("#task-message").textContent =
      `Extended lease ${extended.leaseId} by ${seconds} s for ${tokens(extended.extraDeposit)}: paid until ${new Date(extended.newEnd * 1000).toLocaleString()}.`;
    $("#task-end").textContent = new Date(extended.newEnd * 1000).toLocaleString();
    runDetached(refreshBalances(), console, "refreshBalances");
  } catch (error) {
    $("#task-message").textContent = "";
    show("#task-error", describe(error));
  } finally {
    button.disabled = false;
  }
}

// ---------------------------------------------------------------------------------------------

function toggleKind(): void {
  const kind = document.querySelector<HTMLInputElement>('input[name="kind"]:checked')?.value;
  $("#bundle-fields").hidden = kind !== "bundle";
  $("#image-fields").hidden = kind !== "image";
}

async function start(): Promise<void> {
  document.addEventListener("renter-changed", () => {
    state.tasks.clear();
    state.finished.clear();
    stopWatching();
    $("#task").hidden = true;
    renderTasks();
  });
  $("#connect").addEventListener("click", () => runDetached(connect(), console, "connect"));
  $("#passkey-signin").addEventListener("click", () => runDetached(connectPasskey(false), console, "connectPasskey"));
  $("#passkey-new").addEventListener("click", () => runDetached(connectPasskey(true), console, "connectPasskey"));
  $("#offers-refresh").addEventListener("click", () => runDetached(refreshOffers(), console, "refreshOffers"));
  $("#env-add").addEventListener("click", addEnvRow);
  $<HTMLFormElement>("#submit-form").addEventListener("submit", (event) => runDetached(submit(event), console, "submit"));
  for (const radio of document.querySelectorAll('input[name="kind"]')) radio.addEventListener("change", toggleKind);
  $("#task-cancel").addEventListener("click", () => runDetached(cancelSelected(), console, "cancelSelected"));
  $("#task-extend").addEventListener("click", () => runDetached(extendSelected(), console, "extendSelected"));
  $("#task-download").addEventListener("click", () => runDetached(downloadSelected(), console, "downloadSelected"));
  try {
    const raw = (await getJson("/console/config.json")) as { deployment: Record<string, unknown> };
    state.config = consoleConfigSchema.parse(raw);
    state.rawDeployment = raw.deployment;
    const info = nodeInfoSchema.parse(await getJson("/v1/info"));
    $("#chain").textContent = `chain ${info.chainId} · token ${info.token.symbol}`;
    $("#gpu-models").replaceChildren(
      ...info.gpuModels.map((model) => {
        const option = document.createElement("option");
        option.value = model.name;
        return option;
      }),
    );
    const noPasskey = passkeyUnavailable(state.config);
    $("#passkey-buttons").hidden = noPasskey !== undefined;
    $("#passkey-status").textContent = noPasskey ? `Passkey sign-in: ${noPasskey}` : rememberedPasskey() ? "This browser remembers a passkey for this page." : "";
    if (!noPasskey && rememberedPasskey()) $("#passkey-signin").textContent = "Sign in with your passkey";
    if (!state.config.rpcUrl) {
      show("#wallet-error", "This node publishes no chain RPC URL for browsers, so the console cannot read the chain. Its operator sets api.console.rpcUrl (docs/console.md).");
    } else if (!window.ethereum && noPasskey) {
      show("#wallet-error", "No browser wallet found. Install or enable a wallet extension (any EIP-1193 wallet), then reload this page.");
    }
  } catch (error) {
    show("#wallet-error", `This node's console configuration could not be read: ${describe(error)}`);
  }
  document.body.dataset.ready = "true";
}

runDetached(start(), console, "start");
