/**
 * The monitoring examples (examples/monitoring/, docs/observability.md#dashboard-and-alerts):
 * the Grafana dashboard is importable JSON, promtool accepts the rules and the
 * Prometheus configuration, the rules fire as their unit tests expect
 * (test/fixtures/monitoring/), and every metric, label and label value that a panel
 * or a rule uses is in a real scrape of the standalone server after a 200, 401,
 * 404, 429 and 503 of its own.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inCi } from '../support/ci.js';
import { basic } from '../support/basic-auth.js';
import { send } from '../support/http-client.js';
import { ROOT, useCliServer } from '../support/processes.js';
import { missingFromScrape, readScrape, ruleExpressions, type Family } from '../support/promql.js';
import { seedUser } from '../support/seeds.js';
import { signedUrl } from '../support/test-signer.js';

const DIRECTORY = `${ROOT}examples/monitoring/`;
const RULES = `${DIRECTORY}prometheus-rules.yml`;
const dashboard = JSON.parse(readFileSync(`${DIRECTORY}grafana-dashboard.json`, 'utf8'));
const rulesText = readFileSync(RULES, 'utf8');

interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource?: { type: string; uid: string };
  targets?: { refId: string; expr: string; datasource?: { type: string; uid: string } }[];
}
const panels: Panel[] = dashboard.panels;
const queries = panels.filter((panel) => panel.type !== 'row');
const dashboardExpressions = queries.flatMap((panel) => panel.targets!.map((target) => ({ where: `panel "${panel.title}" ${target.refId}`, expr: target.expr })));
const ruleUses = ruleExpressions(rulesText).map((expr, at) => ({ where: `rule ${at + 1}`, expr }));

// Three merchants and a replay store of two salts: one salt each for two of them fills it, and the third's is a storage failure (503).
const MERCHANTS = ['shop-a', 'shop-b', 'shop-c'].map((id) => ({ id, status: 'active' as const, keys: [`${id}-key`] }));
const server = useCliServer('node', { merchants: MERCHANTS, users: [seedUser('shop-a', 'u-1', 1)] }, { METRICS_PORT: '0', MAX_SALTS: '2', AUTH_FAILURES_PER_MERCHANT: '2', ACCESS_LOG: 'false' });
let scrape: Map<string, Family>;

beforeAll(async () => {
  const base = server.url;
  const status = async (url: string, headers: Record<string, string> = {}) => (await send(url, { headers })).status;
  const signed = (merchant: (typeof MERCHANTS)[number]) => signedUrl({ secret: merchant.keys[0]!, url: `${base}/validatesignature`, cp: merchant.id });
  const answers = [
    await status(`${base}/healthz`),
    await status(`${base}/readyz`),
    await status(`${base}/no/such/path`),
    await status(`${base}/merchant/users?limit=1`, basic('shop-a', 'shop-a-key')),
    await status(`${base}/merchant/users/u-1`, basic('shop-a', 'shop-a-key')),
    await status(signed(MERCHANTS[0]!)),
    await status(signed(MERCHANTS[1]!)),
    await status(signed(MERCHANTS[2]!)),
  ];
  expect(answers).toEqual([200, 200, 404, 200, 200, 200, 200, 503]);
  // Wrong keys until the throttle blocks the pair (AUTH_FAILURES_PER_MERCHANT=2).
  const refused: number[] = [];
  while (refused.at(-1) !== 429 && refused.length < 10) refused.push(await status(`${base}/merchant/users`, basic('shop-b', 'not-the-key')));
  expect(refused).toEqual([401, 401, 429]);
  const metricsUrl = /Metrics: (http:\/\/\S+)/.exec(server.process.output())![1]!;
  scrape = readScrape(await (await fetch(metricsUrl)).text());
});

describe('the Grafana dashboard', () => {
  it('is a dashboard Grafana imports: uid, title, schema version, a Prometheus data source variable', () => {
    expect(dashboard.uid).toMatch(/^[a-zA-Z0-9_-]{1,40}$/);
    expect(dashboard.title).toBe('merchant-api');
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(dashboard.templating.list).toContainEqual(expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource', query: 'prometheus' }));
    expect(dashboard.id ?? null).toBeNull();
  });

  it('has panels with unique ids, on the 24-column grid, each query on the data source variable', () => {
    expect(new Set(panels.map((panel) => panel.id)).size).toBe(panels.length);
    for (const panel of panels) {
      const { h, w, x, y } = panel.gridPos;
      expect([panel.title, x >= 0 && w > 0 && x + w <= 24 && h > 0 && y >= 0]).toEqual([panel.title, true]);
    }
    expect(queries.length).toBeGreaterThanOrEqual(10);
    for (const panel of queries) {
      expect([panel.title, panel.datasource]).toEqual([panel.title, { type: 'prometheus', uid: '${DS_PROMETHEUS}' }]);
      expect(panel.targets!.length).toBeGreaterThan(0);
      for (const target of panel.targets!) {
        expect(target.expr.trim()).not.toBe('');
        expect(target.datasource).toEqual(panel.datasource);
      }
      expect(new Set(panel.targets!.map((target) => target.refId)).size).toBe(panel.targets!.length);
    }
  });

  it('has job and instance variables, and every query keeps to them', () => {
    const variables = dashboard.templating.list.filter((v: { type: string }) => v.type === 'query').map((v: { name: string }) => v.name);
    expect(variables).toEqual(['job', 'instance']);
    for (const { where, expr } of dashboardExpressions) {
      for (const selector of expr.match(/merchant_api_\w+(\{[^}]*\})?/g)!) expect([where, selector]).toEqual([where, expect.stringContaining('job=~"$job",instance=~"$instance"')]);
    }
  });

  it('shows every merchant-api metric the server exports', () => {
    const shown = new Set(dashboardExpressions.flatMap(({ expr }) => [...expr.matchAll(/merchant_api_\w+/g)].map((match) => match[0].replace(/_(bucket|sum|count)$/, ''))));
    const exported = [...scrape.keys()].filter((name) => name.startsWith('merchant_api_'));
    expect(exported.length).toBeGreaterThanOrEqual(9);
    expect(exported.filter((name) => !shown.has(name))).toEqual([]);
  });
});

describe('what the dashboard and the rules use is in a real scrape', () => {
  it('the scrape has the labelled series of the requests made', () => {
    const statuses = new Set(scrape.get('merchant_api_requests_total')!.samples.map((sample) => sample.labels.status));
    expect([...statuses].sort()).toEqual(['200', '401', '404', '429', '503']);
    expect(scrape.get('merchant_api_storage_errors_total')!.samples.map((sample) => sample.labels.operation)).toEqual(['recordSalt']);
    expect(scrape.get('merchant_api_throttled_total')!.samples.map((sample) => sample.labels.reason)).toEqual(['auth_pair']);
  });

  it('every metric, label and label value of every panel', () => {
    expect(dashboardExpressions.length).toBeGreaterThanOrEqual(10);
    const problems = dashboardExpressions.flatMap(({ where, expr }) => missingFromScrape(expr, scrape).map((problem) => `${where}: ${problem}`));
    expect(problems).toEqual([]);
  });

  it('every metric, label and label value of every rule', () => {
    expect(ruleUses.length).toBe(9);
    const problems = ruleUses.flatMap(({ where, expr }) => missingFromScrape(expr, scrape).map((problem) => `${where}: ${problem}`));
    expect(problems).toEqual([]);
  });

  it('reports a misspelled metric, a label the metric lacks and a value nothing has', () => {
    const first = ruleUses.find(({ expr }) => expr.includes('merchant_api_requests_total'));
    expect(missingFromScrape(first!.expr.replaceAll('merchant_api_requests_total', 'merchant_api_request_total'), scrape)).toContain('no metric merchant_api_request_total in the scrape');
    expect(missingFromScrape('sum by (le, path) (rate(merchant_api_request_duration_seconds_bucket[5m]))', scrape)).toEqual([expect.stringMatching(/has the label path/)]);
    expect(missingFromScrape('rate(merchant_api_requests_total_bucket[5m])', scrape)).toEqual(['no metric merchant_api_requests_total_bucket in the scrape']);
    expect(missingFromScrape('rate(merchant_api_requests_total{code="401"}[5m])', scrape)).toEqual(['merchant_api_requests_total has no label code']);
    expect(missingFromScrape('rate(merchant_api_requests_total{status=~"5xx"}[5m])', scrape)).toEqual(['no merchant_api_requests_total sample with status=~"5xx"']);
  });
});

const PROMTOOL = process.env.PROMTOOL ?? '/usr/bin/promtool';

function promtoolAvailable(): boolean {
  if (existsSync(PROMTOOL)) return true;
  if (inCi()) throw new Error(`The monitoring suite must run promtool in CI, but ${PROMTOOL} is missing (.ci/run installs it).`);
  console.warn(['', `!!! promtool checks SKIPPED: ${PROMTOOL} is missing`, '!!! Install it with: apt-get install prometheus (or set PROMTOOL)', ''].join('\n'));
  return false;
}

describe.skipIf(!promtoolAvailable())('promtool', () => {
  const promtool = (...args: string[]) => spawnSync(PROMTOOL, args, { cwd: DIRECTORY, encoding: 'utf8' });
  let scratch: string;
  beforeAll(() => {
    scratch = mkdtempSync(join(tmpdir(), 'merchant-api-rules-'));
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('accepts the rules, and counts as many as the suite checked against the scrape', () => {
    const checked = promtool('check', 'rules', 'prometheus-rules.yml');
    expect(checked.stderr).toBe('');
    expect(checked.status).toBe(0);
    expect(checked.stdout).toContain(`SUCCESS: ${ruleUses.length} rules found`);
  });

  it('fires each alert where the docs say, and not just below (promtool test rules)', () => {
    const tested = spawnSync(PROMTOOL, ['test', 'rules', 'test/fixtures/monitoring/prometheus-rules.test.yml'], { cwd: ROOT, encoding: 'utf8' });
    expect([tested.status, tested.stdout + tested.stderr]).toEqual([0, expect.stringContaining('SUCCESS')]);
  });

  it('accepts the example Prometheus configuration, which loads the rules', () => {
    const checked = promtool('check', 'config', 'prometheus.yml');
    expect([checked.status, checked.stderr]).toEqual([0, '']);
    expect(checked.stdout).toContain('SUCCESS: 1 rule files found');
  });

  it('accepts every panel query as PromQL (each as a recording rule, Grafana\'s $__rate_interval as 5m and $__range as 1h)', () => {
    const recorded = join(scratch, 'panels.yml');
    const rules = dashboardExpressions.map(({ expr }, at) => `      - record: panel_query_${at}\n        expr: ${JSON.stringify(expr.replaceAll('$__rate_interval', '5m').replaceAll('$__range', '1h'))}`);
    writeFileSync(recorded, `groups:\n  - name: panels\n    rules:\n${rules.join('\n')}\n`);
    const checked = promtool('check', 'rules', recorded);
    expect([checked.status, checked.stderr]).toEqual([0, '']);
    expect(checked.stdout).toContain(`SUCCESS: ${dashboardExpressions.length} rules found`);
  });

  it('refuses a rule that is not PromQL, so the check above can fail', () => {
    const broken = join(scratch, 'broken.yml');
    writeFileSync(broken, rulesText.replace('> 0.8', '> > 0.8'));
    const checked = promtool('check', 'rules', broken);
    expect(checked.status).not.toBe(0);
    expect(checked.stderr + checked.stdout).toMatch(/parse error/);
  });
});
