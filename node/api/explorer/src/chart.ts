/**
 * The price chart: p10–p90 band, the network index line (the median ask of the model's live
 * offers, the index the `market` pricing policy follows) and dots per bucket, drawn as SVG by
 * hand (a few elements; no chart library to fetch or bundle).
 */
import type { ModelStats } from "../../../../common/api/market.js";
import { clockTime, formatTokens } from "./format.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 720;
const HEIGHT = 240;
const PAD = { left: 64, right: 16, top: 16, bottom: 28 };

function el<K extends keyof SVGElementTagNameMap>(name: K, attributes: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

export type ChartInput = {
  stats: ModelStats | undefined;
  model: string;
  from: number;
  to: number;
  decimals: number;
  symbol: string;
};

/** Draws (replacing what was there); returns the number of buckets with prices. */
export function drawPriceChart(svg: SVGSVGElement, input: ChartInput): number {
  svg.replaceChildren();
  const perHour = (price: bigint) => price * 3600n;
  const points = (input.stats?.series ?? []).filter((bucket) => bucket.price !== null);
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  svg.append(
    el("line", { class: "axis", x1: PAD.left, y1: PAD.top + plotH, x2: PAD.left + plotW, y2: PAD.top + plotH }),
    el("line", { class: "axis", x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: PAD.top + plotH }),
  );
  const span = Math.max(1, input.to - input.from);
  const withDate = span >= 86_400;
  svg.append(
    el("text", { x: PAD.left, y: HEIGHT - 8 }, clockTime(input.from, withDate)),
    el("text", { x: PAD.left + plotW, y: HEIGHT - 8, "text-anchor": "end" }, clockTime(input.to, withDate)),
  );
  if (points.length === 0) {
    svg.append(el("text", { x: WIDTH / 2, y: HEIGHT / 2, "text-anchor": "middle" }, `No offers of ${input.model || "any model"} in this window`));
    return 0;
  }
  const top = points.reduce((max, bucket) => (bucket.price!.p90 > max ? bucket.price!.p90 : max), 0n);
  const yMax = perHour(top) + perHour(top) / 10n + 1n;
  const bucketSeconds = input.stats?.series.length && input.stats.series.length > 1 ? input.stats.series[1]!.start - input.stats.series[0]!.start : 0;
  const x = (start: number) => PAD.left + ((start + bucketSeconds / 2 - input.from) / span) * plotW;
  const y = (price: bigint) => PAD.top + plotH - (Number((perHour(price) * 10_000n) / yMax) / 10_000) * plotH;

  const upper = points.map((bucket) => `${x(bucket.start).toFixed(1)},${y(bucket.price!.p90).toFixed(1)}`);
  const lower = points.map((bucket) => `${x(bucket.start).toFixed(1)},${y(bucket.price!.p10).toFixed(1)}`).reverse();
  svg.append(el("polygon", { class: "band", points: [...upper, ...lower].join(" ") }));
  svg.append(el("polyline", { class: "edge", points: upper.join(" ") }));
  svg.append(el("polyline", { class: "median", points: points.map((b) => `${x(b.start).toFixed(1)},${y(b.price!.p50).toFixed(1)}`).join(" ") }));
  for (const bucket of points) {
    const dot = el("circle", { class: "dot", cx: x(bucket.start).toFixed(1), cy: y(bucket.price!.p50).toFixed(1), r: 3 });
    dot.append(
      el(
        "title",
        {},
        `${clockTime(bucket.start, withDate)}: network index (median ask) ${formatTokens(perHour(bucket.price!.p50), input.decimals)} ${input.symbol}/GPU-h, ` +
          `p10 ${formatTokens(perHour(bucket.price!.p10), input.decimals)}, p90 ${formatTokens(perHour(bucket.price!.p90), input.decimals)}, ${bucket.offers} offers`,
      ),
    );
    svg.append(dot);
  }
  svg.append(
    el("text", { x: PAD.left - 6, y: PAD.top + 10, "text-anchor": "end" }, formatTokens(yMax, input.decimals, 2)),
    el("text", { x: PAD.left - 6, y: PAD.top + plotH, "text-anchor": "end" }, "0"),
    el("text", { class: "legend", x: PAD.left + plotW, y: PAD.top + 10, "text-anchor": "end" }, `${input.model}: network index (median ask) with p10–p90 band`),
  );
  return points.length;
}
