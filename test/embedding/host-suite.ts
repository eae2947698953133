/**
 * What every embedding recipe of docs/embedding.md must give, checked
 * through a real server of the host framework: a signed call whose
 * signature covers the mount prefix, a page whose `Link` carries it and
 * can be followed, and a 429 once one address has sent too many wrong keys
 * (which needs the client address the recipe passes). Served from
 * examples/seed.json: merchant `demo-merchant`, key `demo-secret`.
 */
import { expect, it } from 'vitest';
import { basic as basicAuth } from '../support/basic-auth.js';
import { signedUrl } from '../support/test-signer.js';

export const PREFIX = '/api/merchant';
const MERCHANT = 'demo-merchant';
const KEY = 'demo-secret';
/** AUTH_FAILURES_PER_MERCHANT's default: the 11th wrong key from one address is refused. */
const PAIR_FAILURES = 10;

export interface Host {
  /** The public origin merchants call, e.g. http://127.0.0.1:41234. */
  origin(): string;
  /** Sends a request to the host, by absolute URL. */
  send(url: string, init?: RequestInit): Promise<Response>;
  /** What the host printed, when it is a process of its own. */
  output?(): string;
}

const basic = (key: string) => basicAuth(MERCHANT, key);

export function embeddingSuite(host: Host): void {
  it('answers a call signed over the public URL with the prefix, and refuses one signed without it', async () => {
    const signed = await host.send(signedUrl({ secret: KEY, url: `${host.origin()}${PREFIX}/validatesignature`, cp: MERCHANT }));
    const body = await signed.text();
    expect(signed.status, body).toBe(200);
    expect(JSON.parse(body)).toEqual({ status: 'ok', is_valid: true });
    // The same call signed as if the API were at the root: what a lost prefix would have accepted.
    const unprefixed = new URL(signedUrl({ secret: KEY, url: `${host.origin()}/validatesignature`, cp: MERCHANT }));
    const refused = await host.send(`${host.origin()}${PREFIX}/validatesignature${unprefixed.search}`);
    expect(refused.status).toBe(400);
    expect(JSON.stringify(await refused.json())).toContain('Signature does not match.');
  });

  it('gives a page whose Link carries the prefix and leads to the next page', async () => {
    const first = await host.send(`${host.origin()}${PREFIX}/merchant/users?limit=5`, { headers: basic(KEY) });
    expect(first.status).toBe(200);
    const page = (await first.json()) as { data: { shared_user_id: string }[] };
    expect(page.data).toHaveLength(5);
    const link = /^<([^>]+)>; rel="next"$/.exec(first.headers.get('link') ?? '');
    expect(link?.[1]).toMatch(new RegExp(`^${host.origin().replace(/[.:/]/g, '\\$&')}${PREFIX}/merchant/users\\?`));
    const next = await host.send(link![1]!, { headers: basic(KEY) });
    expect(next.status).toBe(200);
    const rest = (await next.json()) as { data: { shared_user_id: string }[] };
    expect(rest.data.length).toBeGreaterThan(0);
    expect(rest.data.map((user) => user.shared_user_id)).not.toContain(page.data[0]!.shared_user_id);
  });

  it('refuses one address with 429 after too many wrong keys, and never warns of a missing client address', async () => {
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (let i = 0; i <= PAIR_FAILURES; i++) {
      const response = await host.send(`${host.origin()}${PREFIX}/merchant/users?limit=1`, { headers: basic(`wrong-key-${i}`) });
      statuses.push(response.status);
      retryAfter = response.headers.get('retry-after');
      await response.body?.cancel();
    }
    expect(statuses).toEqual([...Array<number>(PAIR_FAILURES).fill(401), 429]);
    expect(Number(retryAfter)).toBeGreaterThan(0);
    if (host.output) expect(host.output()).not.toContain('throttle_no_client_address');
  });
}
