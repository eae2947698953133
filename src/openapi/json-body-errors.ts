/**
 * The answers every operation that reads a JSON body shares
 * (src/http/json-body.ts): one wording, so the document says the same of each.
 */
import { MAX_JSON_BODY_BYTES } from '../http/json-body.js';
import { envelopeError } from './error-codes.js';
import { response } from './fragments.js';

export const JSON_BODY_ERRORS = {
  '413': response(`The body is larger than ${MAX_JSON_BODY_BYTES} bytes.`, envelopeError(['payload_too_large'])),
  '415': response('The body is not sent as `Content-Type: application/json`.', envelopeError(['unsupported_media_type'])),
};
