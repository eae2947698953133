/**
 * A merchant checks its API key and request signing, then reads its users.
 *
 *   npm start                                  # in one terminal
 *   npx tsx examples/sign-and-call.ts          # in another
 *
 * BASE_URL, MERCHANT_ID and API_KEY default to the demo server and merchant.
 */
import { signUrl } from 'merchant-api/signing';

const baseUrl = process.env.BASE_URL ?? 'http://127.0.0.1:8787';
const merchantId = process.env.MERCHANT_ID ?? 'demo-merchant';
const apiKey = process.env.API_KEY ?? 'demo-secret';

// signUrl adds a fresh ts and salt and the hmac over everything.
const url = signUrl(apiKey, `${baseUrl}/validatesignature`, { cp: merchantId });
const check = await fetch(url);
const result = (await check.json()) as { status: string; is_valid: boolean; message?: string };
console.log(`validatesignature: ${check.status} ${JSON.stringify(result)}`);

const users = await fetch(`${baseUrl}/merchant/users?limit=3`, {
  headers: { authorization: `Basic ${Buffer.from(`${merchantId}:${apiKey}`).toString('base64')}` },
});
const page = (await users.json()) as { data: { shared_user_id: string }[]; next_cursor: string | null };
console.log(`first page: ${users.status}, ${page.data.length} users, next_cursor ${page.next_cursor ? 'present' : 'null'}`);

process.exitCode = result.is_valid ? 0 : 1;
