/**
 * Stored answers of idempotency keys at rest (docs/protocol.md#safe-retries): an answer may hold a
 * secret shown once (a new webhook endpoint's), so the database holds every stored answer sealed as
 * API keys are (`key-sealing.ts`: a compact JWE, `dir`, `A256GCM`, under the master key). The
 * merchant id and a hash of the idempotency key sit in the protected header, which GCM
 * authenticates: an answer copied to another merchant's or another key's row does not open.
 */
import { CompactEncrypt, compactDecrypt } from 'jose';
import { createHash } from 'node:crypto';
import type { StoredAnswer } from '../idempotency.js';
import { MasterKeyError, type MasterKey } from './key-sealing.js';

const DECRYPT_OPTIONS = { keyManagementAlgorithms: ['dir'], contentEncryptionAlgorithms: ['A256GCM'] };

/** The key as the header names it: a hash, so the header tells nothing a row does not. */
function keyTag(key: string): string {
  return createHash('sha256').update('merchant-api idempotency key\u0000').update(key).digest('base64url').slice(0, 16);
}

/** Seals `answer` of `merchantId`'s `key`. */
export async function sealAnswer(masterKey: MasterKey, merchantId: string, key: string, answer: StoredAnswer): Promise<string> {
  const text = JSON.stringify({ status: answer.status, headers: answer.headers, body: answer.body });
  return new CompactEncrypt(new TextEncoder().encode(text))
    .setProtectedHeader({ alg: 'dir', enc: 'A256GCM', kid: masterKey.kid, mid: merchantId, idk: keyTag(key) })
    .encrypt(masterKey.bytes);
}

/** Opens a sealed answer; throws `MasterKeyError` when it was sealed under another master key, for another merchant or key, or altered. */
export async function openAnswer(masterKey: MasterKey, merchantId: string, key: string, sealed: string): Promise<StoredAnswer> {
  let result;
  try {
    result = await compactDecrypt(sealed, masterKey.bytes, DECRYPT_OPTIONS);
  } catch (error) {
    throw new MasterKeyError(`A stored answer of merchant "${merchantId}" does not open with the configured MASTER_KEY: it was altered or sealed under another key.`, { cause: error });
  }
  if (result.protectedHeader.mid !== merchantId || result.protectedHeader.idk !== keyTag(key)) {
    throw new MasterKeyError(`A stored answer kept for merchant "${merchantId}" belongs to another merchant or idempotency key.`);
  }
  const answer = JSON.parse(new TextDecoder().decode(result.plaintext)) as StoredAnswer;
  return { status: answer.status, headers: answer.headers, body: answer.body };
}
