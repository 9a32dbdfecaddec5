/**
 * The renter console: a page any node serves at /console/ where a renter's own browser wallet
 * (an EIP-1193 provider, `window.ethereum`) shows its balance and the live offers, submits a task,
 * watches its state and logs, reads its receipt and cancels, extends or downloads it. Everything
 * goes through the browser SDK (sdk/browser.ts): requests to providers through this node's relay,
 * signed by a session key the wallet delegates to once (session.ts); payments by the wallet. Secret
 * env values are sealed by the SDK, in this page, to the provider's key before they leave it.
 * Everything shown comes from the network or the user, so it is written as text, never as HTML.
 */
import { createPublicClient, custom, erc20Abi, formatUnits, http } from "viem";
import { consoleConfigSchema } from "../../../../common/api/console.js";
import { nodeInfoSchema } from "../../../../common/api/market.js";
import { runDetached } from "../../../../common/detached.js";
import { $, cell } from "./dom.js";
import { describe, getJson, show, state, token, tokens, trimFraction, type TaskRow } from "./state.js";
import { addEnvRow, FormError, markInvalid, readForm } from "./form.js";
import { startSession } from "./session.js";
import { createClient, type OfferSummary, type SubmitTaskParameters, type TaskReceipt, type TaskStatus } from "../../../../sdk/browser.js";

const FINAL_STATES = new Set(["succeeded", "failed", "exceeded", "stopped", "preempted"]);
const ENDED_LEASES = new Set(["Ended", "Settled", "Cancelled"]);
const STATUS_INTERVAL_MS = 3000;

// ---------------------------------------------------------------------------------------------
// Wallet

async function connect(): Promise<void> {
  show("#wallet-error", undefined);
  const config = state.config!;
  const wallet = window.ethereum;
  if (!wallet) {
    show("#wallet-error", "No browser wallet found. Install or enable a wallet extension (any EIP-1193 wallet), then reload this page.");
    return;
  }
  if (!config.rpcUrl) {
    show("#wallet-error", "This node publishes no chain RPC URL for browsers, so the console cannot read the chain. Its operator sets api.console.rpcUrl (docs/console.md).");
    return;
  }
  const button = $<HTMLButtonElement>("#connect");
  button.disabled = true;
  button.textContent = "Connecting…";
  try {
    const accounts = (await wallet.request({ method: "eth_requestAccounts" })) as `0x${string}`[];
    if (!accounts[0]) throw new Error("The wallet shared no account.");
    const walletChain = Number(await wallet.request({ method: "eth_chainId" }));
    if (walletChain !== config.chainId) {
      try {
        await wallet.request({ method: "wallet_switchEthereumChain", params: [{ chainId: `0x${config.chainId.toString(16)}` }] });
      } catch (error) {
        throw new Error(`The wallet is on chain ${walletChain}; this node serves chain ${config.chainId}. Switch the wallet to chain ${config.chainId}. (${describe(error)})`, {
          cause: error,
        });
      }
    }
    await state.client?.close();
    state.client = await createClient({
      rpcUrl: config.rpcUrl,
      nodeUrl: window.location.origin,
      account: accounts[0],
      walletTransport: custom(wallet),
      deployment: state.rawDeployment!,
      onProgress: (line) => {
        $(state.progressTarget).textContent = line;
      },
    });
    await startSession(config.deployment.contracts.sessions !== undefined);
    state.wallet = wallet;
    state.address = accounts[0];
    wallet.on?.("accountsChanged", onAccountsChanged);
    $("#wallet-address").textContent = accounts[0];
    $("#wallet-facts").hidden = false;
    button.textContent = "Reconnect wallet";
    $<HTMLButtonElement>("#submit-button").disabled = false;
    $<HTMLButtonElement>("#offers-refresh").disabled = false;
    await Promise.all([refreshBalances(), refreshOffers()]);
    document.body.dataset.connected = "true";
  } catch (error) {
    show("#wallet-error", describe(error));
    button.textContent = "Connect wallet";
  } finally {
    button.disabled = false;
  }
}

function onAccountsChanged(accounts: unknown): void {
  const next = (accounts as string[])[0];
  if (next?.toLowerCase() === state.address?.toLowerCase()) return;
  // Tasks belong to the wallet that paid for them: start over with the new account.
  state.tasks.clear();
  stopWatching();
  $("#task").hidden = true;
  renderTasks();
  runDetached(connect(), console, "connect");
}

async function refreshBalances(): Promise<void> {
  const config = state.config!;
  const client = state.client!;
  const reader = createPublicClient({ transport: http(config.rpcUrl!) });
  try {
    const [balance, gas, owed] = await Promise.all([
      reader.readContract({ address: config.deployment.contracts.token, abi: erc20Abi, functionName: "balanceOf", args: [state.address!] }),
      reader.getBalance({ address: state.address! }),
      client.owed(),
    ]);
    $("#wallet-balance").textContent = tokens(balance);
    $("#wallet-gas").textContent = `${trimFraction(formatUnits(gas, 18), 6)} ETH`;
    $("#wallet-owed").textContent = tokens(owed);
  } catch (error) {
    show("#wallet-error", `Could not read the balances: ${describe(error)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Offers

async function refreshOffers(): Promise<void> {
  const client = state.client;
  if (!client) return;
  let offers: OfferSummary[];
  try {
    offers = await client.queryOffers();
  } catch (error) {
    show("#wallet-error", `Could not load the offers: ${describe(error)}`);
    return;
  }
  offers.sort((a, b) => (a.pricePerUnitSecond < b.pricePerUnitSecond ? -1 : a.pricePerUnitSecond > b.pricePerUnitSecond ? 1 : 0));
  const body = $("#offers-table tbody");
  body.replaceChildren(
    ...offers.map((offer) => {
      const row = document.createElement("tr");
      row.dataset.key = offer.key;
      row.append(
        cell(offer.model),
        cell(`${offer.freeUnits} / ${offer.units}`, "num"),
        cell(offer.region),
        cell(`${offer.pricePerGpuHour} ${token().symbol}`, "num price"),
        cell(offer.attested ? "yes" : "no"),
        cell(`${offer.provider.slice(0, 6)}…${offer.provider.slice(-4)}`),
      );
      const use = document.createElement("button");
      use.type = "button";
      use.className = "secondary use-offer";
      use.textContent = "Use";
      use.setAttribute("aria-label", `Use ${offer.model} at ${offer.pricePerGpuHour} ${token().symbol} per GPU-hour in ${offer.region}`);
      use.addEventListener("click", () => {
        $<HTMLInputElement>("#gpu-type").value = offer.model;
        $<HTMLInputElement>("#max-price").value = offer.pricePerGpuHour;
        $<HTMLInputElement>("#attested-only").checked = offer.attested;
        $<HTMLInputElement>("#gpu-count").focus();
      });
      const action = document.createElement("td");
      action.append(use);
      row.append(action);
      return row;
    }),
  );
  $("#offers-count").textContent = `(${offers.length})`;
  show("#offers-empty", offers.length ? undefined : "No live offer right now.");
}

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

async function cancelSelected(): Promise<void> {
  const taskId = state.selected;
  if (!taskId) return;
  setTaskButtons(false);
  state.progressTarget = "#task-message";
  $("#task-message").textContent = "Cancelling: stopping the task and closing the lease (the wallet sends the transaction)…";
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
  $("#task-message").textContent = `Extending by ${seconds} s (the wallet approves and sends the deposit)…`;
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

async function downloadSelected(): Promise<void> {
  const taskId = state.selected;
  if (!taskId) return;
  show("#task-error", undefined);
  const list = $("#task-files");
  for (const link of list.querySelectorAll("a")) URL.revokeObjectURL(link.href);
  list.replaceChildren();
  $("#task-message").textContent = "Downloading the results…";
  try {
    // Through this node's relay into memory; the SDK recomputes the digest and checks it against
    // the provider's signed completion report and the chain (verified), or says it is a snapshot.
    const result = await state.client!.downloadOutput(taskId, {
      onProgress: ({ bytes, totalBytes }) => ($("#task-message").textContent = `Downloading the results… ${bytes} of ${totalBytes} bytes`),
    });
    for (const file of result.files) {
      const item = document.createElement("li");
      const link = document.createElement("a");
      link.href = URL.createObjectURL(new Blob([new Uint8Array(file.data ?? [])], { type: "application/octet-stream" }));
      link.download = file.path.split("/").pop() || "output";
      link.textContent = `${file.path} (${file.size} bytes)`;
      item.append(link);
      list.append(item);
    }
    const check = result.verified
      ? `verified against ${result.verifiedAgainst === "chain" ? "the chain's completion report" : "the provider's signed completion report"} (digest ${result.digest})`
      : result.snapshot
        ? "UNVERIFIED: a snapshot of a running task (nothing is signed until it ends)"
        : "UNVERIFIED";
    $("#task-message").textContent = `Downloaded ${result.files.length} file(s), ${result.bytes} bytes, ${check}.`;
  } catch (error) {
    $("#task-message").textContent = "";
    show("#task-error", describe(error));
  }
}

// ---------------------------------------------------------------------------------------------

function toggleKind(): void {
  const kind = document.querySelector<HTMLInputElement>('input[name="kind"]:checked')?.value;
  $("#bundle-fields").hidden = kind !== "bundle";
  $("#image-fields").hidden = kind !== "image";
}

async function start(): Promise<void> {
  $("#connect").addEventListener("click", () => runDetached(connect(), console, "connect"));
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
    if (!state.config.rpcUrl) {
      show("#wallet-error", "This node publishes no chain RPC URL for browsers, so the console cannot read the chain. Its operator sets api.console.rpcUrl (docs/console.md).");
    } else if (!window.ethereum) {
      show("#wallet-error", "No browser wallet found. Install or enable a wallet extension (any EIP-1193 wallet), then reload this page.");
    }
  } catch (error) {
    show("#wallet-error", `This node's console configuration could not be read: ${describe(error)}`);
  }
  document.body.dataset.ready = "true";
}

runDetached(start(), console, "start");
