/**
 * The test simulator (docs/test-mode.md#the-simulator): `POST /merchant/test/events` changes the
 * merchant's test dataset as an import changes live data (one event, or a scenario), and
 * `POST /merchant/test/reset` restores the generated dataset. Test keys only: a live key is 403
 * `test_key_required`, so no call here can touch live data.
 */
import { MerchantApiError } from '../errors.js';
import type { RequestContext } from '../http/context.js';
import { readJsonBody } from '../http/json-body.js';
import { parseQuery } from '../http/query.js';
import { reply, type Reply } from '../http/responses.js';
import { printable } from '../listing/printable.js';
import { envelopeError } from '../openapi/error-codes.js';
import { MALFORMED_QUERY, response } from '../openapi/fragments.js';
import { JSON_BODY_ERRORS } from '../openapi/json-body-errors.js';
import type { Json, OperationDoc } from '../openapi/operation.js';
import { TEST_KEY_REQUIRED } from '../testmode/mode-check.js';
import { SCENARIOS, SIMULATED_EVENT_TYPES, sharedUserIdProblem, simulate, type ScenarioName, type Simulation, type SimulatedEventType } from '../testmode/simulator.js';
import type { HandlerDeps, RouteInput } from './route.js';

/** `POST /merchant/test/events`: the events made, in order, as webhook bodies. */
export async function simulateTestEvents(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  testKeyOnly(ctx);
  noQuery(input.search);
  const simulation = simulationOf(await readJsonBody(ctx.request));
  const merchantId = input.merchant!.id;
  const { datasets } = deps.testMode;
  const events = await deps.testMode.guarded(ctx, async () => {
    const made = simulate(merchantId, deps.testMode.users, await datasets.of(merchantId), simulation, deps.now());
    // With their webhook events: the storage queues them for the merchant's test endpoints only (docs/test-mode.md#webhooks).
    await datasets.changes.record(
      merchantId,
      made.map((event) => event.change),
      made.map((event) => ({ type: event.type, timestamp: event.change.at, data: event.data })),
    );
    return made;
  });
  deps.logger.info({ event: 'test_events_simulated', request_id: ctx.requestId, merchant_id: merchantId, types: events.map((event) => event.type) }, 'test events simulated');
  return reply(200, `{"status":"ok","data":[${events.map((event) => event.body).join(',')}],"errors":[]}`);
}

/** `POST /merchant/test/reset`: 204, the test dataset generated again. */
export async function resetTestData(ctx: RequestContext, input: RouteInput, deps: HandlerDeps): Promise<Reply> {
  testKeyOnly(ctx);
  noQuery(input.search);
  const merchantId = input.merchant!.id;
  await deps.testMode.guarded(ctx, () => deps.testMode.datasets.changes.reset(merchantId));
  deps.logger.info({ event: 'test_data_reset', request_id: ctx.requestId, merchant_id: merchantId }, 'test dataset reset');
  return reply(204, '');
}

function testKeyOnly(ctx: RequestContext): void {
  if (ctx.mode !== 'test') throw TEST_KEY_REQUIRED;
}

function noQuery(search: string): void {
  const pairs = parseQuery(search);
  if (pairs.length === 0) return;
  const details = pairs.map(([key]) => ({ code: 'unknown_parameter' as const, message: `Unknown parameter: ${printable(key)}. This endpoint takes none.`, param: key }));
  throw new MerchantApiError('unknown_parameter', details[0]!.message, { details });
}

/** The body as a simulation, or the problem naming the member. */
function simulationOf(body: Record<string, unknown>): Simulation {
  const known = 'scenario' in body ? ['scenario'] : ['type', 'shared_user_id'];
  const unknown = Object.keys(body).filter((key) => !known.includes(key));
  if (unknown.length > 0) {
    const details = unknown.map((key) => ({ code: 'unknown_parameter' as const, message: `Unknown member of the body: ${printable(key)}. It takes ${known.join(', ')}.`, param: key }));
    throw new MerchantApiError('unknown_parameter', details[0]!.message, { details });
  }
  if ('scenario' in body) {
    if (typeof body.scenario !== 'string' || !Object.hasOwn(SCENARIOS, body.scenario)) throw invalid('scenario', `scenario must be one of ${Object.keys(SCENARIOS).join(', ')}.`);
    return { scenario: body.scenario as ScenarioName };
  }
  if (typeof body.type !== 'string' || !(SIMULATED_EVENT_TYPES as readonly string[]).includes(body.type)) throw invalid('type', `type must be one of ${SIMULATED_EVENT_TYPES.join(', ')} (or give a scenario).`);
  const id = body.shared_user_id;
  if (id !== undefined) {
    const problem = typeof id === 'string' ? sharedUserIdProblem(id) : 'shared_user_id must be a string';
    if (problem !== undefined) throw invalid('shared_user_id', `${problem}.`);
  }
  return { type: body.type as SimulatedEventType, ...(typeof id === 'string' && { sharedUserId: id }) };
}

function invalid(param: string, message: string): MerchantApiError {
  return new MerchantApiError('invalid_parameter', message, { param });
}

const eventSchema: Json = {
  type: 'object',
  required: ['type', 'timestamp', 'data'],
  properties: { type: { type: 'string', enum: [...SIMULATED_EVENT_TYPES] }, timestamp: { type: 'string' }, data: { type: 'object' } },
};
const testKeyRequired = response(
  'The merchant is disabled (its key is right), the key lacks the scope `users:read` (`insufficient_scope`, the message names it) or may not be used from this address (`address_not_allowed`); ' +
    'a live key: the simulator changes test datasets only (`test_key_required`); or test mode is off (`test_mode_disabled`).',
  envelopeError(['merchant_disabled', 'insufficient_scope', 'address_not_allowed', 'test_key_required', 'test_mode_disabled']),
);

export const simulateTestEventsDoc: OperationDoc = {
  tag: 'Test mode',
  description:
    "Test keys only. Changes the merchant's test dataset as an import changes live data, and answers the events made, in order, each as a webhook " +
    'would send it (`{"type","timestamp","data"}`). `{"type": "user.shared" | "user.updated" | "user.deactivated" | "user.unshared", "shared_user_id"?}`: one event ' +
    '(without `shared_user_id`: a new user for `user.shared`, else the first user by id it applies to); `{"scenario": "churn"}`: a new user shared, updated twice, ' +
    'deactivated and unshared. The changes show at once in the listing, `updated_since` and the change feed of the test key (docs/test-mode.md#the-simulator), ' +
    "and the events are delivered, signed, to the merchant's test endpoints (added with a test key) and to no live endpoint (docs/test-mode.md#webhooks).",
  readsQuery: true,
  requestBody: {
    required: true,
    content: {
      'application/json': {
        schema: {
          oneOf: [
            { type: 'object', additionalProperties: false, required: ['type'], properties: { type: { type: 'string', enum: [...SIMULATED_EVENT_TYPES] }, shared_user_id: { type: 'string', minLength: 1, maxLength: 128 } } },
            { type: 'object', additionalProperties: false, required: ['scenario'], properties: { scenario: { type: 'string', enum: Object.keys(SCENARIOS) } } },
          ],
        },
      },
    },
  },
  badRequest: `A body that is not one event or one scenario (\`invalid_parameter\` naming the member, \`unknown_parameter\` per unknown member), a query parameter, or ${MALFORMED_QUERY}`,
  badRequestCodes: ['malformed_request', 'unknown_parameter', 'invalid_parameter'],
  responses: {
    '200': response('The events made, in order.', {
      type: 'object',
      required: ['status', 'data', 'errors'],
      properties: { status: { const: 'ok' }, data: { type: 'array', items: eventSchema }, errors: { type: 'array', maxItems: 0 } },
    }),
    '403': testKeyRequired,
    '404': response('`shared_user_id` names no user of the test dataset.', envelopeError(['not_found'])),
    ...JSON_BODY_ERRORS,
    '409': response('A share of a user shared already, a deactivation of one deactivated already, or a test dataset holding changes to 1000 users (reset it).', envelopeError(['conflict'])),
  },
};

export const resetTestDataDoc: OperationDoc = {
  tag: 'Test mode',
  description: "Test keys only. Forgets every change the simulator made: the merchant's test dataset is the generated one again. Reads no body.",
  readsQuery: true,
  parameters: [],
  badRequest: `A query parameter (it takes none), or ${MALFORMED_QUERY}`,
  badRequestCodes: ['unknown_parameter', 'malformed_request'],
  responses: {
    '204': { description: 'Restored.' },
    '403': testKeyRequired,
  },
};
