/**
 * Small builders of OpenAPI fragments (references, headers, responses,
 * query parameters), shared by the operations in src/routes/ and by the
 * parts every route has in common.
 */
import { MAX_QUERY_PAIRS } from '../http/query.js';
import type { Json } from './operation.js';

export const ref = (kind: 'schemas' | 'headers' | 'parameters' | 'responses', name: string) => ({ $ref: `#/components/${kind}/${name}` });
export const schemaRef = (name: string) => ref('schemas', name);
const jsonContent = (schema: Json) => ({ 'application/json': { schema } });
export const header = (description: string, schema: Json, required = false) => ({ description, ...(required ? { required } : {}), schema });

/** The end of the 400 description of every operation that reads the query string. */
export const MALFORMED_QUERY = `a malformed query string (bad percent-encoding, invalid UTF-8, a NUL, more than ${MAX_QUERY_PAIRS} parameters).`;

/**
 * A response of the handler, with a JSON body. `headers` are names of
 * `components.headers` (`Cache-Control` and `X-Request-Id` always among
 * them), `inline` headers of this response only.
 */
export function response(description: string, schema: Json, headers: readonly string[] = [], inline: Json = {}): Json {
  return { description, headers: { ...headerRefs(['Cache-Control', 'X-Request-Id', ...headers]), ...inline }, content: jsonContent(schema) };
}

/** A response only a runtime adapter gives, before the handler runs: no `X-Request-Id`. */
export function adapterResponse(description: string, schema: Json): Json {
  return { description, headers: headerRefs(['Cache-Control']), content: jsonContent(schema) };
}

function headerRefs(names: readonly string[]): Json {
  return Object.fromEntries(names.map((name) => [name, ref('headers', name)]));
}

export function queryParameter(name: string, description: string, schema: Json, required = false): Json {
  return { name, in: 'query', description, ...(required ? { required } : {}), schema };
}
