/**
 * Reading counts out of a Prometheus text scrape, for suites that check that
 * an answer was counted: `sampleValue(text, name, labels)` is the value of
 * the series of `name` that has every label given (others may be there too),
 * 0 when there is none; `scrapeCliMetrics(server)` scrapes the standalone
 * server started with `METRICS_PORT`.
 */
import type { ServerProcess } from './processes.js';

export function sampleValue(scrape: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([label, value]) => `${label}=${JSON.stringify(value)}`);
  for (const line of scrape.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = new Set((match[2] ?? '').split(/,(?=[a-zA-Z_]\w*=")/));
    if (wanted.every((pair) => present.has(pair))) return Number(match[3]);
  }
  return 0;
}

/** The scrape of a standalone server started with `METRICS_PORT` (it prints `Metrics: <url>`). */
export async function scrapeCliMetrics(server: ServerProcess): Promise<string> {
  const [, url] = await server.waitFor(/Metrics: (http:\/\/\S+)/);
  return (await fetch(url!)).text();
}
