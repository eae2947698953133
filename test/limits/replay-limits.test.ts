/**
 * The bounded replay store through the standalone server on Node, Bun and Deno
 * (docs/protocol.md#a-bounded-replay-store): a flood of unique salts with a small MAX_SALTS
 * gets 429 once its merchant holds half the store, 503 once two merchants fill it, each with
 * Retry-After, never a crash; a ts from before the server started is refused; and every answer
 * matches /openapi.json.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { recordResponses, send, type HttpResponse } from '../support/http-client.js';
import { RUNTIMES, useCliServer } from '../support/processes.js';
import { conformanceSeed, MERCHANTS } from '../support/seeds.js';
import { signedUrl } from '../support/test-signer.js';
import { describeRecordedAnswersMatchOpenApi } from '../support/openapi-validator.js';

const { main, other, unicode } = MERCHANTS;
const MAX_SALTS = 300;
const SHARE = MAX_SALTS / 2;
const BEFORE_START = '{"status":"error","message":"Invalid timestamp: ts is before this server started; sign the request again with the current time.","is_valid":false}';
const recorded = recordResponses();

/** `count` validly signed requests with fresh salts, `concurrency` at a time. */
async function flood(url: string, merchant: { id: string; keys: readonly string[] }, count: number, concurrency = 16): Promise<(HttpResponse & { url: string })[]> {
  const answers: (HttpResponse & { url: string })[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next++;
        // Signed at the current second (the server listens from the second after its start), which the Retry-After bounds count from.
        const signed = signedUrl({ secret: merchant.keys[0]!, url: `${url}/validatesignature`, cp: merchant.id, ts: String(Math.floor(Date.now() / 1000)) });
        answers.push({ ...(await send(signed)), url: signed });
      }
    }),
  );
  return answers;
}

const tally = (answers: HttpResponse[]) => answers.reduce<Record<number, number>>((counts, { status }) => ({ ...counts, [status]: (counts[status] ?? 0) + 1 }), {});

for (const runtime of RUNTIMES) {
  describe(`the replay store's limits on ${runtime}`, () => {
    const server = useCliServer(runtime, conformanceSeed(), { MAX_SALTS: String(MAX_SALTS) });
    beforeAll(() => {
      recorded.length = 0;
    });

    it('refuses a ts from before the server started, with the documented message', async () => {
      const ts = String(Math.floor(Date.now() / 1000) - 60);
      const answer = await send(signedUrl({ secret: main.keys[0], url: `${server.url}/validatesignature`, cp: main.id, ts }));
      expect(answer.status).toBe(400);
      expect(answer.body).toBe(BEFORE_START);
    });

    let accepted = '';

    it('answers a merchant flooding fresh salts 429 with Retry-After once it holds half of MAX_SALTS; other merchants are served', async () => {
      const answers = await flood(server.url, main, SHARE + 60);
      accepted = answers.find((answer) => answer.status === 200)!.url;
      expect(tally(answers)).toEqual({ 200: SHARE, 429: 60 });
      const limited = answers.find((answer) => answer.status === 429)!;
      const body = JSON.parse(limited.body);
      expect(Object.keys(body)).toEqual(['status', 'message', 'is_valid']);
      expect(body).toMatchObject({ status: 'error', is_valid: false });
      expect(body.message).toContain(`half of the replay store's ${MAX_SALTS}`);
      // Its oldest salt expires TIMESTAMP_TOLERANCE (300 s) after it was signed, a few seconds ago.
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(280);
      expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(301);
      expect(limited.headers['ratelimit-policy']).toBe(`"salts";q=${SHARE}`);
      expect((await send(signedUrl({ secret: other.keys[0], url: `${server.url}/validatesignature`, cp: other.id }))).status).toBe(200);
    });

    it('answers 503 with Retry-After once two merchants fill it, and stays up', async () => {
      const answers = await flood(server.url, other, SHARE + 20);
      // One salt of this merchant was recorded by the test before.
      expect(tally(answers)).toEqual({ 200: SHARE - 1, 429: 21 });
      const full = await flood(server.url, unicode, 40);
      expect(tally(full)).toEqual({ 503: 40 });
      const refused = full[0]!;
      expect(JSON.parse(refused.body)).toEqual({ status: 'error', message: 'The storage is unavailable; try again shortly.', is_valid: false });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(280);
      expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(301);
      // A replay is still answered as a replay, and everything else still works.
      expect(JSON.parse((await send(accepted)).body).message).toBe('This salt was already used: every request needs a new salt.');
      expect((await send(`${server.url}/healthz`)).status).toBe(200);
      expect((await send(`${server.url}/readyz`)).status).toBe(200);
      expect(server.process.child.exitCode).toBeNull();
    });

    describeRecordedAnswersMatchOpenApi({ runtime, baseUrl: () => server.url, recorded });
  });
}
