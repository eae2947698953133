/**
 * (1) The plain peer: the server a team writes in a few dozen lines of
 * `node:http` doing what merchant-api does for the bench cases. `new URL` +
 * `URLSearchParams`, HMAC-SHA224 over the signing message with
 * `node:crypto`, a `ts` window, salts in a `Map` pruned once a second, Basic
 * authentication for the users twin, page cursors sealed with jose like ours,
 * JSON answers with `content-type` and `content-length`, and one JSON access
 * line per request (the fields of merchant-api's) written with
 * `process.stdout.write`: standard output is a file here (bench/servers.ts),
 * so each line is one synchronous write, as a deployed server's would be.
 * Far fewer checks than the real handler (no strict decoding, no storage
 * timeout, no limits). `npm run bench` prints merchant-api's ratio to this
 * server first. BENCH_ACCESS_LOG=off leaves the line out.
 */
import { createHash, createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import { CompactEncrypt } from 'jose';
import { announce, CURSOR_SECRET, exitOnSignal, makeUsers, MERCHANT_ID, MERCHANT_KEY, portFromEnv, PUBLIC_URL, TIMESTAMP_TOLERANCE } from './data.mjs';

const merchants = new Map([[MERCHANT_ID, { id: MERCHANT_ID, status: 'active', keys: [MERCHANT_KEY] }]]);
const users = makeUsers();
const usersById = new Map(users.map((u) => [u.shared_user_id, u]));
const cursorKey = new Uint8Array(createHash('sha256').update(CURSOR_SECRET).digest());

/** Used salts, each with the second after which its `ts` is outside the window and it can go. */
const salts = new Map();
setInterval(() => {
  const now = Date.now() / 1000;
  for (const [key, expires] of salts) if (expires < now) salts.delete(key);
}, 1000).unref();

const accessLog = globalThis.process?.env?.BENCH_ACCESS_LOG !== 'off';

const pct = (s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** The answer, then its access line. */
function send(req, res, status, body, extra) {
  const text = JSON.stringify(body);
  const length = Buffer.byteLength(text);
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', 'content-length': length, 'x-request-id': res.requestId, ...extra });
  res.end(text);
  if (!accessLog) return;
  const line = {
    time: new Date().toISOString(),
    level: 'info',
    event: 'request',
    request_id: res.requestId,
    method: req.method,
    route: res.route,
    status,
    duration_ms: Math.round((performance.now() - res.started) * 1000) / 1000,
    bytes: length,
    client_address: req.socket.remoteAddress,
  };
  if (res.merchantId !== undefined) line.merchant_id = res.merchantId;
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

function validateSignature(url, req, res) {
  const get = (name) => url.searchParams.get(name);
  const missing = ['salt', 'cp', 'ts', 'hmac'].filter((name) => !get(name));
  if (missing.length) return send(req, res, 400, { status: 'error', message: `Missing required parameter: ${missing.join(', ')}.`, is_valid: false });
  const merchant = merchants.get(get('cp'));
  if (!merchant) return send(req, res, 404, { status: 'error', is_valid: false });
  const encoded = [...url.searchParams]
    .filter(([k]) => k !== 'hmac' && k !== 'gettoken')
    .map(([k, v]) => [pct(k), pct(v)])
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  const message = `GET&${pct(PUBLIC_URL + url.pathname)}&${pct(encoded.map(([k, v]) => `${k}=${v}`).join('&'))}`;
  const received = Buffer.from(get('hmac').toLowerCase());
  const ok = merchant.keys.some((key) => {
    const expected = Buffer.from(createHmac('sha224', key).update(message).digest('hex'));
    return expected.length === received.length && timingSafeEqual(expected, received);
  });
  if (!ok) return send(req, res, 400, { status: 'error', message: 'Signature does not match.', is_valid: false });
  const ts = Number(get('ts'));
  if (!Number.isInteger(ts) || Math.abs(Date.now() / 1000 - ts) > TIMESTAMP_TOLERANCE) {
    return send(req, res, 400, { status: 'error', message: 'Invalid timestamp.', is_valid: false });
  }
  const saltKey = `${merchant.id}:${get('salt')}`;
  if (salts.has(saltKey)) return send(req, res, 400, { status: 'error', message: 'This salt was already used.', is_valid: false });
  salts.set(saltKey, ts + TIMESTAMP_TOLERANCE);
  res.merchantId = merchant.id;
  send(req, res, 200, { status: 'ok', is_valid: true });
}

function authenticate(req) {
  const header = req.headers.authorization ?? '';
  if (!header.startsWith('Basic ')) return undefined;
  const [id, ...rest] = Buffer.from(header.slice(6), 'base64').toString('utf8').split(':');
  const merchant = merchants.get(id);
  const given = createHash('sha256').update(rest.join(':')).digest();
  if (!merchant || !merchant.keys.some((key) => timingSafeEqual(createHash('sha256').update(key).digest(), given))) return undefined;
  return merchant;
}

const UNAUTHORIZED = { 'www-authenticate': 'Basic realm="merchant", charset="UTF-8"' };

async function merchantUsers(url, req, res) {
  const merchant = authenticate(req);
  if (!merchant) return send(req, res, 401, { status: 'error', data: [], errors: [{ code: 'unauthorized', message: 'Unauthorized.' }] }, UNAUTHORIZED);
  res.merchantId = merchant.id;
  const rest = url.pathname.slice('/merchant/users'.length);
  if (rest.length > 1) {
    const user = usersById.get(decodeURIComponent(rest.slice(1)));
    if (!user) return send(req, res, 404, { status: 'error', data: [], errors: [{ code: 'not_found', message: 'No such user.' }] });
    return send(req, res, 200, { status: 'ok', data: [user], errors: [] });
  }
  const limit = Number(url.searchParams.get('limit') ?? 100);
  const page = users.slice(0, limit + 1);
  const more = page.length > limit;
  if (more) page.length = limit;
  let cursor = null;
  const extra = {};
  if (more) {
    const payload = { v: 1, m: merchant.id, f: [null, null, null], a: page.at(-1).shared_user_id, l: limit };
    cursor = await new CompactEncrypt(new TextEncoder().encode(JSON.stringify(payload))).setProtectedHeader({ alg: 'dir', enc: 'A256GCM' }).encrypt(cursorKey);
    extra.link = `<${PUBLIC_URL}/merchant/users?limit=${limit}&cursor=${cursor}>; rel="next"`;
  }
  send(req, res, 200, { status: 'ok', data: page, next_cursor: cursor, errors: [] }, extra);
}

const server = createServer((req, res) => {
  res.started = performance.now();
  res.requestId = randomUUID();
  const url = new URL(req.url, PUBLIC_URL);
  const path = url.pathname;
  if (path === '/validatesignature') {
    res.route = '/validatesignature';
    return validateSignature(url, req, res);
  }
  if (path === '/merchant/users' || path.startsWith('/merchant/users/')) {
    res.route = path === '/merchant/users' ? '/merchant/users' : '/merchant/users/{shared_user_id}';
    return merchantUsers(url, req, res).catch(() => send(req, res, 500, { status: 'error', data: [], errors: [] }));
  }
  res.route = null;
  send(req, res, 404, { status: 'error', data: [], errors: [{ code: 'not_found', message: 'No such endpoint.' }] });
});
server.listen(portFromEnv(), '127.0.0.1', () => announce(server.address().port));
exitOnSignal(() => new Promise((resolve) => server.close(resolve) && server.closeAllConnections()));
