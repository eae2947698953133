/**
 * The API reference page (docs/embedding.md#the-api-reference-page) in a real browser: Debian's
 * chromium-headless-shell driven by playwright-core (never a downloaded browser), against the standalone server.
 * Every operation renders, the page asks nothing of any other origin, and "Try it out" answers 200 for a
 * Basic-auth listing and for a /validatesignature call the page signs itself, without sending the key.
 *
 * DOCS_SCREENSHOT=1 writes docs/api-reference.png (committed once).
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inCi } from '../support/ci.js';
import { ROOT, useCliServer } from '../support/processes.js';
import { conformanceSeed, MERCHANTS } from '../support/seeds.js';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium-headless-shell';

function chromiumAvailable(): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (inCi()) throw new Error(`The browser suite must run in CI, but ${CHROMIUM} is missing (.ci/run installs chromium-headless-shell).`);
  console.warn(['', `!!! browser suite SKIPPED: ${CHROMIUM} is missing`, '!!! Install it with: apt-get install chromium-headless-shell (or set CHROMIUM)', ''].join('\n'));
  return false;
}

describe.skipIf(!chromiumAvailable())('the API reference page in Chromium', () => {
  const server = useCliServer('node', conformanceSeed(), { PUBLIC_URL: '' });
  const { main } = MERCHANTS;
  let browser: Browser;
  let page: Page;
  /** Every request the page made: URL, headers and body. */
  const requests: { url: string; headers: Record<string, string>; body: string | null }[] = [];
  const problems: string[] = [];

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM });
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    page.setDefaultTimeout(30_000);
    page.on('request', (request) => requests.push({ url: request.url(), headers: request.headers(), body: request.postData() }));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(String(error)));
    await page.goto(`${server.url}/docs`);
    await page.locator('.opblock').first().waitFor({ timeout: 30_000 });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
  });

  it('renders every operation of the OpenAPI document', { timeout: 90_000 }, async () => {
    const document = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, { operationId: string; tags: string[] }>>; webhooks?: Record<string, Record<string, unknown>> };
    const operations = Object.values(document.paths).flatMap((item) => Object.entries(item).filter(([method]) => ['get', 'head', 'post', 'put', 'patch', 'delete'].includes(method)).map(([method, op]) => ({ method, ...op })));
    expect(operations.length).toBeGreaterThan(5);
    for (const { method, operationId, tags } of operations) {
      await expect.poll(() => page.locator(`#operations-${tags[0]}-${operationId}`).count(), { message: `${method} ${operationId}` }).toBe(1);
    }
    // Swagger UI draws the events under OpenAPI 3.1 `webhooks` as operations too, one each.
    const events = Object.values(document.webhooks ?? {}).flatMap((item) => Object.keys(item));
    expect(events.length).toBeGreaterThan(0);
    expect(await page.locator('.opblock').count()).toBe(operations.length + events.length);
  });

  it('a try-it-out of /merchant/users?limit=2 with Basic auth answers 200', { timeout: 90_000 }, async () => {
    await page.locator('.auth-wrapper .authorize').click();
    const dialog = page.locator('.modal-ux');
    await dialog.locator('input[type=text]').fill(main.id);
    await dialog.locator('input[type=password]').fill(main.keys[0]);
    await dialog.locator('button.authorize').click();
    await dialog.locator('button.btn-done').click();

    const operation = page.locator('#operations-Users-listUsers');
    await operation.locator('.opblock-summary').click();
    await operation.locator('.try-out__btn').click();
    await operation.locator('tr[data-param-name="limit"] input').fill('2');
    await operation.locator('.execute').click();
    const answer = operation.locator('.live-responses-table');
    await expect.poll(() => answer.innerText(), { timeout: 30_000 }).toMatch(/^Code\s+Details\s+200\b/);
    expect((await answer.innerText()).match(/"shared_user_id"/g)).toHaveLength(2);
    expect(requests.map((r) => new URL(r.url)).filter((url) => url.pathname === '/merchant/users').map((url) => url.searchParams.get('limit'))).toEqual(['2']);
    await operation.locator('.opblock-summary').click();
  });

  it('a /validatesignature call signed by the page answers 200, and the key never leaves the page', { timeout: 90_000 }, async () => {
    await page.locator('#signing-merchant').fill(main.id);
    await page.locator('#signing-key').fill(main.keys[1]);
    const operation = page.locator('#operations-Signatures-validateSignature');
    await operation.locator('.opblock-summary').click();
    await operation.locator('.try-out__btn').click();
    await operation.locator('.execute').click();
    const answer = operation.locator('.live-responses-table');
    await expect.poll(() => answer.innerText(), { timeout: 30_000 }).toMatch(/^Code\s+Details\s+200\b/);
    expect(await answer.innerText()).toMatch(/"is_valid": true/);

    const signed = requests.filter((r) => new URL(r.url).pathname === '/validatesignature');
    expect(signed).toHaveLength(1);
    expect([...new URL(signed[0]!.url).searchParams.keys()].sort()).toEqual(['cp', 'hmac', 'salt', 'ts']);
    for (const request of requests) expect(JSON.stringify(request)).not.toContain(main.keys[1]);
  });

  it('asks nothing of any other origin, and nothing breaks the Content-Security-Policy', async () => {
    const origin = new URL(server.url).origin;
    expect(requests.length).toBeGreaterThan(5);
    expect(requests.map((r) => r.url).filter((url) => new URL(url).origin !== origin && !url.startsWith('data:'))).toEqual([]);
    expect(problems).toEqual([]);
  });

  it.runIf(process.env.DOCS_SCREENSHOT === '1')('writes docs/api-reference.png', { timeout: 90_000 }, async () => {
    await page.goto(`${server.url}/docs`);
    await page.locator('.opblock').first().waitFor();
    await page.screenshot({ path: `${ROOT}docs/api-reference.png` });
  });
});
