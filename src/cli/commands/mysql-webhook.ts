/**
 * `merchant-api webhook add|list|remove|rotate-secret|enable|deliveries|redeliver` on MySQL
 * (docs/webhooks.md#operations), and the dispatcher `serve` runs on MySQL. A new secret is printed
 * once and stored only sealed; a URL is checked with the address rules the dispatcher applies
 * (WEBHOOK_ALLOW_PRIVATE, WEBHOOK_ALLOW_HTTP). Every change writes one log event (admin-log.ts).
 */
import type { Logger } from '../../index.js';

import type { WebhookMetrics } from '../../observe/metrics.js';
import {
  addWebhookEndpoint,
  createMysqlKysely,
  enableWebhookEndpoint,
  listEndpointDeliveryPage,
  listWebhookDeliveries,
  listWebhookEndpoints,
  MysqlWebhookOutbox,
  redeliverEndpointDeliveries,
  redeliverWebhooks,
  removeWebhookEndpoint,
  rotateWebhookSecret,
  WebhookAdminError,
} from '../../storage/mysql/index.js';
import { decodeDeliveryCursor, DELIVERY_STATES, deliveryJson, encodeDeliveryCursor, MAX_DELIVERY_PAGE, MAX_REDELIVERIES, type DeliveryCursor, type DeliveryState } from '../../cli-internal.js';
import { canonicalTimestamp, checkWebhookUrl, DEFAULT_SUBSCRIBED_EVENTS, isWebhookEventType, resolveWebhookAddress, WebhookAddressError } from '../../cli-internal.js';
import { runWebhookDispatcher, type RunningDispatcher } from '../webhook-dispatch.js';
import type { CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';
import type { MysqlConfig } from '../config.js';
import { logAdminChange } from './admin-log.js';
import { ACTOR_OPTION, actorOf } from './actor.js';
import { databaseUrl, runMysqlCommand, withDatabase } from './mysql-env.js';
import { commandGroup, parseCommandArgs } from './parse-args.js';
import { parseDuration } from './duration.js';

const USAGE = `Usage: merchant-api webhook <subcommand>
  add MERCHANT_ID URL [--events a,b] [--json]
                                   add an endpoint (https, public address); prints its id and secret, once
  list [--merchant ID] [--json]    endpoints, with status; never a secret
  remove ID                        remove an endpoint and its deliveries
  rotate-secret ID [--expire-old-in DURATION] [--json]
                                   a new secret (printed once); the old one keeps signing until then (default: stops now)
  enable ID                        enable an endpoint disabled by a 410 or by failing for days
  deliveries [--endpoint ID [--limit N] [--cursor C]] [--state S] [--json]
                                   the newest deliveries: state, attempts, last status (as the API's
                                   GET /merchant/webhooks/{id}/deliveries answers them)
  redeliver EVENT_ID | --endpoint ID --since TIME
                                   send deliveries again, due now, with the same event id
Every change takes --actor NAME (else MERCHANT_API_ACTOR, else the OS user) for the audit trail.`;

export const webhookCommand = commandGroup('webhook', USAGE, {
  add,
  list,
  remove,
  'rotate-secret': rotate,
  enable,
  deliveries,
  redeliver,
});

type Options = Parameters<typeof parseCommandArgs>[1];

function parse(args: string[], options: Options, count: number, what: string): Exclude<ReturnType<typeof parseCommandArgs>, 'help'> | 'help' {
  const parsed = parseCommandArgs(args, options, USAGE);
  if (parsed !== 'help' && parsed.positionals.length !== count) throw new CliUsageError(`Give ${what}.\n${USAGE}`);
  return parsed;
}

function help(io: CliIo): number {
  io.out(USAGE);
  return 0;
}

/** Admin errors are the operator's to fix: one line, exit 1. */
async function run(io: CliIo, operation: string, config: MysqlConfig, body: (db: Parameters<Parameters<typeof withDatabase>[1]>[0]) => Promise<number>): Promise<number> {
  return runMysqlCommand(io, operation, () =>
    withDatabase(config, async (db) => {
      try {
        return await body(db);
      } catch (error) {
        if (error instanceof WebhookAddressError && error.liftedBy) {
          io.err(`${operation} failed: ${error.message} ${error.liftedBy}=true lifts the rule, for development and tests only (docs/webhooks.md#testing-on-your-machine).`);
          return 1;
        }
        if (error instanceof WebhookAdminError || error instanceof WebhookAddressError) {
          io.err(`${operation} failed: ${error.message}`);
          return 1;
        }
        throw error;
      }
    }),
  );
}

async function add(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { events: { type: 'string' }, json: { type: 'boolean' }, ...ACTOR_OPTION }, 2, 'the MERCHANT_ID and the URL');
  if (parsed === 'help') return help(io);
  const [merchantId, url] = parsed.positionals as [string, string];
  const events = parsed.values.events === undefined ? [...DEFAULT_SUBSCRIBED_EVENTS] : String(parsed.values.events).split(',').map((e) => e.trim());
  const unknown = events.filter((event) => !isWebhookEventType(event) || event === 'webhook.test');
  if (unknown.length > 0 || events.length === 0) throw new CliUsageError(`--events takes user.shared, user.updated, user.deactivated and user.unshared, comma-separated (got "${unknown.join(',')}").`);
  const policy = { allowPrivate: config.webhooks.allowPrivate, allowHttp: config.webhooks.allowHttp };
  const key = config.masterKey();
  return run(io, 'webhook add', config, async (db) => {
    const checked = checkWebhookUrl(url, policy);
    await resolveWebhookAddress(checked, policy);
    const endpoint = await addWebhookEndpoint(db, key, merchantId, checked.href, [...new Set(events)], config.webhooks.maxEndpointsPerMerchant, actorOf(parsed.values, io));
    logAdminChange(io, 'webhook_endpoint_added', { merchant_id: merchantId, endpoint_id: endpoint.id, events: endpoint.events }, 'webhook endpoint added');
    if (parsed.values.json) io.out(JSON.stringify({ id: endpoint.id, merchant_id: merchantId, url: endpoint.url, events: endpoint.events, created_at: endpoint.createdAt, secret: endpoint.secret }));
    else {
      io.out(`Webhook endpoint ${endpoint.id} added for "${merchantId}": ${endpoint.url} (${endpoint.events.join(', ')}).`);
      io.out(`Signing secret, shown only now (stored encrypted): ${endpoint.secret}`);
    }
    return 0;
  });
}

async function list(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { merchant: { type: 'string' }, json: { type: 'boolean' } }, 0, 'no positional argument');
  if (parsed === 'help') return help(io);
  return run(io, 'webhook list', config, async (db) => {
    const endpoints = await listWebhookEndpoints(db, parsed.values.merchant as string | undefined);
    if (parsed.values.json) io.out(JSON.stringify(endpoints.map(endpointJson)));
    else if (endpoints.length === 0) io.out('No webhook endpoints: add one with `merchant-api webhook add MERCHANT_ID URL`.');
    else table(io, ['ID', 'MERCHANT', 'STATUS', 'EVENTS', 'URL'], endpoints.map((e) => [e.id, e.merchantId, e.status + (e.disabledReason ? ` (${e.disabledReason})` : ''), e.events.join(','), e.url]));
    return 0;
  });
}

async function remove(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { ...ACTOR_OPTION }, 1, 'one endpoint ID');
  if (parsed === 'help') return help(io);
  const [id] = parsed.positionals as [string];
  return run(io, 'webhook remove', config, async (db) => {
    await removeWebhookEndpoint(db, id, undefined, actorOf(parsed.values, io));
    logAdminChange(io, 'webhook_endpoint_removed', { endpoint_id: id }, 'webhook endpoint removed');
    io.out(`Webhook endpoint ${id} removed, with its deliveries.`);
    return 0;
  });
}

async function rotate(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { 'expire-old-in': { type: 'string' }, json: { type: 'boolean' }, ...ACTOR_OPTION }, 1, 'one endpoint ID');
  if (parsed === 'help') return help(io);
  const [id] = parsed.positionals as [string];
  const expireText = parsed.values['expire-old-in'] as string | undefined;
  const seconds = expireText === undefined ? 0 : parseDuration(expireText, '--expire-old-in');
  const key = config.masterKey();
  return run(io, 'webhook rotate-secret', config, async (db) => {
    const { secret, oldExpiresAt } = await rotateWebhookSecret(db, key, id, seconds * 1000, undefined, actorOf(parsed.values, io));
    logAdminChange(io, 'webhook_secret_rotated', { endpoint_id: id, old_expires_at: oldExpiresAt }, 'webhook secret rotated');
    if (parsed.values.json) io.out(JSON.stringify({ id, secret, old_secret_expires_at: oldExpiresAt }));
    else {
      io.out(`New signing secret for ${id}, shown only now (stored encrypted): ${secret}`);
      io.out(oldExpiresAt ? `Until ${oldExpiresAt} (UTC) every delivery carries both signatures.` : 'The old secret no longer signs.');
    }
    return 0;
  });
}

async function enable(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { ...ACTOR_OPTION }, 1, 'one endpoint ID');
  if (parsed === 'help') return help(io);
  const [id] = parsed.positionals as [string];
  return run(io, 'webhook enable', config, async (db) => {
    if (!(await enableWebhookEndpoint(db, id, undefined, actorOf(parsed.values, io)))) {
      io.out(`Webhook endpoint ${id} was enabled already; nothing changed.`);
      return 0;
    }
    logAdminChange(io, 'webhook_endpoint_enabled', { endpoint_id: id }, 'webhook endpoint enabled');
    io.out(`Webhook endpoint ${id} enabled. Deliveries cancelled while it was disabled are sent with \`webhook redeliver --endpoint ${id} --since TIME\`.`);
    return 0;
  });
}

const STATES: readonly string[] = DELIVERY_STATES;

/**
 * With `--endpoint`, one page of its deliveries, newest first, read as the API reads it
 * (`listEndpointDeliveryPage`; `--limit`, default and most 100; `--cursor` goes on, the next one
 * printed on stderr); without, the newest 100 of every endpoint. `--json`: an array of the API's items.
 */
async function deliveries(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { endpoint: { type: 'string' }, state: { type: 'string' }, limit: { type: 'string' }, cursor: { type: 'string' }, json: { type: 'boolean' } }, 0, 'no positional argument');
  if (parsed === 'help') return help(io);
  const state = parsed.values.state as string | undefined;
  if (state !== undefined && !STATES.includes(state)) throw new CliUsageError(`--state is one of ${STATES.join(', ')} (got "${state}").`);
  const endpointId = parsed.values.endpoint as string | undefined;
  const limitText = parsed.values.limit as string | undefined;
  const cursorText = parsed.values.cursor as string | undefined;
  if (endpointId === undefined && (limitText !== undefined || cursorText !== undefined)) throw new CliUsageError('--limit and --cursor go with --endpoint ID.');
  const limit = limitText === undefined ? MAX_DELIVERY_PAGE : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_DELIVERY_PAGE) throw new CliUsageError(`--limit is a whole number from 1 to ${MAX_DELIVERY_PAGE} (got "${limitText}").`);
  let after: DeliveryCursor | undefined;
  if (cursorText !== undefined && (after = decodeDeliveryCursor(cursorText)) === undefined) throw new CliUsageError('--cursor takes the next cursor a previous page printed.');
  return run(io, 'webhook deliveries', config, async (db) => {
    let next: DeliveryCursor | null = null;
    let found;
    if (endpointId === undefined) found = await listWebhookDeliveries(db, { state });
    else ({ items: found, next } = await listEndpointDeliveryPage(db, { endpointId, state: state as DeliveryState | undefined, limit, after }));
    if (parsed.values.json) io.out(JSON.stringify(found.map(deliveryJson)));
    else if (found.length === 0) io.out('No deliveries.');
    else table(io, ['EVENT', 'ENDPOINT', 'TYPE', 'STATE', 'ATTEMPTS', 'LAST', 'CREATED (UTC)'], found.map((d) => [d.eventId, d.endpointId, d.type, d.state, String(d.attempts), d.lastStatus !== null ? String(d.lastStatus) : (d.lastError ?? '-'), d.createdAt]));
    if (next !== null) io.err(`More: webhook deliveries --endpoint ${endpointId}${state === undefined ? '' : ` --state ${state}`} --limit ${limit} --cursor ${encodeDeliveryCursor(next)}`);
    return 0;
  });
}

async function redeliver(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parseCommandArgs(args, { endpoint: { type: 'string' }, since: { type: 'string' }, ...ACTOR_OPTION }, USAGE);
  if (parsed === 'help') return help(io);
  const endpointId = parsed.values.endpoint as string | undefined;
  const sinceText = parsed.values.since as string | undefined;
  let target: { eventId: string } | { endpointId: string; since: string };
  // The time as given, to the microsecond, for the log event (canonical, as every command prints times).
  let since: string | undefined;
  if (parsed.positionals.length === 1 && endpointId === undefined && sinceText === undefined) target = { eventId: parsed.positionals[0]! };
  else if (parsed.positionals.length === 0 && endpointId !== undefined && sinceText !== undefined) {
    since = canonicalTimestamp(sinceText);
    if (since === undefined) throw new CliUsageError(`--since is a time such as 2026-11-28T04:00:00Z (got "${sinceText}").`);
    target = { endpointId, since: `${since.slice(0, 10)} ${since.slice(11, 26)}` };
  } else throw new CliUsageError(`Give an EVENT_ID, or --endpoint ID with --since TIME.\n${USAGE}`);
  return run(io, 'webhook redeliver', config, async (db) => {
    const actor = actorOf(parsed.values, io);
    let queued: number;
    if ('eventId' in target) queued = await redeliverWebhooks(db, target, actor);
    else {
      // As the API does, at most MAX_REDELIVERIES per transaction (each audited), the oldest first, until none is left.
      const first = await redeliverEndpointDeliveries(db, { endpointId: target.endpointId, target: { since: since! }, max: MAX_REDELIVERIES }, actor);
      queued = first.queued;
      for (let next = first.next; next !== null; ) {
        const more = await redeliverEndpointDeliveries(db, { endpointId: target.endpointId, target: { since: since!, after: next }, max: MAX_REDELIVERIES }, actor);
        queued += more.queued;
        next = more.next;
      }
    }
    if (queued === 0) {
      io.out('No delivery to send again (none found, or its endpoint is disabled); nothing changed.');
      return 0;
    }
    logAdminChange(io, 'webhook_redelivered', { ...('eventId' in target ? { event_id: target.eventId } : { endpoint_id: target.endpointId, since }), deliveries: queued }, 'webhook deliveries queued again');
    io.out(`${queued} deliver${queued === 1 ? 'y' : 'ies'} queued again.`);
    return 0;
  });
}

/** An endpoint as `webhook list --json` prints it: snake_case as every command's JSON; never a secret. */
function endpointJson(e: Awaited<ReturnType<typeof listWebhookEndpoints>>[number]): Record<string, unknown> {
  return { id: e.id, merchant_id: e.merchantId, url: e.url, events: e.events, status: e.status, disabled_reason: e.disabledReason, created_at: e.createdAt };
}

/** Columns padded to their widest cell. */
function table(io: CliIo, head: string[], rows: string[][]): void {
  const all = [head, ...rows];
  const widths = head.map((_, column) => Math.max(...all.map((row) => row[column]!.length)));
  for (const row of all) io.out(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd());
}

export type { RunningDispatcher };

/**
 * Starts the dispatcher `serve` runs on MySQL (unless WEBHOOKS=false), on a small pool of its own
 * (the logging, metrics and `/healthz` part are `../webhook-dispatch.ts`'s, as on the memory storage).
 */
export async function startWebhookDispatcher(config: MysqlConfig, io: CliIo, logger: Logger, metrics?: WebhookMetrics): Promise<RunningDispatcher | undefined> {
  const settings = config.webhooks;
  if (!settings.dispatch) return undefined;
  const db = createMysqlKysely(databaseUrl(config), { connectionLimit: 4, connectTimeout: config.storageTimeout, queryTimeout: Math.max(config.storageTimeout, 30_000) });
  return runWebhookDispatcher(new MysqlWebhookOutbox({ db, masterKey: config.masterKey() }), settings, io, logger, metrics, () => db.destroy().catch(() => undefined));
}
