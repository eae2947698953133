/**
 * The test simulator (docs/test-mode.md#the-simulator): what one event, or a scenario, does to a
 * merchant's test dataset, as an import would do it to live data: the changes to store and the
 * events they are, each stamped after everything the dataset holds, so that the change feed and
 * `updated_since` list them in order. Pure: the route stores the changes.
 */
import { randomBytes } from 'node:crypto';
import { MerchantApiError } from '../errors.js';
import { MAX_ID_LENGTH, type ChangedUserRecord, type UserRecord } from '../storage/contract.js';
import type { TestChange } from '../storage/test-changes.js';
import { unsharedEventData, userEventData } from '../storage/webhook-outbox.js';
import { formatEpochSeconds } from '../storage/timestamps.js';
import { unsharedEventBody, userEventBody } from '../webhooks/events.js';
import { generateTestUsers } from './dataset.js';
import type { TestDataset } from './test-storage.js';

export const SIMULATED_EVENT_TYPES = ['user.shared', 'user.updated', 'user.deactivated', 'user.unshared'] as const;
export type SimulatedEventType = (typeof SIMULATED_EVENT_TYPES)[number];

/** The scenarios one call runs, each a list of event types applied to one user in order. */
export const SCENARIOS = { churn: ['user.shared', 'user.updated', 'user.updated', 'user.deactivated', 'user.unshared'] } as const satisfies Record<string, readonly SimulatedEventType[]>;
export type ScenarioName = keyof typeof SCENARIOS;

/** What the simulator asks to be done: one event, or a scenario. */
export type Simulation = { type: SimulatedEventType; sharedUserId?: string } | { scenario: ScenarioName };

/** One event as the simulator made it: the change to store and the event's body (as a webhook sends it). */
export interface SimulatedEvent {
  change: TestChange;
  type: SimulatedEventType;
  /** `{"type","timestamp","data"}`, as docs/webhooks.md#events writes every event. */
  body: string;
  /** The body's `data`, JSON text: what the webhook sends (`TestWebhookEvent`), byte for byte the body's. */
  data: string;
}

/**
 * The events `simulation` makes of `dataset` at `nowMs`, in order. Refuses, naming the problem: an
 * unknown user (404 `not_found`), a share of a user already shared or a deactivation of one already
 * deactivated (409 `conflict`).
 */
export function simulate(merchantId: string, users: number, dataset: TestDataset, simulation: Simulation, nowMs: number): SimulatedEvent[] {
  const records = new Map(dataset.records);
  let latest = dataset.latest;
  const stamp = (): string => {
    const wall = formatEpochSeconds(Math.floor(nowMs / 1000), String((nowMs % 1000) * 1000).padStart(6, '0'));
    latest = wall > latest ? wall : nextMicrosecond(latest);
    return latest;
  };
  const steps: { type: SimulatedEventType; id?: string }[] = 'scenario' in simulation ? [] : [{ type: simulation.type, id: simulation.sharedUserId }];
  if ('scenario' in simulation) {
    // One new user goes through every step: a receiver sees the whole life of one share.
    const id = newUserId();
    for (const type of SCENARIOS[simulation.scenario]) steps.push({ type, id });
  }
  const events: SimulatedEvent[] = [];
  for (const step of steps) {
    const event = apply(merchantId, users, records, step.type, step.id, stamp);
    events.push(event);
    if (event.change.record === null) records.delete(event.change.shared_user_id);
    else records.set(event.change.shared_user_id, { ...event.change.record, updated_at: event.change.at });
  }
  return events;
}

function apply(merchantId: string, users: number, records: Map<string, ChangedUserRecord>, type: SimulatedEventType, id: string | undefined, stamp: () => string): SimulatedEvent {
  if (type === 'user.shared') {
    const sharedId = id ?? newUserId();
    if (records.has(sharedId)) throw new MerchantApiError('conflict', `The test user ${JSON.stringify(sharedId)} is shared already; user.unshared removes it first.`);
    const at = stamp();
    const record = { ...(generatedRecord(merchantId, users, sharedId) ?? newRecord(merchantId, sharedId, at)) };
    return event(type, sharedId, record, at);
  }
  const held = id === undefined ? pick(records, type) : records.get(id);
  if (held === undefined) {
    if (id === undefined) throw new MerchantApiError('conflict', `The test dataset has no user to send ${type} for; POST /merchant/test/reset restores it.`);
    throw new MerchantApiError('not_found', `The test dataset has no user ${JSON.stringify(id)}.`);
  }
  const { updated_at: _, ...record } = held;
  const at = stamp();
  if (type === 'user.unshared') {
    return { type, change: { shared_user_id: record.shared_user_id, record: null, at }, body: unsharedEventBody(at, record.shared_user_id, at), data: unsharedEventData(record.shared_user_id, at) };
  }
  if (type === 'user.deactivated') {
    if (record.deactivated_at !== null) throw new MerchantApiError('conflict', `The test user ${JSON.stringify(record.shared_user_id)} is deactivated already.`);
    return event(type, record.shared_user_id, { ...record, deactivated_at: at }, at);
  }
  return event(type, record.shared_user_id, updatedRecord(record), at);
}

function event(type: Exclude<SimulatedEventType, 'user.unshared'>, id: string, record: UserRecord, at: string): SimulatedEvent {
  return { type, change: { shared_user_id: id, record, at }, body: userEventBody(type, at, { ...record, updated_at: at }), data: userEventData({ ...record, updated_at: at }) };
}

/** A user the event may act on when none is named: the first by id, active for a deactivation. */
function pick(records: Map<string, ChangedUserRecord>, type: SimulatedEventType): ChangedUserRecord | undefined {
  let found: ChangedUserRecord | undefined;
  for (const record of records.values()) {
    if (type === 'user.deactivated' && record.deactivated_at !== null) continue;
    if (found === undefined || record.shared_user_id < found.shared_user_id) found = record;
  }
  return found;
}

/** The generated record of `id` when it is one of the generated users (shared again after an unshare). */
function generatedRecord(merchantId: string, users: number, id: string): UserRecord | undefined {
  const match = /^test_user_(\d{5})$/.exec(id);
  const index = match === null ? -1 : Number(match[1]) - 1;
  if (index < 0 || index >= users) return undefined;
  const { updated_at: _, ...record } = generateTestUsers(merchantId, index + 1)[index]!;
  return record;
}

/** A user that joins now: a generated record's fields, under its own id, email and dates. */
function newRecord(merchantId: string, id: string, at: string): UserRecord {
  const { updated_at: _, ...base } = generateTestUsers(merchantId, 1)[0]!;
  return { ...base, shared_user_id: id, email_address: `${id.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 60)}@example.com`, state: 'Test', date_joined: at, agreed_to_terms_and_conditions: at, agreed_to_marketing: null, deactivated_at: null };
}

/** The record after an update: the house number after the one it had, so every update changes the record. */
function updatedRecord(record: UserRecord): UserRecord {
  const match = /^(.*?)(\d+)$/.exec(record.street);
  const street = match === null ? `${record.street} 1` : `${match[1]}${Number(match[2]) + 1}`;
  return { ...record, street: street.slice(0, 255) };
}

function newUserId(): string {
  return `test_user_${randomBytes(6).toString('hex')}`;
}

/** The stamp one microsecond after `stamp` (canonical). */
function nextMicrosecond(stamp: string): string {
  const micros = Number(stamp.slice(20, 26)) + 1;
  if (micros < 1_000_000) return `${stamp.slice(0, 20)}${String(micros).padStart(6, '0')}${stamp.slice(26)}`;
  return formatEpochSeconds(Date.parse(`${stamp.slice(0, 19)}Z`) / 1000 + 1);
}

/** Checks a `shared_user_id` the simulator was given, as every id is checked: 1-128 characters, no control character. */
export function sharedUserIdProblem(id: string): string | undefined {
  if (id.length === 0 || id.length > MAX_ID_LENGTH) return `shared_user_id must be 1-${MAX_ID_LENGTH} characters`;
  if (/[\u0000-\u001f\u007f-\u009f]/.test(id)) return 'shared_user_id must not hold a control character';
  return undefined;
}
