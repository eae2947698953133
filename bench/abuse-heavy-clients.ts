/**
 * The heavy merchant of bench/abuse-fairness.ts, in a process of its own so
 * that its 24 client loops never delay the bystander's timing in the bench
 * process. Runs until stdin closes, then prints its counts as one JSON line.
 * Each loop asks for one page through the merchant client (src/client), as an
 * integration would: it waits as long as Retry-After says, up to 3 retries,
 * and a loop whose call still failed waits the last Retry-After before its
 * next call. (One Node process of such loops sends about 1,500 listings a
 * second on this VM: too few to fill the server's core, so the bench also
 * runs wrk with bench/wrk/retry-after.lua.)
 */
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { createMerchantClient, MerchantResponseError } from '../src/client/index.js';

const { values } = parseArgs({ options: { url: { type: 'string' }, connections: { type: 'string', default: '24' }, id: { type: 'string' }, key: { type: 'string' } } });
const url = values.url!;

let stop = false;
process.stdin.on('end', () => (stop = true)).resume();
/** Answers the server sent, by status (retries included). */
const answers: Record<string, number> = {};
const count = (status: number | string) => (answers[status] = (answers[status] ?? 0) + 1);
let calls = 0;
let failedCalls = 0;

async function sdkLoop(): Promise<void> {
  const client = createMerchantClient({
    baseUrl: url,
    merchantId: values.id!,
    apiKey: values.key!,
    retries: { onRetry: ({ status }) => count(status ?? 'network') },
  });
  while (!stop) {
    calls++;
    try {
      for await (const page of client.userPages({ pageSize: 1, joinedAfter: '2099-01-01T00:00:00Z' })) {
        void page;
        break;
      }
      count(200);
    } catch (error) {
      failedCalls++;
      const status = error instanceof MerchantResponseError ? error.status : 'network';
      count(status);
      await sleep(error instanceof MerchantResponseError && error.retryAfter !== undefined ? error.retryAfter * 1000 : 1000);
    }
  }
}

const started = performance.now();
await Promise.all(Array.from({ length: Number(values.connections) }, () => sdkLoop()));
console.log(JSON.stringify({ seconds: (performance.now() - started) / 1000, calls, failedCalls, answers }));
