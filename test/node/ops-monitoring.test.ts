import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { parser } from "@prometheus-io/lezer-promql";
import { Registry } from "prom-client";
import { parse as parseYaml } from "yaml";
import { createApiMetrics } from "../../node/api/metrics.js";
import { createMetrics } from "../../node/metrics/metrics.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const rulesFile = path.join(root, "ops/prometheus/suanli-alerts.yml");
const rulesTestFile = path.join(root, "ops/prometheus/suanli-alerts.test.yml");
const dashboardFile = path.join(root, "ops/grafana/suanli-provider.json");
const run = promisify(execFile);

/** Every series name a node serves at /metrics, read from the code that declares them (the same calls the daemon and the API make). */
async function exportedSeries(): Promise<Set<string>> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "suanli-ops-"));
  try {
    const registry = new Registry();
    createMetrics({ registry, processMetrics: true, dataDir });
    createApiMetrics(registry);
    const names = new Set<string>();
    for (const metric of registry.getMetricsAsArray()) {
      const { name, type } = metric as unknown as { name: string; type: string };
      names.add(name);
      if (type === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) names.add(name + suffix);
      if (type === "summary") for (const suffix of ["_sum", "_count"]) names.add(name + suffix);
    }
    return names;
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** The metric names a PromQL expression selects; fails on a syntax error. */
function selectedMetrics(expr: string): string[] {
  const tree = parser.parse(expr);
  const names: string[] = [];
  const errors: number[] = [];
  tree.iterate({
    enter(node) {
      if (node.type.isError) errors.push(node.from);
      if (node.name === "Identifier" && node.node.parent?.name === "VectorSelector") names.push(expr.slice(node.from, node.to));
    },
  });
  assert.deepEqual(errors, [], `PromQL syntax error at offset ${errors[0]} in: ${expr}`);
  assert.ok(names.length > 0, `selects no metric: ${expr}`);
  return names;
}

type Panel = { type: string; title: string; targets?: { expr: string }[]; panels?: Panel[] };
type Dashboard = {
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; type: string; query: string | { query: string } }[] };
};

/** Every PromQL query of a dashboard with Grafana's variables put in, as Grafana would before sending it. */
function dashboardQueries(dashboard: Dashboard): { where: string; expr: string }[] {
  const values: Record<string, string> = { __range: "6h", __rate_interval: "1m", __interval: "15s", instance: ".*", datasource: "prometheus" };
  for (const variable of dashboard.templating.list) if (variable.type === "constant") values[variable.name] = String(variable.query);
  const substitute = (expr: string) =>
    expr.replace(/\$\{?(\w+)\}?/g, (_, name: string) => {
      assert.ok(name in values, `unknown dashboard variable $${name} in: ${expr}`);
      return values[name]!;
    });
  const queries: { where: string; expr: string }[] = [];
  const walk = (panels: Panel[]) => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) queries.push({ where: `panel "${panel.title}"`, expr: substitute(target.expr) });
      walk(panel.panels ?? []);
    }
  };
  walk(dashboard.panels);
  for (const variable of dashboard.templating.list) {
    if (variable.type !== "query") continue;
    const query = typeof variable.query === "string" ? variable.query : variable.query.query;
    // label_values(selector, label) is Grafana's, not PromQL: its first argument is a selector.
    const match = /^label_values\((.+),\s*\w+\)$/.exec(query);
    assert.ok(match, `variable $${variable.name}: expected label_values(selector, label), got ${query}`);
    queries.push({ where: `variable $${variable.name}`, expr: substitute(match[1]!) });
  }
  return queries;
}

type RuleGroups = { groups: { name: string; rules: { alert?: string; expr: string; labels?: Record<string, string> }[] }[] };

describe("operator dashboards and alerts (ops/)", function () {
  this.timeout(60_000);
  let exported: Set<string>;
  let dashboard: Dashboard;
  let rules: RuleGroups;

  before(async () => {
    exported = await exportedSeries();
    dashboard = JSON.parse(await readFile(dashboardFile, "utf8")) as Dashboard;
    rules = parseYaml(await readFile(rulesFile, "utf8")) as RuleGroups;
  });

  it("reads the node's metrics from its code (sanity of the reference set)", () => {
    for (const name of ["suanli_gpu_temperature_celsius", "suanli_api_requests_total", "suanli_api_request_duration_seconds_bucket", "suanli_process_cpu_seconds_total"]) {
      assert.ok(exported.has(name), `${name} missing from the node's registry`);
    }
  });

  it("the Grafana dashboard queries only metrics the node exports, and shows what an operator watches", () => {
    const queries = dashboardQueries(dashboard);
    assert.ok(queries.length >= 20, `only ${queries.length} queries`);
    const used = new Set<string>();
    for (const { where, expr } of queries) {
      for (const name of selectedMetrics(expr)) {
        assert.ok(exported.has(name), `${where} queries ${name}, which the node does not export`);
        used.add(name);
      }
    }
    for (const name of [
      "suanli_provider_earnings_claimed_total",
      "suanli_provider_leases",
      "suanli_provider_units",
      "suanli_gpu_utilization_percent",
      "suanli_gpu_memory_used_mib",
      "suanli_gpu_temperature_celsius",
      "suanli_gpu_power_watts",
      "suanli_gpu_power_limit_watts",
      "suanli_provider_transactions_total",
      "suanli_provider_attestation_expiry_timestamp_seconds",
      "suanli_chain_last_poll_success_timestamp_seconds",
      "suanli_data_dir_free_bytes",
      "suanli_data_served_bytes_total",
      "suanli_data_received_bytes_total",
      "suanli_data_served_blocks_total",
      "suanli_data_cache_lookups_total",
      "suanli_data_fetch_seconds_bucket",
      "suanli_data_serve_limited_total",
    ]) {
      assert.ok(used.has(name), `no panel shows ${name}`);
    }
    assert.equal(dashboard.uid, "suanli-provider");
  });

  it("the alerting rules query only metrics the node exports (and Prometheus's own up), and cover the incidents an operator must hear about", () => {
    const alerts = rules.groups.flatMap((group) => group.rules);
    for (const rule of alerts) {
      for (const name of selectedMetrics(rule.expr)) {
        assert.ok(exported.has(name) || name === "up", `alert ${rule.alert} queries ${name}, which the node does not export`);
      }
      assert.match(rule.labels?.severity ?? "", /^(warning|critical)$/, `alert ${rule.alert} has no severity`);
    }
    assert.deepEqual(alerts.map((rule) => rule.alert).sort(), [
      "SuanliAttestationExpiring",
      "SuanliAttestationLost",
      "SuanliChainRpcUnreachable",
      "SuanliClaimsFailing",
      "SuanliDiskNearlyFull",
      "SuanliGpuPowerCapped",
      "SuanliGpuTooHot",
      "SuanliNoOffersPublished",
      "SuanliNodeDown",
      "SuanliTransactionsFailing",
    ]);
  });

  it("promtool accepts the rules and their unit tests pass (promtool check rules, promtool test rules)", async () => {
    const promtool = process.env.PROMTOOL ?? "promtool";
    const missing = (error: unknown) =>
      (error as NodeJS.ErrnoException).code === "ENOENT"
        ? new Error(`${promtool} not found: install Debian's prometheus package (apt-get install prometheus; .ci/run does) or set PROMTOOL to its path`)
        : error;
    const check = await run(promtool, ["check", "rules", rulesFile]).catch((error: unknown) => {
      throw missing(error);
    });
    assert.match(check.stdout + check.stderr, /SUCCESS: 10 rules found/);
    const tested = await run(promtool, ["test", "rules", rulesTestFile]).catch((error: unknown) => {
      throw missing(error);
    });
    assert.match(tested.stdout + tested.stderr, /SUCCESS/);
  });
});
