/**
 * `/merchant/webhooks` (docs/webhooks.md#endpoints): the authenticated merchant lists, adds and
 * removes its webhook endpoints, rotates a secret and queues a test event. Another merchant's
 * endpoint is 404, as one that does not exist. A URL passes the address rules the dispatcher
 * applies at every attempt, here before it is stored; every change is logged as the CLI logs it
 * (never the secret), and recorded in the storage's audit trail as done by the merchant and the key
 * that authenticated the request (`merchantChange`: the actor, and the key's id). Every one of them
 * needs the scope `webhooks:manage` (the route table): an endpoint pushes users' records out. The storage does the rest (`Storage.addWebhookEndpoint`, ...); one without
 * webhooks answers 501 `not_implemented`.
 */
import { MerchantApiError } from '../errors.js';
import type { RequestContext } from '../http/context.js';
import { readJsonBody } from '../http/json-body.js';
import { parseQuery } from '../http/query.js';
import { reply, type Reply } from '../http/responses.js';
import { printable } from '../listing/printable.js';
import { WEBHOOKS_NOT_KEPT, type WebhookEndpointSummary } from '../storage/webhook-endpoints.js';
import { checkWebhookUrl, MAX_WEBHOOK_URL_LENGTH, resolveWebhookAddress, systemResolve, WebhookAddressError, type Resolve } from '../webhooks/address-guard.js';
import { DEFAULT_SUBSCRIBED_EVENTS, isWebhookEventType } from '../webhooks/events.js';
import { parseDurationMs } from '../webhooks/retry-schedule.js';
import type { HandlerDeps, RouteInput } from './route.js';

/** Longest URL an endpoint may have, as given and as stored (normalized, percent-encoded: `checkWebhookUrl`). */
export { MAX_WEBHOOK_URL_LENGTH };
/** Longest overlap of two secrets after a rotation (as `webhook rotate-secret --expire-old-in`): 366 days. */
export const MAX_EXPIRE_OLD_IN_MS = 366 * 86_400_000;
/** The events an endpoint can ask for (`webhook.test` is sent on request, to every endpoint). */
const SUBSCRIBABLE = DEFAULT_SUBSCRIBED_EVENTS;

/** Longest wait for an endpoint URL's name to resolve: a slow resolver must not hold the request longer. */
export const RESOLVE_TIMEOUT_MS = 5000;

/** `resolve`, given up after `timeoutMs` as a name that does not resolve (a 400 naming it). */
export function boundedResolve(resolve: Resolve, timeoutMs: number): Resolve {
  return (hostname) =>
    new Promise((done, fail) => {
      const timer = setTimeout(() => fail(new WebhookAddressError(`${hostname} did not resolve within ${timeoutMs / 1000} s.`)), timeoutMs);
      resolve(hostname).then(
        (addresses) => {
          clearTimeout(timer);
          done(addresses);
        },
        (error: unknown) => {
          clearTimeout(timer);
          fail(error);
        },
      );
    });
}

const resolveInTime = boundedResolve(systemResolve, RESOLVE_TIMEOUT_MS);

const ENDPOINT_NOT_FOUND = new MerchantApiError('not_found', 'This merchant has no webhook endpoint with this id.');

/** The answer of a list or a change: the envelope, `data` holding `items`. */
function ok(status: number, items: readonly object[]): Reply {
  return reply(status, JSON.stringify({ status: 'ok', data: items, errors: [] }));
}

/** The longest actor the audit trail keeps (`audit_events.actor`, 128 characters): a longer one is cut. */
const MAX_ACTOR_LENGTH = 128;

/**
 * Who the audit trail records a merchant's change as: `actor`, `merchant:ID key:KEY_ID`, the key
 * that authenticated the request (its id, never the key), or `merchant:ID` for a key without an
 * id; and `keyId`, that id alone, for the row's `key_id`. A merchant id may be 128 characters,
 * which the trail would cut before the key: then the id is shortened in the actor (`…`), the
 * key's part kept whole (the row's `merchant_id` holds the whole id).
 */
export function merchantChange(ctx: RequestContext, input: RouteInput): { actor: string; keyId?: string } {
  const merchant = input.merchant!;
  const keyId = merchant.keyIds?.[ctx.keyIndex];
  if (keyId === undefined) return { actor: `merchant:${merchant.id}` };
  const keyPart = ` key:${keyId}`;
  const whole = `merchant:${merchant.id}${keyPart}`;
  if (whole.length <= MAX_ACTOR_LENGTH) return { actor: whole, keyId };
  return { actor: `merchant:${merchant.id.slice(0, MAX_ACTOR_LENGTH - keyPart.length - 'merchant:'.length - 1)}…${keyPart}`, keyId };
}

/** An endpoint as a merchant sees it: never the secret. */
function endpointJson(endpoint: WebhookEndpointSummary): Record<string, unknown> {
  return { id: endpoint.id, url: endpoint.url, events: endpoint.events, status: endpoint.status, disabled_reason: endpoint.disabledReason, created_at: endpoint.createdAt };
}

/** These endpoints take no query parameter: one `unknown_parameter` per name. */
export function noQuery(search: string): void {
  const pairs = parseQuery(search);
  if (pairs.length === 0) return;
  const details = pairs.map(([key]) => ({ code: 'unknown_parameter' as const, message: `Unknown parameter: ${printable(key)}. This endpoint takes none.`, param: key }));
  throw new MerchantApiError('unknown_parameter', details[0]!.message, { details });
}

/** Members of the body other than `known`: one `unknown_parameter` per name. */
export function onlyMembers(body: Record<string, unknown>, known: readonly string[]): void {
  const unknown = Object.keys(body).filter((key) => !known.includes(key));
  if (unknown.length === 0) return;
  const details = unknown.map((key) => ({ code: 'unknown_parameter' as const, message: `Unknown member of the body: ${printable(key)}. It takes ${known.join(', ')}.`, param: key }));
  throw new MerchantApiError('unknown_parameter', details[0]!.message, { details });
}

/** What every one of these endpoints checks first: a storage without webhooks answers 501, whatever the request. */
function supported(deps: HandlerDeps): void {
  if (!deps.webhooks.supported) throw WEBHOOKS_NOT_KEPT;
}

function invalid(param: string, message: string): MerchantApiError {
  return new MerchantApiError('invalid_parameter', message, { param });
}

/** `GET /merchant/webhooks`: the merchant's endpoints, oldest first, without secrets. */
export async function listWebhooks(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  supported(deps);
  noQuery(input.search);
  const endpoints = await deps.storage(ctx).listWebhookEndpoints(input.merchant!.id);
  return ok(200, endpoints.map(endpointJson));
}

/** The `events` of a new endpoint: known types, at least one, each once (default: every user event). */
function eventsOf(value: unknown): string[] {
  if (value === undefined) return [...SUBSCRIBABLE];
  if (!Array.isArray(value) || value.length === 0 || value.length > SUBSCRIBABLE.length * 4) throw invalid('events', `events must be a non-empty array of ${SUBSCRIBABLE.join(', ')}.`);
  for (const event of value) {
    if (typeof event !== 'string' || !isWebhookEventType(event) || !SUBSCRIBABLE.includes(event)) {
      throw invalid('events', `Unknown event type ${typeof event === 'string' ? printable(event) : JSON.stringify(event)}: events takes ${SUBSCRIBABLE.join(', ')}.`);
    }
  }
  return [...new Set(value as string[])];
}

/** `POST /merchant/webhooks` with `{"url", "events"}`: 201 with the endpoint and its secret, shown only now. */
export async function createWebhook(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  supported(deps);
  noQuery(input.search);
  const body = await readJsonBody(ctx.request);
  onlyMembers(body, ['url', 'events']);
  const { url } = body;
  if (typeof url !== 'string' || url.length === 0 || url.length > MAX_WEBHOOK_URL_LENGTH) throw invalid('url', `url must be a string of 1-${MAX_WEBHOOK_URL_LENGTH} characters.`);
  const events = eventsOf(body.events);
  const policy = { allowPrivate: deps.webhooks.allowPrivate, allowHttp: deps.webhooks.allowHttp };
  let checked: URL;
  try {
    checked = checkWebhookUrl(url, policy);
    // Resolved now as at every attempt: a name that is private, or does not resolve, is refused before it is stored.
    await resolveWebhookAddress(checked, policy, resolveInTime);
  } catch (error) {
    if (error instanceof WebhookAddressError) throw invalid('url', error.message);
    throw error;
  }
  const merchantId = input.merchant!.id;
  const endpoint = await deps.storage(ctx).addWebhookEndpoint({ merchantId, url: checked.href, events, maxPerMerchant: deps.webhooks.maxEndpointsPerMerchant, ...merchantChange(ctx, input) });
  deps.logger.info({ event: 'webhook_endpoint_added', request_id: ctx.requestId, merchant_id: merchantId, endpoint_id: endpoint.id, events: endpoint.events }, 'webhook endpoint added');
  return ok(201, [{ ...endpointJson(endpoint), secret: endpoint.secret }]);
}

/** `DELETE /merchant/webhooks/{id}`: 204, the endpoint and its deliveries gone. */
export async function removeWebhook(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  supported(deps);
  noQuery(input.search);
  const merchantId = input.merchant!.id;
  const id = input.params.id!;
  if (!(await deps.storage(ctx).removeWebhookEndpoint(merchantId, id, merchantChange(ctx, input)))) throw ENDPOINT_NOT_FOUND;
  deps.logger.info({ event: 'webhook_endpoint_removed', request_id: ctx.requestId, merchant_id: merchantId, endpoint_id: id }, 'webhook endpoint removed');
  return reply(204, '');
}

/** `POST /merchant/webhooks/{id}/rotate-secret` with `{"expire_old_in": "24h"}` (optional; default: the old secret stops now). */
export async function rotateWebhookSecret(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  supported(deps);
  noQuery(input.search);
  const body = await readJsonBody(ctx.request, undefined, { optional: true });
  onlyMembers(body, ['expire_old_in']);
  let expireOldInMs = 0;
  if (body.expire_old_in !== undefined) {
    const ms = typeof body.expire_old_in === 'string' ? parseDurationMs(body.expire_old_in) : undefined;
    if (ms === undefined || ms < 0 || ms > MAX_EXPIRE_OLD_IN_MS) throw invalid('expire_old_in', 'expire_old_in must be a duration such as 30s, 15m, 24h or 7d, at most 366d.');
    expireOldInMs = ms;
  }
  const merchantId = input.merchant!.id;
  const id = input.params.id!;
  const rotated = await deps.storage(ctx).rotateWebhookSecret(merchantId, id, expireOldInMs, merchantChange(ctx, input));
  if (rotated === undefined) throw ENDPOINT_NOT_FOUND;
  deps.logger.info({ event: 'webhook_secret_rotated', request_id: ctx.requestId, merchant_id: merchantId, endpoint_id: id, old_expires_at: rotated.oldExpiresAt }, 'webhook secret rotated');
  return ok(200, [{ id, secret: rotated.secret, old_secret_expires_at: rotated.oldExpiresAt }]);
}

/** `POST /merchant/webhooks/{id}/test`: 202, a `webhook.test` event queued for the endpoint; its id. Takes no body. */
export async function testWebhook(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  supported(deps);
  noQuery(input.search);
  const merchantId = input.merchant!.id;
  const id = input.params.id!;
  const eventId = await deps.storage(ctx).sendWebhookTest(merchantId, id);
  if (eventId === undefined) throw ENDPOINT_NOT_FOUND;
  deps.logger.info({ event: 'webhook_test_queued', request_id: ctx.requestId, merchant_id: merchantId, endpoint_id: id, event_id: eventId }, 'webhook test queued');
  return ok(202, [{ event_id: eventId, endpoint_id: id }]);
}
