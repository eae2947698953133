/**
 * (1b) The bench's first plain peer, kept as a second row: the same
 * straightforward `node:http` server as bench/servers/plain-node.mjs (`URL` +
 * `URLSearchParams`, HMAC-SHA224 with `node:crypto`, salts in a `Map`,
 * records through `JSON.stringify`, page cursors sealed with jose like ours),
 * but its JSON access line is appended to a file through an `fs.WriteStream`:
 * one asynchronous write per line, queued while one is under way. That makes
 * it a slower peer than the one a team writes (process.stdout.write to a
 * file, synchronous), and the goal looked met against it when it was not
 * (issue 29). BENCH_ACCESS_LOG=off leaves the line out.
 */
import { createHash, createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { createWriteStream, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompactEncrypt } from 'jose';
import { announce, CURSOR_SECRET, exitOnSignal, makeUsers, MERCHANT_ID, MERCHANT_KEY, portFromEnv, PUBLIC_URL, TIMESTAMP_TOLERANCE } from './data.mjs';

const merchants = new Map([[MERCHANT_ID, { id: MERCHANT_ID, status: 'active', keys: [MERCHANT_KEY] }]]);
const users = makeUsers();
const usersById = new Map(users.map((u) => [u.shared_user_id, u]));
const salts = new Map();
const cursorKey = new Uint8Array(createHash('sha256').update(CURSOR_SECRET).digest());

const pct = (s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

function send(res, status, body, extra) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text), ...extra });
  res.end(text);
}

function validateSignature(url, res) {
  const params = [...url.searchParams];
  const get = (name) => url.searchParams.get(name);
  const missing = ['salt', 'cp', 'ts', 'hmac'].filter((name) => !get(name));
  if (missing.length) return send(res, 400, { status: 'error', message: `Missing required parameter: ${missing.join(', ')}.`, is_valid: false });
  const merchant = merchants.get(get('cp'));
  if (!merchant) return send(res, 404, { status: 'error', is_valid: false });
  const encoded = params
    .filter(([k]) => k !== 'hmac' && k !== 'gettoken')
    .map(([k, v]) => [pct(k), pct(v)])
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  const message = `GET&${pct(PUBLIC_URL + url.pathname)}&${pct(encoded.map(([k, v]) => `${k}=${v}`).join('&'))}`;
  const received = Buffer.from(get('hmac').toLowerCase());
  const ok = merchant.keys.some((key) => {
    const expected = Buffer.from(createHmac('sha224', key).update(message).digest('hex'));
    return expected.length === received.length && timingSafeEqual(expected, received);
  });
  if (!ok) return send(res, 400, { status: 'error', message: 'Signature does not match.', is_valid: false });
  const ts = Number(get('ts'));
  if (!Number.isInteger(ts) || Math.abs(Date.now() / 1000 - ts) > TIMESTAMP_TOLERANCE) {
    return send(res, 400, { status: 'error', message: 'Invalid timestamp.', is_valid: false });
  }
  const saltKey = `${merchant.id}:${get('salt')}`;
  if (salts.has(saltKey)) return send(res, 400, { status: 'error', message: 'This salt was already used.', is_valid: false });
  res.merchantId = merchant.id;
  salts.set(saltKey, ts + TIMESTAMP_TOLERANCE);
  send(res, 200, { status: 'ok', is_valid: true });
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
  if (!merchant) return send(res, 401, { status: 'error', data: [], errors: [{ code: 'unauthorized', message: 'Unauthorized.' }] }, UNAUTHORIZED);
  res.merchantId = merchant.id;
  const rest = url.pathname.slice('/merchant/users'.length);
  if (rest.length > 1) {
    const user = usersById.get(decodeURIComponent(rest.slice(1)));
    if (!user) return send(res, 404, { status: 'error', data: [], errors: [{ code: 'not_found', message: 'No such user.' }] });
    return send(res, 200, { status: 'ok', data: [user], errors: [] });
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
  send(res, 200, { status: 'ok', data: page, next_cursor: cursor, errors: [] }, extra);
}

const accessLog = globalThis.process?.env?.BENCH_ACCESS_LOG !== 'off';
// A file of its own, as merchant-api's standard output is one (bench/servers.ts).
const accessPath = join(tmpdir(), `merchant-api-bench-plain-${process.pid}.log`);
const accessFile = accessLog ? createWriteStream(accessPath) : undefined;

/** The access line, as a straightforward server writes it: an object, JSON.stringify, one write. */
function logRequest(req, res, started, route, requestId) {
  res.on('finish', () => {
    const line = {
      time: new Date().toISOString(),
      level: 'info',
      event: 'request',
      request_id: requestId,
      method: req.method,
      route,
      status: res.statusCode,
      duration_ms: Math.round((performance.now() - started) * 1000) / 1000,
      bytes: Number(res.getHeader('content-length') ?? 0),
      client_address: req.socket.remoteAddress,
    };
    if (res.merchantId !== undefined) line.merchant_id = res.merchantId;
    accessFile.write(`${JSON.stringify(line)}\n`);
  });
}

const server = createServer((req, res) => {
  const started = performance.now();
  const url = new URL(req.url, PUBLIC_URL);
  if (accessLog) {
    const route = url.pathname === '/validatesignature' ? '/validatesignature' : url.pathname === '/merchant/users' ? '/merchant/users' : url.pathname.startsWith('/merchant/users/') ? '/merchant/users/{shared_user_id}' : null;
    const requestId = randomUUID();
    res.setHeader('x-request-id', requestId);
    logRequest(req, res, started, route, requestId);
  }
  if (url.pathname === '/validatesignature') return validateSignature(url, res);
  if (url.pathname.startsWith('/merchant/users')) {
    return merchantUsers(url, req, res).catch(() => send(res, 500, { status: 'error', data: [], errors: [] }));
  }
  send(res, 404, { status: 'error', data: [], errors: [{ code: 'not_found', message: 'No such endpoint.' }] });
});
server.listen(portFromEnv(), '127.0.0.1', () => announce(server.address().port));
exitOnSignal(async () => {
  await new Promise((resolve) => server.close(resolve) && server.closeAllConnections());
  if (accessFile) await new Promise((resolve) => accessFile.end(resolve)).then(() => rmSync(accessPath, { force: true }));
});
