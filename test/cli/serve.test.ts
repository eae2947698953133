/** `merchant-api serve` on the memory storage: what it loads, says and refuses. */
import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { basic } from '../support/basic-auth.js';
import { CLEAN_ENV, runProcess, startProcess } from '../support/processes.js';

function seedFile(document: unknown): string {
  const file = join(mkdtempSync(join(tmpdir(), 'merchant-api-seed-')), 'seed.json');
  writeFileSync(file, JSON.stringify(document));
  return file;
}

describe('merchant-api serve with SEED_FILE', () => {
  it('starts on a seed with merchants and no "users" key, and counts zero users', async () => {
    const SEED_FILE = seedFile({ merchants: [{ id: 'only-merchants', keys: ['k'] }] });
    const server = await startProcess('node', ['dist/cli.js', 'serve'], { PORT: '0', SEED_FILE }, /listening on (http:\/\/\S+)/);
    try {
      expect(server.output()).toContain('1 merchants, 0 users');
      const response = await fetch(`${server.url}/merchant/users`, { headers: basic('only-merchants', 'k') });
      expect(await response.json()).toEqual({ status: 'ok', data: [], errors: [] });
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });

  it('refuses a PUBLIC_URL that is not an http(s) URL as a configuration error, exit 2', async () => {
    const { code, output } = await runProcess('node', ['dist/cli.js', 'serve'], { PORT: '0', PUBLIC_URL: 'https://api.example.com, ftp://files.example.com' });
    expect(output.trim()).toBe('Invalid configuration: PUBLIC_URL: publicUrl "ftp://files.example.com" must be http or https.');
    expect(code).toBe(2);
  });

  it('refuses a user id that no URL can address, naming its place, and exits 2', async () => {
    const user = {
      merchant_id: 'm', shared_user_id: '..', first_name: 'A', last_name: 'B', email_address: 'a@example.com', street: 'S',
      zip_code: '1', city: 'C', state: null, country: 'de', preferred_language: 'en', date_joined: '2020-01-01T00:00:00Z',
      deactivated_at: null, agreed_to_terms_and_conditions: null, agreed_to_marketing: null,
    };
    const SEED_FILE = seedFile({ merchants: [{ id: 'm', keys: ['k'] }], users: [user] });
    const { code, output } = await runProcess('node', ['dist/cli.js', 'serve'], { PORT: '0', SEED_FILE });
    expect(output).toContain('users[0].shared_user_id: `.` and `..` cannot be used');
    expect(output).not.toContain('a@example.com');
    expect(code).toBe(2);
  });
});

describe('merchant-api serve, its log on standard output sent to a file', () => {
  it('writes whole JSON lines, one per request and event, the access lines as the library writes them', async () => {
    const SEED_FILE = seedFile({ merchants: [{ id: 'm', keys: ['k'] }], users: [] });
    const dir = mkdtempSync(join(tmpdir(), 'merchant-api-stdout-'));
    const log = join(dir, 'stdout.log');
    // As deployed: standard output a file (written synchronously by Node), the banner on standard error.
    const stdout = openSync(log, 'w');
    const child = spawn(process.execPath, ['dist/cli.js', 'serve'], { env: { ...process.env, ...CLEAN_ENV, SEED_FILE }, stdio: ['ignore', stdout, 'pipe'] });
    closeSync(stdout);
    try {
      let stderr = '';
      const url = await new Promise<string>((resolve, reject) => {
        child.stderr!.on('data', (chunk: Buffer) => {
          stderr += chunk.toString();
          const found = /listening on (http:\/\/\S+)/.exec(stderr);
          if (found) resolve(found[1]!);
        });
        child.once('exit', (code) => reject(new Error(`exited with ${code}: ${stderr}`)));
      });
      for (let i = 0; i < 20; i++) expect((await fetch(`${url}/merchant/users`, { headers: { ...basic('m', 'k'), 'x-request-id': `req-${i}` } })).status).toBe(200);
      expect((await fetch(`${url}/nowhere`)).status).toBe(404);
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    const text = readFileSync(log, 'utf8');
    expect(text.endsWith('}\n')).toBe(true);
    const lines = text.slice(0, -1).split('\n');
    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(parsed.map((line) => line.event)).toEqual(['listening', ...Array(21).fill('request'), 'shutdown', 'stopped']);
    lines.forEach((line, i) => expect(JSON.stringify(parsed[i])).toBe(line));
    // Each access line has the fields in the documented order, and the values of its request.
    const requests = parsed.filter((line) => line.event === 'request');
    requests.forEach((line, i) => {
      expect(new Date(line.time as string).toISOString()).toBe(line.time);
      expect(Object.keys(line)).toEqual(['time', 'level', 'event', 'request_id', 'method', 'route', 'status', 'duration_ms', 'bytes', ...(i < 20 ? ['merchant_id'] : []), 'client_address', ...(i < 20 ? [] : ['code'])]);
      expect(line).toMatchObject(i < 20 ? { level: 'info', request_id: `req-${i}`, method: 'GET', route: '/merchant/users', status: 200, merchant_id: 'm', client_address: '127.0.0.1' } : { level: 'info', method: 'GET', route: null, status: 404, client_address: '127.0.0.1', code: 'not_found' });
    });
  });
});
