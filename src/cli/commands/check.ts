/**
 * `merchant-api check --base-url URL --merchant-id ID`: a merchant's own
 * diagnosis (docs/cli.md#check). It calls `GET /merchant/users?limit=1` and,
 * unless that refused the key, `GET /validatesignature` with `merchant-api/client`, and says in plain
 * words what is wrong: the key, the clock (with the offset measured from the
 * server's `Date` header), the base URL or path, TLS, or reachability.
 *
 * The key comes from MERCHANT_API_KEY (read in config.ts) or, on a terminal,
 * from a prompt that does not echo; never from an argument. The whole report
 * goes to standard output (a redirected report stays whole; only a usage
 * problem is on standard error), and the exit code names the outcome
 * (`CHECK_EXIT`, docs/cli.md#check).
 */
import process from 'node:process';
import { createMerchantClient, MerchantResponseError, MerchantNetworkError, MerchantTimeoutError, type MerchantClient } from '../../client/index.js';
import { DEFAULTS } from '../../cli-internal.js';
import type { CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';
import { parseCommandArgs } from './parse-args.js';

export const CHECK_USAGE = 'Usage: merchant-api check --base-url URL --merchant-id ID   (the API key from MERCHANT_API_KEY, or a prompt on a terminal)';

/** What the command needs besides its arguments; tests replace them. */
export interface CheckDeps {
  /** Asks for the key without echoing it; undefined when standard input is not a terminal. */
  prompt?: ((question: string) => Promise<string>) | undefined;
  fetch?: typeof fetch;
  /** The merchant's clock in ms (default `Date.now`): what signatures and the offset use. */
  now?: () => number;
  /** Per request (default 10,000 ms). */
  timeoutMs?: number;
}

/**
 * The exit code of each outcome (docs/cli.md#check); with several problems, the first reported.
 * 2 is every command's usage problem.
 */
export const CHECK_EXIT = {
  ok: 0,
  /** The key or the merchant: a wrong key or merchant id, a disabled merchant, a key without the scope, outside its networks. */
  credentials: 1,
  usage: 2,
  /** The server cannot be reached: refused, a name that does not resolve, no answer in time, TLS. */
  unreachable: 3,
  /** A wrong base URL or path, or a server that signs another URL (PUBLIC_URL behind a proxy). */
  url: 4,
  /** The clock differs from the server's by more than it accepts. */
  clock: 5,
  /** The server answers but refuses for now or fails: 429, 503, another status. */
  server: 6,
} as const;
type CheckOutcome = Exclude<keyof typeof CHECK_EXIT, 'ok' | 'usage'>;

/** The report, on one stream: ok lines and problems in the order found; the outcome is the first problem's. */
class Report {
  outcome: CheckOutcome | undefined;
  constructor(private readonly io: CliIo) {}
  line(text: string): void {
    this.io.out(text);
  }
  problem(outcome: CheckOutcome, text: string): void {
    this.outcome ??= outcome;
    this.io.out(`  PROBLEM  ${text}`);
  }
  get exitCode(): number {
    return this.outcome === undefined ? CHECK_EXIT.ok : CHECK_EXIT[this.outcome];
  }
}

/** What kind of problem an answer of the server is, for the exit code. */
function answerOutcome(error: MerchantResponseError): CheckOutcome {
  if (['not_found', 'invalid_response', 'redirected'].includes(error.code)) return 'url';
  if (error.code === 'timestamp_out_of_window') return 'clock';
  if (error.status === 401 || error.status === 403) return 'credentials';
  return 'server';
}

/** The server's default TIMESTAMP_TOLERANCE: the check cannot see the server's own setting. */
const DEFAULT_TOLERANCE_S = DEFAULTS.timestampTolerance;

export async function checkCommand(args: string[], io: CliIo, deps: CheckDeps = { prompt: terminalPrompt() }): Promise<number> {
  const parsed = readArguments(args);
  if (parsed === 'help') {
    io.out(CHECK_USAGE);
    return 0;
  }
  const { baseUrl, merchantId } = parsed;
  const apiKey = await readApiKey(io, deps, merchantId);
  const now = deps.now ?? Date.now;
  const clock = clockFromAnswers(deps.fetch ?? ((input, init) => globalThis.fetch(input, init)), now);
  const client = createMerchantClient({
    baseUrl,
    merchantId,
    apiKey,
    fetch: clock.fetch,
    now,
    timeoutMs: deps.timeoutMs ?? 10_000,
    retries: { maxRetries: 2, deadlineMs: 15_000 },
    userAgent: 'merchant-api-check',
  });
  const base = client.baseUrl;
  const report = new Report(io);
  report.line(`Checking ${base} for merchant "${merchantId}".`);

  // 1. The user list, with HTTP Basic: it tells a wrong key from a wrong URL, and a key it
  // refuses is not tried again on /validatesignature, so a wrong key counts as one failed
  // authentication against the server's throttle, not two.
  const users = await checkUsers(client, report, merchantId);
  if (users === 'stop') return report.exitCode;
  // Which data the key reaches (docs/test-mode.md): a test key's secret starts with test_, and the server accepted it.
  if (users === undefined) {
    report.line(apiKey.startsWith('test_') ? "  ok       mode: test: this key sees the merchant's test dataset only, never live data" : "  ok       mode: live: this key sees the merchant's live data");
  }
  // 2. The signature.
  let signature: unknown;
  try {
    await client.validateSignature();
    report.line('  ok       signature: this key signs requests the server accepts (GET /validatesignature)');
  } catch (error) {
    signature = error;
  }
  if (signature !== undefined && !(signature instanceof MerchantResponseError)) {
    report.problem('unreachable', unreachable(signature, base));
    return report.exitCode;
  }
  const offset = clock.offsetSeconds();
  reportClock(report, offset, signature);
  if (signature instanceof MerchantResponseError) {
    const urlProblem = ['not_found', 'invalid_response', 'redirected'].includes(signature.code);
    const words = urlProblem ? wrongUrl(signature, base) : `signature: ${signatureWords(signature, merchantId, base, users === undefined, offset)}`;
    // A signature over another URL with a key the user list accepts: the URL is wrong, not the key.
    const outcome = signature.code === 'signature_mismatch' && users === undefined ? 'url' : answerOutcome(signature);
    report.problem(outcome, `${words}${requestIdWords(signature)}`);
  }
  if (users !== undefined) {
    report.problem(answerOutcome(users), `user list: ${usersWords(users, merchantId, base)}${requestIdWords(users)}`);
  }
  if (signature === undefined && users === undefined) {
    report.line('Everything works: this merchant can sign requests and read its users.');
  }
  return report.exitCode;
}

/** MERCHANT_API_KEY, or the key typed at the prompt; never an argument. */
async function readApiKey(io: CliIo, deps: CheckDeps, merchantId: string): Promise<string> {
  // Read here, not with the server's settings (config.ts): `check` loads none of the peers those need.
  const apiKey = io.env.MERCHANT_API_KEY;
  if (apiKey !== undefined && apiKey !== '') return apiKey;
  if (!deps.prompt) throw new CliUsageError(`No API key: set MERCHANT_API_KEY, or run the command in a terminal to be asked for it.\n${CHECK_USAGE}`);
  const typed = await deps.prompt(`API key of ${merchantId}: `);
  if (typed === '') throw new CliUsageError('No API key was entered.');
  return typed;
}

/** A fetch that notes the `Date` header and timing of the last answer, and the clock offset they give. */
function clockFromAnswers(baseFetch: typeof fetch, now: () => number): { fetch: typeof fetch; offsetSeconds(): number | undefined } {
  let lastAnswer: { date: number; localMidpoint: number } | undefined;
  const fetchAndTime: typeof fetch = async (input, init) => {
    const sent = now();
    const response = await baseFetch(input, init);
    const date = Date.parse(response.headers.get('date') ?? '');
    // Date has whole seconds: the server's time was somewhere in that second, so its middle is the best guess.
    if (!Number.isNaN(date)) lastAnswer = { date: date + 500, localMidpoint: (sent + now()) / 2 };
    return response;
  };
  return { fetch: fetchAndTime, offsetSeconds: () => (lastAnswer ? Math.round((lastAnswer.date - lastAnswer.localMidpoint) / 1000) : undefined) };
}

/**
 * The first step: undefined when the user list answers, its error when the signature is still
 * worth checking, `'stop'` when the problem is reported and the signature is not to be tried.
 */
async function checkUsers(client: MerchantClient, report: Report, merchantId: string): Promise<MerchantResponseError | undefined | 'stop'> {
  const base = client.baseUrl;
  let first: number;
  try {
    first = await firstPage(client);
  } catch (users) {
    if (!(users instanceof MerchantResponseError)) {
      report.problem('unreachable', unreachable(users, base));
      report.line('  skipped  signature: not checked, the server cannot be reached.');
      return 'stop';
    }
    if (['not_found', 'invalid_response', 'redirected'].includes(users.code)) {
      report.problem('url', wrongUrl(users, base));
      report.line('  skipped  signature: not checked at a URL that is not the Merchant API.');
      return 'stop';
    }
    if (users.code === 'unauthorized') {
      report.problem('credentials', `user list: ${usersWords(users, merchantId, base)}${requestIdWords(users)}`);
      report.line('  skipped  signature: not checked with a key the server refused (a second try would count a second failed authentication against its throttle).');
      return 'stop';
    }
    return users;
  }
  report.line(`  ok       user list: this key reads GET /merchant/users (HTTP Basic); ${first === 0 ? 'no user shares data with this merchant yet' : 'the first page has a user'}`);
  return undefined;
}

/** The clock, measured from the answers' Date headers: a skew the signature step already reports is not repeated; one it survived (a server with a wider tolerance) is a warning. */
function reportClock(report: Report, offset: number | undefined, signature: unknown): void {
  if (offset === undefined || (signature instanceof MerchantResponseError && signature.code === 'timestamp_out_of_window')) return;
  if (Math.abs(offset) < DEFAULT_TOLERANCE_S) report.line(`  ok       clock: ${clockWords(offset)}`);
  else if (signature === undefined) report.line(`  warning  clock: ${clockWords(offset)}`);
  else report.problem('clock', `clock: ${clockWords(offset)}`);
}

async function firstPage(client: MerchantClient): Promise<number> {
  for await (const page of client.userPages({ pageSize: 1 })) return page.users.length;
  return 0;
}

/** The two options, checked; `'help'` for --help. */
function readArguments(args: string[]): { baseUrl: string; merchantId: string } | 'help' {
  // Refused by its name, with or without a value, before anything else: ps and shell histories show arguments.
  if (args.some((arg) => /^--(api-)?key(=|$)/.test(arg))) {
    throw new CliUsageError('The API key is never an argument (ps and shell histories would show it): set MERCHANT_API_KEY, or run the command in a terminal to be asked for it.');
  }
  const parsed = parseCommandArgs(args, { 'base-url': { type: 'string' }, 'merchant-id': { type: 'string' } }, CHECK_USAGE);
  if (parsed === 'help') return 'help';
  if (parsed.positionals.length > 0) throw new CliUsageError(`check takes only its options (got "${parsed.positionals[0]}").\n${CHECK_USAGE}`);
  const values = parsed.values as Record<string, string | undefined>;
  for (const name of ['base-url', 'merchant-id']) {
    if (values[name] === '') throw new CliUsageError(`--${name} needs a value.\n${CHECK_USAGE}`);
  }
  const baseUrl = values['base-url'];
  const merchantId = values['merchant-id'];
  if (baseUrl === undefined || merchantId === undefined) throw new CliUsageError(`--base-url and --merchant-id are required.\n${CHECK_USAGE}`);
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new CliUsageError(`--base-url "${baseUrl}" is not a URL; give the scheme too, e.g. https://api.example.com.`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliUsageError(`--base-url must be an http:// or https:// URL (got ${url.protocol}).`);
  if (url.search || url.hash || url.username || url.password) throw new CliUsageError('--base-url must be the URL the API answers at, without a query, a fragment or credentials.');
  return { baseUrl, merchantId };
}

function clockWords(offset: number): string {
  if (Math.abs(offset) <= 1) return "yours agrees with the server's (measured from its Date header, to a second)";
  const words = `yours is ${Math.abs(offset)} s ${offset > 0 ? 'behind' : 'ahead of'} the server's (measured from its Date header)`;
  return Math.abs(offset) < DEFAULT_TOLERANCE_S ? words : `${words}; servers accept ${DEFAULT_TOLERANCE_S} s by default. Set your clock by NTP.`;
}

function requestIdWords(error: MerchantResponseError): string {
  return error.requestId ? ` (request id ${error.requestId})` : '';
}

function signatureWords(error: MerchantResponseError, merchantId: string, base: string, keyWorks: boolean, offset: number | undefined): string {
  switch (error.code) {
    case 'signature_mismatch':
      return keyWorks
        ? `the key is right (the user list accepts it), but the server computes the signature over another URL than ${base}/validatesignature. Behind a proxy, the server's PUBLIC_URL must be the URL you call (${base}).`
        : `wrong API key: the signature made with this key matches none of the active keys of "${merchantId}". Check MERCHANT_API_KEY: the key may have been rotated or revoked.`;
    case 'timestamp_out_of_window': {
      // The message names the server's own tolerance: "… outside the accepted window of 300 seconds …".
      const window = /window of (\d+) seconds/.exec(error.message)?.[1];
      const accepts = window ? `${window} s` : `${DEFAULT_TOLERANCE_S} s by default`;
      return offset === undefined
        ? `clock skew: your clock differs from the server's by more than it accepts (${accepts}; it sent no Date header to measure by). Set your clock by NTP.`
        : `clock skew: your clock is ${Math.abs(offset)} s ${offset > 0 ? 'behind' : 'ahead of'} the server's (measured from its Date header), more than it accepts (${accepts}). Set your clock by NTP.`;
    }
    case 'unknown_merchant':
      return `no merchant has the id "${merchantId}" on this server: check --merchant-id.`;
    case 'merchant_disabled':
      return `the merchant account "${merchantId}" is disabled: ask the API's operator to enable it.`;
    default:
      return commonWords(error);
  }
}

function usersWords(error: MerchantResponseError, merchantId: string, base: string): string {
  switch (error.code) {
    case 'unauthorized':
      return `wrong API key or merchant id: GET /merchant/users refuses "${merchantId}" with this key (401).`;
    case 'merchant_disabled':
      return `the merchant account "${merchantId}" is disabled: ask the API's operator to enable it.`;
    case 'not_found':
    case 'invalid_response':
    case 'redirected':
      return wrongUrl(error, base);
    default:
      return commonWords(error);
  }
}

function commonWords(error: MerchantResponseError): string {
  switch (error.code) {
    case 'too_many_requests':
      return `the server refuses requests for now (429)${error.retryAfter === undefined ? '' : ` for ${error.retryAfter} s`}: ${error.message} Wait, then check again with the right key.`;
    case 'storage_unavailable':
      return 'the server is up, but its storage is unavailable (503): try again shortly, or tell the operator.';
    default:
      return `the server answered ${error.status} (${error.code}): ${error.message}`;
  }
}

function wrongUrl(error: MerchantResponseError, base: string): string {
  if (error.code === 'redirected') return `wrong base URL: ${error.message}`;
  const answer = error.code === 'not_found' ? `404 "${error.message}"` : `${error.status} with something that is not the Merchant API's JSON (${error.headers.get('content-type') ?? 'no content type'})`;
  return `wrong base URL or path: ${error.url} answered ${answer}. Give the URL the API answers at; if it is mounted under a path, include the path, e.g. ${new URL(base).origin}/merchant-api.`;
}

function unreachable(error: unknown, base: string): string {
  const url = new URL(base);
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  if (error instanceof MerchantTimeoutError) {
    return `no answer from ${url.host} within ${error.timeoutMs / 1000} s: the server is down or overloaded, or a firewall drops the connection.`;
  }
  if (error instanceof MerchantNetworkError) {
    const cause = error.message.replace(/^GET \S+ failed: /, '');
    switch (error.kind) {
      case 'tls':
        return /wrong version number|packet length|record layer|http request|InvalidContentType|CorruptMessage/i.test(cause)
          ? `TLS problem: ${url.host} does not speak HTTPS on port ${port} (${cause}). Use http:// for a plain HTTP server, or the port that serves HTTPS.`
          : `TLS problem: the certificate of ${url.host} is not trusted or not valid for that name (${cause}). With a private certificate authority, give Node its certificate: NODE_EXTRA_CA_CERTS=ca.pem.`;
      case 'refused':
        return `unreachable: ${url.hostname} refuses connections on port ${port}. Check the host and port of --base-url, and that the server runs.`;
      case 'dns':
        return `unreachable: the host name "${url.hostname}" does not resolve (${cause}). Check --base-url for typos, and your DNS.`;
      default:
        return `unreachable: the connection to ${url.host} failed (${cause}).${url.protocol === 'http:' ? ' If the server speaks HTTPS, use an https:// URL.' : ''}`;
    }
  }
  return `the check failed: ${error instanceof Error ? error.message : String(error)}`;
}

/**
 * A prompt on the terminal that does not echo what is typed, or undefined
 * when standard input is not a terminal (a pipe, CI): then only
 * MERCHANT_API_KEY can give the key.
 */
function terminalPrompt(): CheckDeps['prompt'] {
  if (!process.stdin.isTTY) return undefined;
  return (question) =>
    new Promise((resolve, reject) => {
      const { stdin, stderr } = process;
      stderr.write(question);
      stdin.setRawMode(true);
      stdin.setEncoding('utf8');
      stdin.resume();
      let value = '';
      const finish = () => {
        stdin.off('data', onData);
        stdin.setRawMode(false);
        stdin.pause();
        stderr.write('\n');
      };
      const onData = (chunk: string) => {
        for (const char of chunk) {
          if (char === '\r' || char === '\n' || char === '\u0004') {
            finish();
            resolve(value);
            return;
          }
          if (char === '\u0003') {
            finish();
            reject(new CliUsageError('Cancelled.'));
            return;
          }
          value = char === '\u007f' || char === '\b' ? value.slice(0, -1) : value + char;
        }
      };
      stdin.on('data', onData);
    });
}
