/**
 * For the few tests whose upper time bound is the behaviour itself (a
 * deadline must cut a request, an abort must end a wait): `promise` as it
 * settles, or a rejection naming `what` once `ms` have passed. Take `ms`
 * generous against the deadline under test (10x or more), so that a loaded
 * machine does not fail it, and well under what the broken behaviour takes
 * (never answering, or a wait of its own), so that the test still fails
 * when the behaviour breaks. Speed itself belongs in benchmarks.
 */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not settled within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
