/**
 * (3) The same logic as a Hono app on `@hono/node-server`: what most teams
 * would build instead (hono is a dev dependency, for this comparison only).
 * Hono's own `basicAuth` middleware, `c.req.query()`, `c.json()`.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { basicAuth } from 'hono/basic-auth';
import { CompactEncrypt } from 'jose';
import { announce, CURSOR_SECRET, exitOnSignal, makeUsers, MERCHANT_ID, MERCHANT_KEY, portFromEnv, PUBLIC_URL, TIMESTAMP_TOLERANCE } from './data.mjs';

const merchants = new Map([[MERCHANT_ID, { id: MERCHANT_ID, status: 'active', keys: [MERCHANT_KEY] }]]);
const users = makeUsers();
const usersById = new Map(users.map((u) => [u.shared_user_id, u]));
const salts = new Map();
const cursorKey = new Uint8Array(createHash('sha256').update(CURSOR_SECRET).digest());

const pct = (s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const error = (c, status, message) => c.json(message === undefined ? { status: 'error', is_valid: false } : { status: 'error', message, is_valid: false }, status);

const app = new Hono();
app.use('*', async (c, next) => {
  await next();
  c.header('cache-control', 'no-store');
});

app.get('/validatesignature', (c) => {
  const url = new URL(c.req.url);
  const query = c.req.query();
  const missing = ['salt', 'cp', 'ts', 'hmac'].filter((name) => !query[name]);
  if (missing.length) return error(c, 400, `Missing required parameter: ${missing.join(', ')}.`);
  const merchant = merchants.get(query.cp);
  if (!merchant) return error(c, 404);
  const encoded = [...url.searchParams]
    .filter(([k]) => k !== 'hmac' && k !== 'gettoken')
    .map(([k, v]) => [pct(k), pct(v)])
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  const message = `GET&${pct(PUBLIC_URL + url.pathname)}&${pct(encoded.map(([k, v]) => `${k}=${v}`).join('&'))}`;
  const received = Buffer.from(query.hmac.toLowerCase());
  const ok = merchant.keys.some((key) => {
    const expected = Buffer.from(createHmac('sha224', key).update(message).digest('hex'));
    return expected.length === received.length && timingSafeEqual(expected, received);
  });
  if (!ok) return error(c, 400, 'Signature does not match.');
  const ts = Number(query.ts);
  if (!Number.isInteger(ts) || Math.abs(Date.now() / 1000 - ts) > TIMESTAMP_TOLERANCE) return error(c, 400, 'Invalid timestamp.');
  const saltKey = `${merchant.id}:${query.salt}`;
  if (salts.has(saltKey)) return error(c, 400, 'This salt was already used.');
  salts.set(saltKey, ts + TIMESTAMP_TOLERANCE);
  return c.json({ status: 'ok', is_valid: true });
});

const auth = basicAuth({
  realm: 'merchant',
  verifyUser: (id, key, c) => {
    const merchant = merchants.get(id);
    if (!merchant) return false;
    const given = createHash('sha256').update(key).digest();
    const ok = merchant.keys.some((k) => timingSafeEqual(createHash('sha256').update(k).digest(), given));
    if (ok) c.set('merchant', merchant);
    return ok;
  },
});

app.get('/merchant/users', auth, async (c) => {
  const merchant = c.get('merchant');
  const limit = Number(c.req.query('limit') ?? 100);
  const page = users.slice(0, limit + 1);
  const more = page.length > limit;
  if (more) page.length = limit;
  let cursor = null;
  if (more) {
    const payload = { v: 1, m: merchant.id, f: [null, null, null], a: page.at(-1).shared_user_id, l: limit };
    cursor = await new CompactEncrypt(new TextEncoder().encode(JSON.stringify(payload))).setProtectedHeader({ alg: 'dir', enc: 'A256GCM' }).encrypt(cursorKey);
    c.header('link', `<${PUBLIC_URL}/merchant/users?limit=${limit}&cursor=${cursor}>; rel="next"`);
  }
  return c.json({ status: 'ok', data: page, next_cursor: cursor, errors: [] });
});

app.get('/merchant/users/:id', auth, (c) => {
  const user = usersById.get(c.req.param('id'));
  if (!user) return c.json({ status: 'error', data: [], errors: [{ code: 'not_found', message: 'No such user.' }] }, 404);
  return c.json({ status: 'ok', data: [user], errors: [] });
});

const server = serve({ fetch: app.fetch, port: portFromEnv(), hostname: '127.0.0.1' }, (info) => announce(info.port));
exitOnSignal(() => new Promise((resolve) => server.close(resolve) && server.closeAllConnections?.()));
