/** The live offers the node knows, cheapest first; *Use* fills the task form with one. */
import { $, cell } from "./dom.js";
import { describe, show, state, token } from "./state.js";
import type { OfferSummary } from "../../../../sdk/browser.js";

export async function refreshOffers(): Promise<void> {
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
