/**
 * `GET /merchant/webhooks/{id}/deliveries` and `POST /merchant/webhooks/{id}/redeliver`
 * (docs/webhooks.md#deliveries): the authenticated merchant reads what became of the deliveries
 * to one of its endpoints, newest first, a page at a time, and has some sent again, with the same
 * event id. The same data as the CLI's `webhook deliveries --json` (`deliveryJson`), from the same
 * storage functions. Another merchant's endpoint, or an event it has no delivery of, is 404, as one
 * that does not exist. Bounded: a page holds at most `MAX_DELIVERY_PAGE` and looks at most
 * `DELIVERY_SCAN` deliveries; a redelivery reaches back at most the retention and requeues at most
 * `MAX_REDELIVERIES`, the oldest first, answering where to go on from. A redelivery is logged as
 * the CLI logs it and audited (MySQL) as done by the merchant and its key (`merchantChange`).
 */
import { MerchantApiError } from '../errors.js';
import type { RequestContext } from '../http/context.js';
import { readJsonBody } from '../http/json-body.js';
import { parseQuery } from '../http/query.js';
import { reply, type Reply } from '../http/responses.js';
import { printable } from '../listing/printable.js';
import { pct } from '../signing/index.js';
import { canonicalTimestamp } from '../storage/timestamps.js';
import {
  decodeDeliveryCursor,
  DEFAULT_DELIVERY_PAGE,
  DELIVERY_STATES,
  deliveryJson,
  encodeDeliveryCursor,
  MAX_DELIVERY_PAGE,
  MAX_REDELIVERIES,
  type DeliveryCursor,
  type DeliveryState,
} from '../storage/webhook-deliveries.js';
import { WEBHOOKS_NOT_KEPT } from '../storage/webhook-endpoints.js';
import type { HandlerDeps, RouteInput } from './route.js';
import { merchantChange } from './webhooks.js';

const ENDPOINT_NOT_FOUND = new MerchantApiError('not_found', 'This merchant has no webhook endpoint with this id.');
const EVENT_NOT_FOUND = new MerchantApiError('not_found', 'This endpoint has no delivery of this event.');

function invalid(param: string, message: string): MerchantApiError {
  return new MerchantApiError('invalid_parameter', message, { param });
}

interface DeliveryParams {
  limit: number;
  after: DeliveryCursor | undefined;
  state: DeliveryState | undefined;
}

/** `limit`, `cursor` and `state`, each at most once: every problem at once, one detail each. */
function deliveryParams(search: string): DeliveryParams {
  const params: DeliveryParams = { limit: DEFAULT_DELIVERY_PAGE, after: undefined, state: undefined };
  const seen = new Set<string>();
  const problems: Array<{ code: 'unknown_parameter' | 'invalid_parameter' | 'invalid_cursor'; message: string; param: string }> = [];
  for (const [key, value] of parseQuery(search)) {
    if (key !== 'limit' && key !== 'cursor' && key !== 'state') {
      problems.push({ code: 'unknown_parameter', message: `Unknown parameter: ${printable(key)}. This endpoint takes limit, cursor and state.`, param: key });
      continue;
    }
    if (seen.has(key)) {
      problems.push({ code: 'invalid_parameter', message: `${key} is given more than once.`, param: key });
      continue;
    }
    seen.add(key);
    if (key === 'limit') {
      if (/^[1-9]\d{0,2}$/.test(value) && Number(value) <= MAX_DELIVERY_PAGE) params.limit = Number(value);
      else problems.push({ code: 'invalid_parameter', message: `limit must be a whole number from 1 to ${MAX_DELIVERY_PAGE}.`, param: 'limit' });
    } else if (key === 'cursor') {
      params.after = decodeDeliveryCursor(value);
      if (params.after === undefined) problems.push({ code: 'invalid_cursor', message: 'cursor is not a next_cursor of this endpoint; pass the next_cursor of the previous page.', param: 'cursor' });
    } else if ((DELIVERY_STATES as readonly string[]).includes(value)) params.state = value as DeliveryState;
    else problems.push({ code: 'invalid_parameter', message: `state must be one of ${DELIVERY_STATES.join(', ')}.`, param: 'state' });
  }
  if (problems.length > 0) throw new MerchantApiError(problems[0]!.code, problems[0]!.message, { details: problems });
  return params;
}

/** `GET /merchant/webhooks/{id}/deliveries?limit=&cursor=&state=`: one page, newest first, with `next_cursor` (null at the end). */
export async function listWebhookDeliveries(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  if (!deps.webhooks.supported) throw WEBHOOKS_NOT_KEPT;
  const params = deliveryParams(input.search);
  const endpointId = input.params.id!;
  const page = await deps.storage(ctx).listEndpointDeliveries({ merchantId: input.merchant!.id, endpointId, state: params.state, limit: params.limit, after: params.after });
  if (page === undefined) throw ENDPOINT_NOT_FOUND;
  let headers: Record<string, string> | undefined;
  let nextCursor: string | null = null;
  if (page.next !== null) {
    nextCursor = encodeDeliveryCursor(page.next);
    const url = `${deps.resolveBases(ctx, input.origin)[0]}${deps.basePath}/merchant/webhooks/${pct(endpointId)}/deliveries`;
    const query = [['limit', String(params.limit)], ...(params.state === undefined ? [] : [['state', params.state]]), ['cursor', nextCursor]].map(([k, v]) => `${k}=${pct(v!)}`).join('&');
    headers = { link: `<${url}?${query}>; rel="next"` };
  }
  return reply(200, JSON.stringify({ status: 'ok', data: page.items.map(deliveryJson), next_cursor: nextCursor, errors: [] }), headers);
}

/**
 * The members of a redelivery: exactly one of `event_id` and `since`, the time within the retention
 * and not ahead; with `since`, `cursor` (the `next_cursor` of the previous answer) goes on from there.
 */
function redeliveryTarget(body: Record<string, unknown>, retentionMs: number, now: number): { eventId: string } | { since: string; after?: DeliveryCursor } {
  const unknown = Object.keys(body).filter((key) => key !== 'event_id' && key !== 'since' && key !== 'cursor');
  if (unknown.length > 0) {
    const details = unknown.map((key) => ({ code: 'unknown_parameter' as const, message: `Unknown member of the body: ${printable(key)}. It takes event_id, or since with an optional cursor.`, param: key }));
    throw new MerchantApiError('unknown_parameter', details[0]!.message, { details });
  }
  const { event_id: eventId, since } = body;
  if ((eventId === undefined) === (since === undefined)) throw new MerchantApiError('malformed_request', 'Give exactly one of event_id (one event) and since (every delivery created since then).');
  if (eventId !== undefined) {
    if (typeof eventId !== 'string' || eventId.length === 0 || eventId.length > 64) throw invalid('event_id', 'event_id must be an event id (evt_...) of 1-64 characters.');
    if (body.cursor !== undefined) throw new MerchantApiError('malformed_request', 'cursor goes with since (the next_cursor of the previous redelivery since that time), not with event_id.');
    return { eventId };
  }
  const canonical = typeof since === 'string' ? canonicalTimestamp(since) : undefined;
  if (canonical === undefined) throw invalid('since', 'since must be an RFC 3339 time such as 2026-11-28T04:00:00Z.');
  const at = Date.parse(canonical);
  const days = retentionMs / 86_400_000;
  const retention = Number.isInteger(days) ? `${days} day${days === 1 ? '' : 's'}` : `${Math.round(retentionMs / 1000)} s`;
  if (at < now - retentionMs) throw invalid('since', `since may reach back at most ${retention} (the retention: older deliveries are deleted).`);
  if (at > now) throw invalid('since', 'since is ahead of now: no delivery was created since then.');
  if (body.cursor === undefined) return { since: canonical };
  const after = typeof body.cursor === 'string' ? decodeDeliveryCursor(body.cursor) : undefined;
  if (after === undefined) throw new MerchantApiError('invalid_cursor', 'cursor is not a next_cursor of a redelivery; pass the next_cursor of the previous answer, with the same since.', { param: 'cursor' });
  return { since: canonical, after };
}

/**
 * `POST /merchant/webhooks/{id}/redeliver` with `{"event_id": "evt_..."}` or `{"since": TIME}`: 202,
 * the deliveries due again now, at most `MAX_REDELIVERIES` of them (the oldest first; with more,
 * `next_cursor` goes on, sent back as `cursor` with the same `since`). A disabled endpoint is 409.
 */
export async function redeliverWebhook(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  if (!deps.webhooks.supported) throw WEBHOOKS_NOT_KEPT;
  if (input.search !== '') {
    const pairs = parseQuery(input.search);
    if (pairs.length > 0) {
      const details = pairs.map(([key]) => ({ code: 'unknown_parameter' as const, message: `Unknown parameter: ${printable(key)}. This endpoint takes none.`, param: key }));
      throw new MerchantApiError('unknown_parameter', details[0]!.message, { details });
    }
  }
  const target = redeliveryTarget(await readJsonBody(ctx.request), deps.webhooks.retentionMs, deps.now());
  const merchantId = input.merchant!.id;
  const endpointId = input.params.id!;
  const result = await deps.storage(ctx).redeliverEndpointDeliveries({ merchantId, endpointId, target, max: MAX_REDELIVERIES, ...merchantChange(ctx, input) });
  if (result === undefined) throw ENDPOINT_NOT_FOUND;
  if ('eventId' in target && result.matched === 0) throw EVENT_NOT_FOUND;
  const what = 'eventId' in target ? { event_id: target.eventId } : { since: target.since };
  if (result.queued > 0) {
    deps.logger.info({ event: 'webhook_redelivered', request_id: ctx.requestId, merchant_id: merchantId, endpoint_id: endpointId, ...what, deliveries: result.queued }, 'webhook deliveries queued again');
  }
  const answer = { endpoint_id: endpointId, ...what, matched: result.matched, queued: result.queued, max: MAX_REDELIVERIES, next_cursor: result.next === null ? null : encodeDeliveryCursor(result.next) };
  return reply(202, JSON.stringify({ status: 'ok', data: [answer], errors: [] }));
}
