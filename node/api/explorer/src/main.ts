/**
 * The explorer page: live offers with filters, a price chart per GPU model, provider details, kept
 * current by the node's event stream. It reads only this node's HTTP API, decoding every answer with
 * the shared schemas of common/api (the same ones the SDK's browser client uses). Everything shown
 * comes from the network, so it is written as text, never as HTML.
 */
import { providerViewSchema, type ProviderView } from "../../../../common/api/chain.js";
import { marketStatsSchema, nodeInfoSchema, type NodeInfo } from "../../../../common/api/market.js";
import { offerPageSchema, offerViewSchema, type OfferView } from "../../../../common/api/offers.js";
import { runDetached } from "../../../../common/detached.js";
import { drawPriceChart } from "./chart.js";
import { formatTokens, parseTokens, relativeTime, shortAddress } from "./format.js";

const PAGE_SIZE = 25;
const FRESH_MS = 6000;

const $ = <T extends HTMLElement>(selector: string): T => {
  const node = document.querySelector<T>(selector);
  if (!node) throw new Error(`explorer page lacks ${selector}`);
  return node;
};

const state = {
  info: undefined as NodeInfo | undefined,
  offset: 0,
  total: 0,
  /** Offer keys announced by the event stream recently, highlighted in the table. */
  fresh: new Map<string, number>(),
  provider: undefined as string | undefined,
  queryGeneration: 0,
};

class ApiRequestError extends Error {
  override name = "ApiRequestError";
  constructor(
    message: string,
    readonly status: number,
    readonly errorName: string,
  ) {
    super(message);
  }
}

async function getJson(path: string, params?: URLSearchParams): Promise<unknown> {
  const url = new URL(path, window.location.origin);
  if (params) url.search = params.toString();
  const response = await fetch(url, { headers: { accept: "application/json" } });
  const body: unknown = await response.json().catch(() => undefined);
  if (!response.ok) {
    const error = (body as { error?: { name?: string; message?: string } } | undefined)?.error;
    throw new ApiRequestError(error?.message ?? `HTTP ${response.status}`, response.status, error?.name ?? "HttpError");
  }
  return body;
}

function cell(text: string, className?: string): HTMLTableCellElement {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function decimals(): number {
  return state.info?.token.decimals ?? 6;
}

function symbol(): string {
  return state.info?.token.symbol ?? "";
}

function perHour(pricePerUnitSecond: bigint): string {
  return formatTokens(pricePerUnitSecond * 3600n, decimals());
}

// ---- filters ----

function showFilterError(message: string | undefined): void {
  const node = $<HTMLParagraphElement>("#filter-error");
  node.hidden = message === undefined;
  node.textContent = message ?? "";
}

/** The offers query from the form, or an error naming the field. */
function offersQuery(): URLSearchParams | string {
  const params = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(state.offset), sort: "price" });
  const model = $<HTMLSelectElement>("#f-model").value;
  if (model) params.set("model", model);
  const minFree = $<HTMLInputElement>("#f-min-free").value.trim();
  if (minFree) {
    if (!/^\d+$/.test(minFree) || Number(minFree) < 1) return "Min free GPUs: enter a whole number of at least 1";
    params.set("minFreeUnits", minFree);
  }
  const maxPrice = $<HTMLInputElement>("#f-max-price").value.trim();
  if (maxPrice) {
    const perHourUnits = parseTokens(maxPrice, decimals());
    if (perHourUnits === undefined) return `Max price: enter an amount like 2.5 (at most ${decimals()} decimals)`;
    params.set("maxPricePerUnitSecond", (perHourUnits / 3600n).toString());
  }
  const region = $<HTMLInputElement>("#f-region").value.trim();
  if (region) params.set("region", region);
  const attested = $<HTMLSelectElement>("#f-attested").value;
  if (attested) params.set("attested", attested);
  return params;
}

// ---- offers table ----

/** A provider's uptime: the share of its counted leases that ended without a fault, or "new" before any. */
function uptimeText(percent: number | null): string {
  return percent === null ? "new (no lease counted yet)" : `${percent} % of leases without a fault`;
}

function offerRow(offer: OfferView, now: number): HTMLTableRowElement {
  const row = document.createElement("tr");
  row.dataset.key = offer.key;
  const freshAt = state.fresh.get(offer.key);
  if (freshAt !== undefined && now - freshAt < FRESH_MS) row.classList.add("new");

  const providerCell = document.createElement("td");
  const link = document.createElement("button");
  link.type = "button";
  link.className = "link provider-link";
  link.textContent = shortAddress(offer.provider);
  link.title = offer.provider;
  link.addEventListener("click", () => {
    window.location.hash = `provider=${offer.provider}`;
  });
  providerCell.append(link);

  row.append(
    providerCell,
    cell(String(offer.machineId), "num"),
    cell(offer.model),
    cell(`${offer.capacity.freeUnits} / ${offer.units}`, "num free"),
    cell(`${Math.round(offer.vramMiB / 1024)} GiB`, "num"),
    cell(offer.region),
    cell(`${perHour(offer.pricePerUnitSecond)} ${symbol()}`, "num price"),
    cell(offer.attested ? "yes" : "no", "attested"),
    cell(offer.reputation ? `${uptimeText(offer.reputation.uptimePercent)}, ${(Number(offer.reputation.unitSecondsDelivered) / 3600).toFixed(1)} GPU-h` : "-", "track"),
    cell(relativeTime(offer.expiry, Date.now())),
  );
  return row;
}

async function refreshOffers(): Promise<void> {
  const query = offersQuery();
  if (typeof query === "string") {
    showFilterError(query);
    return;
  }
  const generation = ++state.queryGeneration;
  try {
    const page = offerPageSchema.parse(await getJson("/v1/offers", query));
    // A newer query started while this one was in flight: its answer wins.
    if (generation !== state.queryGeneration) return;
    showFilterError(undefined);
    state.total = page.total;
    const now = Date.now();
    $<HTMLTableSectionElement>("#offers-table tbody").replaceChildren(...page.items.map((offer) => offerRow(offer, now)));
    $<HTMLParagraphElement>("#offers-empty").hidden = page.items.length > 0;
    const first = page.total === 0 ? 0 : page.offset + 1;
    $("#offers-count").textContent = `${first}–${page.offset + page.items.length} of ${page.total}`;
    $<HTMLButtonElement>("#page-prev").disabled = page.offset === 0;
    $<HTMLButtonElement>("#page-next").disabled = page.nextOffset === null;
  } catch (error) {
    if (generation !== state.queryGeneration) return;
    showFilterError(error instanceof Error ? error.message : String(error));
  }
}

// ---- chart ----

/** Bumped by every chart refresh: a response that comes back after a newer refresh began is dropped. */
let chartGeneration = 0;

async function refreshChart(): Promise<void> {
  const generation = ++chartGeneration;
  const model = $<HTMLSelectElement>("#chart-model").value;
  const [windowSeconds, bucketSeconds] = $<HTMLSelectElement>("#chart-window").value.split(":").map(Number);
  const to = Math.floor(Date.now() / 1000) + 1;
  const from = to - windowSeconds!;
  const params = new URLSearchParams({ from: String(from), to: String(to), bucketSeconds: String(bucketSeconds) });
  if (model) params.set("model", model);
  try {
    const stats = marketStatsSchema.parse(await getJson("/v1/stats", params));
    // Refreshes overlap (a model or window change, a new offer): only the latest may draw, or an
    // older answer landing last would show a market that has moved on.
    if (generation !== chartGeneration) return;
    const modelStats = stats.models.find((entry) => entry.model === model);
    const drawn = drawPriceChart($<HTMLElement>("#price-chart") as unknown as SVGSVGElement, {
      stats: modelStats,
      model,
      from,
      to,
      decimals: decimals(),
      symbol: symbol(),
    });
    const current = modelStats?.current;
    $("#chart-summary").textContent = current
      ? `Now: ${current.offers} offers, ${current.units} GPUs, utilization ${current.utilization === null ? "–" : `${Math.round(current.utilization * 100)} %`}` +
        (current.price ? `, network index ${perHour(current.price.p50)} ${symbol()}/GPU-hour` : "") +
        ` · ${drawn} buckets with prices`
      : "";
  } catch (error) {
    if (generation !== chartGeneration) return;
    $("#chart-summary").textContent = error instanceof Error ? error.message : String(error);
  }
}

// ---- provider detail ----

function fact(list: HTMLElement, term: string, value: string): void {
  const dt = document.createElement("dt");
  dt.textContent = term;
  const dd = document.createElement("dd");
  dd.textContent = value;
  list.append(dt, dd);
}

function renderProvider(provider: ProviderView): void {
  const facts = $<HTMLElement>("#provider-facts");
  facts.replaceChildren();
  const tokens = (amount: bigint) => `${formatTokens(amount, decimals())} ${symbol()}`;
  fact(facts, "Registered", provider.registered ? "yes" : "no (deregistered)");
  fact(facts, "Stake", tokens(provider.stake));
  fact(facts, "Locked by leases", tokens(provider.locked));
  fact(facts, "Unbonding", provider.unbonding > 0n ? `${tokens(provider.unbonding)} until ${new Date((provider.unlockAt ?? 0) * 1000).toLocaleString()}` : tokens(0n));
  fact(facts, "Free stake", tokens(provider.freeStake));
  fact(facts, "Leases completed", String(provider.reputation.leasesCompleted));
  fact(facts, "Faults", String(provider.reputation.faults));
  fact(facts, "GPU-hours delivered", (Number(provider.reputation.unitSecondsDelivered) / 3600).toFixed(1));
  fact(facts, "Uptime", uptimeText(provider.reputation.uptimePercent));
  fact(facts, "Peer id", provider.peerId);
  fact(facts, "Metadata", provider.metadataURI);
  const now = Math.floor(Date.now() / 1000);
  $<HTMLTableSectionElement>("#provider-machines tbody").replaceChildren(
    ...provider.machines.map((machine) => {
      const row = document.createElement("tr");
      row.dataset.machineId = String(machine.machineId);
      const current = machine.attestations.filter((attestation) => attestation.expiry > now);
      row.append(
        cell(String(machine.machineId), "num"),
        cell(machine.model ?? `unknown (${machine.modelHash.slice(0, 10)}…)`),
        cell(String(machine.units), "num"),
        cell(`${machine.onDemandUnits} on-demand, ${machine.interruptibleUnits} interruptible`),
        cell(`${Math.round(machine.vramMiB / 1024)} GiB`, "num"),
        cell(machine.region),
        cell(
          current.length
            ? current
                .map(
                  (attestation) =>
                    `${shortAddress(attestation.attestor)} until ${new Date(attestation.expiry * 1000).toLocaleString()}` +
                    // A pass after failed challenges says so: the attestor's failure history, which only time clears.
                    (attestation.failures > 0 ? ` (after ${attestation.failures} failed challenge(s), latest ${new Date(attestation.lastFailureAt * 1000).toLocaleString()})` : ""),
                )
                .join("; ")
            : "none current",
        ),
        // Failures that count now (its attestations' and staked attestors' signed notices): what a match's maxAttestFailures bounds.
        cell(
          machine.attestFailures > 0
            ? `${machine.attestFailures}, latest ${machine.lastAttestFailureAt ? new Date(machine.lastAttestFailureAt * 1000).toLocaleString() : "unknown"}`
            : machine.offerKey
              ? "none"
              : "–",
          "num",
        ),
        cell(machine.offerKey ? "live" : "–"),
      );
      return row;
    }),
  );
}

async function showProvider(address: string | undefined): Promise<void> {
  state.provider = address;
  const section = $<HTMLElement>("#provider");
  section.hidden = address === undefined;
  if (!address) return;
  $("#provider-address").textContent = address;
  const errorNode = $<HTMLParagraphElement>("#provider-error");
  try {
    const provider = providerViewSchema.parse(await getJson(`/v1/providers/${encodeURIComponent(address)}`));
    if (state.provider !== address) return;
    errorNode.hidden = true;
    renderProvider(provider);
  } catch (error) {
    errorNode.hidden = false;
    errorNode.textContent = error instanceof Error ? error.message : String(error);
    $("#provider-facts").replaceChildren();
    $("#provider-machines tbody").replaceChildren();
  }
  section.scrollIntoView({ block: "nearest" });
}

function providerFromHash(): string | undefined {
  const match = /^#provider=(0x[0-9a-fA-F]{40})$/.exec(window.location.hash);
  return match?.[1];
}

// ---- live updates ----

function debounce(fn: () => void, ms: number): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      fn();
    }, ms);
  };
}

function connectEvents(onOffers: () => void, onChart: () => void): void {
  const live = $("#live");
  const setLive = (stateName: string, text: string) => {
    live.dataset.state = stateName;
    live.textContent = text;
  };
  const source = new EventSource(new URL("/v1/events", window.location.origin));
  source.addEventListener("open", () => setLive("open", "live"));
  source.addEventListener("error", () => setLive("reconnecting", "reconnecting…"));
  source.addEventListener("offer", (event) => {
    const offer = offerViewSchema.parse(JSON.parse((event as MessageEvent<string>).data));
    state.fresh.set(offer.key, Date.now());
    onOffers();
    onChart();
  });
  source.addEventListener("offer-removed", () => {
    onOffers();
    onChart();
  });
  source.addEventListener("lease", (event) => {
    const lease = JSON.parse((event as MessageEvent<string>).data) as { provider?: string };
    if (state.provider && lease.provider?.toLowerCase() === state.provider.toLowerCase()) runDetached(showProvider(state.provider), console, "showProvider");
  });
  source.addEventListener("reset", () => {
    onOffers();
    onChart();
  });
}

async function main(): Promise<void> {
  state.info = nodeInfoSchema.parse(await getJson("/v1/info"));
  $("#chain").textContent = `chain ${state.info.chainId} · token ${state.info.token.symbol}`;
  for (const node of document.querySelectorAll(".token-symbol")) node.textContent = `(${state.info.token.symbol})`;
  const modelSelect = $<HTMLSelectElement>("#f-model");
  const chartSelect = $<HTMLSelectElement>("#chart-model");
  for (const model of state.info.gpuModels) {
    modelSelect.append(new Option(model.name, model.name));
    chartSelect.append(new Option(model.name, model.name));
  }
  // Chart the model with the most live offers to start with.
  const stats = marketStatsSchema.parse(await getJson("/v1/stats", new URLSearchParams({ bucketSeconds: "3600" })));
  const busiest = [...stats.models].sort((a, b) => b.current.offers - a.current.offers)[0];
  if (busiest) chartSelect.value = busiest.model;

  const offersSoon = debounce(() => runDetached(refreshOffers(), console, "refreshOffers"), 150);
  const chartSoon = debounce(() => runDetached(refreshChart(), console, "refreshChart"), 1000);
  const form = $<HTMLFormElement>("#filter-form");
  const onFilter = debounce(() => {
    state.offset = 0;
    runDetached(refreshOffers(), console, "refreshOffers");
  }, 200);
  form.addEventListener("input", onFilter);
  form.addEventListener("change", onFilter);
  form.addEventListener("reset", () => setTimeout(onFilter, 0));
  form.addEventListener("submit", (event) => event.preventDefault());
  $("#page-prev").addEventListener("click", () => {
    state.offset = Math.max(0, state.offset - PAGE_SIZE);
    runDetached(refreshOffers(), console, "refreshOffers");
  });
  $("#page-next").addEventListener("click", () => {
    state.offset += PAGE_SIZE;
    runDetached(refreshOffers(), console, "refreshOffers");
  });
  chartSelect.addEventListener("change", () => runDetached(refreshChart(), console, "refreshChart"));
  $("#chart-window").addEventListener("change", () => runDetached(refreshChart(), console, "refreshChart"));
  $("#provider-close").addEventListener("click", () => {
    history.replaceState(null, "", window.location.pathname + window.location.search);
    runDetached(showProvider(undefined), console, "showProvider");
  });
  window.addEventListener("hashchange", () => runDetached(showProvider(providerFromHash()), console, "showProvider"));

  connectEvents(offersSoon, chartSoon);
  await Promise.all([refreshOffers(), refreshChart(), showProvider(providerFromHash())]);
  document.body.dataset.ready = "true";
}

main().catch((error: unknown) => {
  showFilterError(`The explorer could not start: ${error instanceof Error ? error.message : String(error)}`);
});
