/** A delivery row of `webhook_deliveries` with its event's type, as every delivery listing on MySQL reads it (`deliveries.ts`, `endpoints.ts`). */
import { sql } from 'kysely';
import type { DeliveryState, WebhookDelivery } from '../../webhook-deliveries.js';

const CANONICAL = '%Y-%m-%dT%H:%i:%s.%f+00:00';

export interface DeliveryRow {
  id: string | number;
  event_id: string;
  endpoint_id: string;
  merchant_id: string;
  type: string;
  state: DeliveryState;
  attempts: number | string;
  next_at: string | null;
  last_at: string | null;
  last_status: number | string | null;
  last_error: string | null;
  created: string;
}

/** The columns of a `DeliveryRow`, `d` the delivery and `e` its event. */
export const deliveryColumns = sql`d.id, d.event_id, d.endpoint_id, d.merchant_id, e.type, d.state, d.attempts,
  CASE WHEN d.state = 'pending' THEN DATE_FORMAT(d.next_attempt_at, ${CANONICAL}) END AS next_at,
  DATE_FORMAT(d.last_attempt_at, ${CANONICAL}) AS last_at, d.last_status, d.last_error, DATE_FORMAT(d.created_at, ${CANONICAL}) AS created`;

export function deliveryOf(row: DeliveryRow): WebhookDelivery {
  return {
    id: String(row.id),
    eventId: row.event_id,
    endpointId: row.endpoint_id,
    merchantId: row.merchant_id,
    type: row.type,
    state: row.state,
    attempts: Number(row.attempts),
    nextAttemptAt: row.next_at,
    lastAttemptAt: row.last_at,
    lastStatus: row.last_status === null ? null : Number(row.last_status),
    lastError: row.last_error,
    createdAt: row.created,
  };
}

