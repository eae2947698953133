/**
 * A merchant's program with merchant-api/client: check the key and signing,
 * read one user, page through the active users, and export everyone.
 *
 *   npm start                              # in one terminal: the demo server
 *   npx tsx examples/client.ts             # in another
 *
 * BASE_URL, MERCHANT_ID and API_KEY default to the demo server and merchant.
 */
import { createMerchantClient, MerchantNetworkError, MerchantResponseError, MerchantTimeoutError } from 'merchant-api/client';

const client = createMerchantClient({
  baseUrl: process.env.BASE_URL ?? 'http://127.0.0.1:8787',
  merchantId: process.env.MERCHANT_ID ?? 'demo-merchant',
  apiKey: process.env.API_KEY ?? 'demo-secret',
  timeoutMs: 10_000,
});

try {
  // Signs GET /validatesignature with a fresh ts and salt.
  console.log('validatesignature:', JSON.stringify(await client.validateSignature()));

  const user = await client.user('usr-0004');
  console.log(`user usr-0004: ${user.first_name} ${user.last_name}, joined ${user.date_joined}`);

  // Active users who joined since 2020, two per request: the client follows next_cursor.
  const active: string[] = [];
  for await (const u of client.users({ active: true, joinedAfter: '2020-01-01T00:00:00Z', pageSize: 2 })) active.push(u.shared_user_id);
  console.log(`active since 2020: ${active.join(', ')}`);

  // Pages, to resume later from the last nextCursor.
  let pages = 0;
  for await (const page of client.userPages({ pageSize: 3 })) {
    pages++;
    console.log(`page ${pages}: ${page.users.length} users, next cursor ${page.nextCursor ? 'present' : 'null'}`);
  }

  // The whole list in one streamed request, parsed as it arrives.
  let exported = 0;
  for await (const u of client.exportUsers()) if (u.shared_user_id) exported++;
  console.log(`exported: ${exported} users`);

  await client.user('no-such-user');
} catch (error) {
  if (error instanceof MerchantResponseError && error.status === 404) {
    console.log(`no-such-user: ${error.status} ${error.code} (request id ${error.requestId})`);
  } else if (error instanceof MerchantNetworkError || error instanceof MerchantTimeoutError) {
    console.error(`cannot reach the API: ${error.message}`);
    process.exitCode = 1;
  } else {
    throw error;
  }
}
