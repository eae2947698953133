/**
 * Reads the JSON body of a request that changes something (the merchant's webhook endpoints):
 * `Content-Type: application/json` or 415, at most `maxBytes` or 413 (counted as the body
 * arrives, so a larger body is never held whole), JSON that parses to an object or 400. Every
 * refusal is a `MerchantApiError`, answered in the envelope like any other error.
 */
import { MerchantApiError } from '../errors.js';

/** The largest body the webhook endpoints read: a URL and a list of event types fit many times over. */
export const MAX_JSON_BODY_BYTES = 16 * 1024;

const NOT_JSON = new MerchantApiError('unsupported_media_type', 'The body must be JSON, sent with Content-Type: application/json.');

/** Reads and parses the body of `request` as a JSON object. */
export async function readJsonBody(request: Request, maxBytes: number = MAX_JSON_BODY_BYTES, options: { optional?: boolean } = {}): Promise<Record<string, unknown>> {
  const type = request.headers.get('content-type');
  if (type === null && options.optional) {
    // A body that may be left out: none at all reads as `{}`; one sent without its type is still a 415.
    if ((await readCapped(request, maxBytes)) === '') return {};
    throw NOT_JSON;
  }
  // The media type without its parameters (`; charset=utf-8`), case-insensitive (RFC 9110 §8.3.1).
  if (type === null || type.split(';')[0]!.trim().toLowerCase() !== 'application/json') throw NOT_JSON;
  const text = await readCapped(request, maxBytes);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new MerchantApiError('malformed_request', 'The body is not valid JSON.');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new MerchantApiError('malformed_request', 'The body must be a JSON object.');
  return value as Record<string, unknown>;
}

function tooLarge(maxBytes: number): MerchantApiError {
  return new MerchantApiError('payload_too_large', `The body is larger than ${maxBytes} bytes.`);
}

/** The body as UTF-8 text, refused once more than `maxBytes` arrived (or announced by Content-Length). */
async function readCapped(request: Request, maxBytes: number): Promise<string> {
  const announced = Number(request.headers.get('content-length') ?? '0');
  if (announced > maxBytes) throw tooLarge(maxBytes);
  if (request.body === null) return '';
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    received += value.byteLength;
    if (received > maxBytes) {
      void reader.cancel().catch(() => undefined);
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  const whole = new Uint8Array(received);
  let at = 0;
  for (const chunk of chunks) {
    whole.set(chunk, at);
    at += chunk.byteLength;
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(whole);
  } catch {
    throw new MerchantApiError('malformed_request', 'The body is not valid UTF-8.');
  }
}
