/**
 * Whether the suites run in CI, where a suite whose service is missing fails
 * instead of skipping. CI systems set `CI` to different values (`true`, `1`,
 * the system's name): any value counts, except empty, `false` and `0`.
 */
export function inCi(): boolean {
  return !['', 'false', '0'].includes((process.env.CI ?? '').trim().toLowerCase());
}
