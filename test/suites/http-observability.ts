/**
 * What a real server told its operator while the whole HTTP conformance
 * suite ran against it (test/http-<runtime>.test.ts, with METRICS_PORT and
 * LOG_LEVEL=debug): every log line is JSON and holds no key, salt, hmac,
 * credential or user field; and a Prometheus scrape, read by a real text
 * parser, counts exactly the requests made.
 */
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { describe, expect, it, vi } from 'vitest';
import { basic } from '../support/basic-auth.js';
import { send, type RecordedExchange } from '../support/http-client.js';
import type { ServerProcess } from '../support/processes.js';
import { conformanceSeed, MERCHANTS } from '../support/seeds.js';

export interface ObservabilityOptions {
  server: () => ServerProcess;
  /** Every exchange of the conformance suite (recordResponses()). */
  recorded: RecordedExchange[];
}

const ACCESS_FIELDS = new Set(['time', 'level', 'event', 'request_id', 'method', 'route', 'status', 'duration_ms', 'bytes', 'merchant_id', 'client_address', 'code', 'aborted']);

function logLines(output: string): Record<string, unknown>[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Every secret and personal value the suite sent or the seed holds, that no log line may contain. */
function secretsUsed(recorded: RecordedExchange[]): string[] {
  const secrets = new Set<string>();
  for (const merchant of Object.values(MERCHANTS)) {
    for (const key of merchant.keys) {
      secrets.add(key);
      secrets.add(basic(merchant.id, key).authorization!.slice('Basic '.length));
    }
  }
  for (const user of conformanceSeed().users) {
    for (const [field, value] of Object.entries(user)) {
      // Numbers alone (zip codes) could be any figure of a log line; everything else must never appear.
      if (field === 'merchant_id' || typeof value !== 'string' || /^[\d.:+TZ -]+$/.test(value)) continue;
      if (['first_name', 'last_name', 'city', 'state', 'country', 'preferred_language'].includes(field) && value.length < 5) continue;
      secrets.add(value);
    }
  }
  for (const exchange of recorded) {
    const query = exchange.target.split('?')[1];
    if (!query) continue;
    for (const pair of query.split('&')) {
      const [name, value = ''] = pair.split('=');
      if ((name === 'salt' || name === 'hmac' || name === 'cursor') && value.length >= 8) secrets.add(decodeURIComponent(value));
    }
  }
  return [...secrets];
}

export function describeObservability(options: ObservabilityOptions): void {
  describe('what the server logged and counted over the whole suite', () => {
    it('wrote only JSON log lines, one access line per request with only its documented fields', () => {
      const lines = logLines(options.server().output());
      const access = lines.filter((line) => line.event === 'request');
      expect(access.length).toBeGreaterThan(100);
      for (const line of access) {
        for (const field of Object.keys(line)) expect(ACCESS_FIELDS.has(field), `unexpected field ${field}`).toBe(true);
        expect(line.route === null || (typeof line.route === 'string' && line.route.startsWith('/'))).toBe(true);
        expect(String(line.route)).not.toMatch(/[?%]|u-\d{5}/);
      }
      expect(lines.some((line) => line.event === 'auth_failed')).toBe(true);
    });

    it('logged no key, salt, hmac, cursor, credential or user field', () => {
      const output = options.server().output();
      const secrets = secretsUsed(options.recorded);
      expect(secrets.length).toBeGreaterThan(100);
      const found = secrets.filter((secret) => output.includes(secret) || output.includes(JSON.stringify(secret).slice(1, -1)));
      expect(found).toEqual([]);
      expect(output).not.toMatch(/authorization|Basic [A-Za-z0-9+/=]{8,}|[0-9a-f]{56}/i);
    });

    it('counts exactly the requests made, in a scrape read by a Prometheus text parser', async () => {
      const server = options.server();
      const metricsUrl = /Metrics: (http:\/\/\S+)/.exec(server.output())![1]!;
      const scrape = async () => {
        const families = parsePrometheusTextFormat(await (await fetch(metricsUrl)).text());
        return (name: string, labels: Record<string, string>) =>
          families
            .find((family) => family.name === name)
            ?.metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
            .reduce((sum, m) => sum + Number(m.value ?? 0), 0) ?? 0;
      };
      const accessLines = () => logLines(server.output()).filter((line) => line.event === 'request').length;
      const before = await scrape();
      const linesBefore = accessLines();
      const base = server.url;
      for (let i = 0; i < 5; i++) await send(`${base}/healthz`);
      for (let i = 0; i < 3; i++) await send(`${base}/readyz`, { method: 'HEAD' });
      for (let i = 0; i < 2; i++) await send(`${base}/no/such/path?x=1`);
      for (let i = 0; i < 4; i++) await send(`${base}/merchant/users?limit=1`, { headers: basic(MERCHANTS.other.id, `not-the-key-${i}`) });
      const after = await scrape();
      const delta = (name: string, labels: Record<string, string>) => after(name, labels) - before(name, labels);
      expect(delta('merchant_api_requests_total', { route: '/healthz', method: 'GET', status: '200' })).toBe(5);
      expect(delta('merchant_api_requests_total', { route: '/readyz', method: 'HEAD', status: '200' })).toBe(3);
      expect(delta('merchant_api_requests_total', { route: 'unmatched', method: 'GET', status: '404' })).toBe(2);
      expect(delta('merchant_api_requests_total', { route: '/merchant/users', method: 'GET', status: '401' })).toBe(4);
      expect(delta('merchant_api_auth_failures_total', { reason: 'wrong_key' })).toBe(4);
      // The scrapes themselves are not API requests.
      expect(delta('merchant_api_requests_total', {})).toBe(14);
      // The server writes its access lines to a pipe: they arrive soon after the answers.
      await vi.waitFor(() => expect(accessLines() - linesBefore).toBe(14), { timeout: 10_000 });
    });
  });
}
