/**
 * docs/observability.md#dashboard-and-alerts cannot drift from examples/monitoring/: its panel
 * table names every panel of the Grafana dashboard and its alert table every rule of
 * prometheus-rules.yml, and neither names one that is not there. (The alerts' thresholds are
 * checked by promtool in monitoring.test.ts; this is the page a person reads.)
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';

const page = readFileSync(`${ROOT}docs/observability.md`, 'utf8');
const dashboard = JSON.parse(readFileSync(`${ROOT}examples/monitoring/grafana-dashboard.json`, 'utf8')) as { panels: { type: string; title: string }[] };
const rules = readFileSync(`${ROOT}examples/monitoring/prometheus-rules.yml`, 'utf8');

/** The first cells of the table whose header row starts with `| header |`. */
function firstColumn(header: string): string[] {
  const lines = page.split('\n');
  const start = lines.findIndex((line) => line.startsWith(`| ${header} |`));
  expect(start, `docs/observability.md has a table headed "${header}"`).toBeGreaterThan(-1);
  const rows: string[] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(line.split('|')[1]!.trim());
  }
  return rows;
}

describe('docs/observability.md lists the monitoring examples as they are', () => {
  it('the panel table names every panel of the dashboard, and only those', () => {
    // A cell may name several panels that share a row, separated by commas.
    const documented = firstColumn('panel').flatMap((cell) => cell.split(', '));
    const panels = dashboard.panels.filter((panel) => panel.type !== 'row').map((panel) => panel.title);
    expect([...documented].sort()).toEqual([...panels].sort());
  });

  it('the alert table names every rule of prometheus-rules.yml, with its severity, and only those', () => {
    const documented = firstColumn('alert').map((cell) => cell.replace(/`/g, ''));
    const alerts = [...rules.matchAll(/- alert: (\w+)[^]*?severity: (\w+)/g)].map(([, name, severity]) => `${name} (${severity})`);
    expect(alerts.length).toBeGreaterThan(5);
    expect([...documented].sort()).toEqual([...alerts].sort());
  });
});
