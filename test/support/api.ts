/**
 * Builds a handler on the memory storage with a fixed clock, and signs requests for it with the
 * independent signer (./test-signer.ts), never the library's: a fault of the library's signing
 * that it shares with itself (`~` escaped as %7E) is then refused in every route suite.
 */
import { createMerchantApi, type MerchantApiOptions } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { hmacSha224, queryString, signatureMessage } from './test-signer.js';
import { contractSeed } from './seeds.js';
import type { RequestInfo } from '../../src/http/context.js';

export const NOW_MS = 1_700_000_000_000;
export const NOW = NOW_MS / 1000;
export const ORIGIN = 'http://api.test';

export function testApi(options: Partial<MerchantApiOptions> = {}) {
  const storage = new MemoryStorage(contractSeed());
  const api = createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, ...options });
  return { api, storage };
}

let counter = 0;

/** A signed validatesignature URL (the independent signer); `overrides` replace or (with undefined) drop parameters. */
export function signedUrl(
  options: { key?: string; cp?: string; ts?: number | string; salt?: string; extra?: [string, string][]; base?: string; method?: string; path?: string } = {},
): string {
  const base = options.base ?? ORIGIN;
  const path = options.path ?? '/validatesignature';
  const pairs: [string, string][] = [
    ['cp', options.cp ?? 'm1'],
    ['ts', String(options.ts ?? NOW)],
    ['salt', options.salt ?? `salt-${++counter}-${Math.random()}`],
    ...(options.extra ?? []),
  ];
  const hmac = hmacSha224(options.key ?? 'key-one', signatureMessage(options.method ?? 'GET', base + path, pairs));
  return `${base}${path}?${queryString([...pairs, ['hmac', hmac]])}`;
}

export { basic } from './basic-auth.js';

export async function call(api: { fetch(r: Request, info?: RequestInfo): Promise<Response> }, url: string, init?: RequestInit, info?: RequestInfo) {
  const response = await api.fetch(new Request(url, init), info);
  const text = await response.text();
  return { response, status: response.status, text, body: text ? JSON.parse(text) : undefined };
}
