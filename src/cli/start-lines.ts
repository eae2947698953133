/**
 * What `serve` says once it listens, twice: JSON events for the log on
 * standard output, which log shippers read line by line, and a banner for
 * people (the URL, the API reference page, the demo merchant with ready `curl` lines) on standard
 * error, or on standard output when that is a terminal
 * (docs/observability.md#start-up). The banner may hold the demo key and a
 * signed URL; the events never hold a key, a salt or an hmac.
 */
import { signUrl } from '../signing/index.js';
import type { Logger } from '../index.js';
import type { CliIo } from './io.js';

export interface StartFacts {
  url: string;
  runtime: string;
  /** The storage, as the banner says it ("storage: in memory, loaded from …"). */
  description: string;
  metricsUrl?: string;
  /** The API reference page (`DOCS_PAGE`, on by default), as a person opens it: under PUBLIC_URL when set. */
  docsUrl?: string;
  cursorSecret: boolean;
  publicUrl?: string[];
  /** ALLOWED_HOSTS: with it, a request naming another host is refused, so the warning about the Host is not due. */
  allowedHosts?: string[];
  hostname: string;
  demo: boolean;
}

/** The banner's lines; the first is `merchant-api listening on <url> (<runtime>, <storage>)`. */
export function startBanner(facts: StartFacts): string[] {
  const lines = [`merchant-api listening on ${facts.url} (${facts.runtime}, ${facts.description})`];
  // The first thing a new team opens: every endpoint, with "Try it out".
  if (facts.docsUrl) lines.push(`API reference: ${facts.docsUrl}`);
  if (facts.metricsUrl) lines.push(`Metrics: ${facts.metricsUrl}`);
  if (!facts.cursorSecret) lines.push('CURSOR_SECRET is not set: page cursors work only on this instance until it restarts.');
  if (unprotectedHost(facts)) {
    lines.push(`Warning: PUBLIC_URL is not set and HOST ${facts.hostname} is reachable from other machines: signatures are checked against the Host each request names. Set PUBLIC_URL to the URL merchants call (or ALLOWED_HOSTS to the hosts they may name).`);
  }
  if (facts.demo) {
    const publicBase = facts.publicUrl?.[0] ?? facts.url;
    lines.push(
      'Demo merchant: id "demo-merchant", API key "demo-secret" (demo data only).',
      `Try: curl '${signUrl('demo-secret', `${publicBase}/validatesignature`, { cp: 'demo-merchant' })}'`,
      `     curl -u demo-merchant:demo-secret '${publicBase}/merchant/users?limit=5'`,
    );
  }
  return lines;
}

/** The same facts as log events: `listening`, then `metrics_listening` and the start-up warnings. */
export function logStartEvents(logger: Logger, facts: StartFacts, workers?: number): void {
  logger.info({ event: 'listening', url: facts.url, runtime: facts.runtime, storage: facts.description.replace(/^storage: /, ''), ...(workers && { workers }), demo: facts.demo }, 'merchant-api started');
  if (facts.metricsUrl) logger.info({ event: 'metrics_listening', url: facts.metricsUrl });
  if (!facts.cursorSecret) logger.warn({ event: 'cursor_secret_unset' }, 'page cursors work only on this instance until it restarts');
  if (unprotectedHost(facts)) logger.warn({ event: 'public_url_unset', host: facts.hostname }, 'signatures are checked against the Host each request names; set PUBLIC_URL');
}

/** Writes the banner where a person reads it, never into the JSON log. */
export function printBanner(io: CliIo, lines: string[]): void {
  (io.banner ?? io.err)(lines.join('\n'));
}

function unprotectedHost(facts: StartFacts): boolean {
  return !facts.publicUrl && !facts.allowedHosts && !isLoopback(facts.hostname);
}

/** An address only this machine reaches. */
export function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '::1' || hostname === '[::1]' || /^127\./.test(hostname);
}
