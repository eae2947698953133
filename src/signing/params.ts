/** Query parameters as the signing helpers take them, and their pairs in order. */

/** Query parameters: pairs in request order (keys may repeat), or a record. */
export type SigningParams =
  | Iterable<readonly [string, string]>
  | Record<string, string | number | readonly (string | number)[]>;

/** The pairs of `params` in order: pairs as given, a record's values (arrays repeat the key) as strings. */
export function* toPairs(params: SigningParams): Iterable<readonly [string, string]> {
  if (Symbol.iterator in params) {
    yield* params as Iterable<readonly [string, string]>;
    return;
  }
  for (const [key, value] of Object.entries(params)) {
    if (Array.isArray(value)) for (const v of value) yield [key, String(v)];
    else yield [key, String(value)];
  }
}
