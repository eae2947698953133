/**
 * The fields every limit's 429 carries: `Retry-After`, and the IETF
 * `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers)
 * saying which policy was passed and that nothing is left until it resets.
 * A policy without a time window (a count held at once) has no `w`.
 */
export function rateLimitFields(policy: string, quota: number, retryAfter: number, window?: number): Record<string, string> {
  return {
    'retry-after': String(retryAfter),
    'ratelimit-policy': window === undefined ? `"${policy}";q=${quota}` : `"${policy}";q=${quota};w=${window}`,
    ratelimit: `"${policy}";r=0;t=${retryAfter}`,
  };
}
