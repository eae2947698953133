/** `merchant-api serve` on the memory storage: what it loads, says and refuses. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { basic } from '../support/basic-auth.js';
import { runProcess, startProcess } from '../support/processes.js';

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
