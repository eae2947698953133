/**
 * API keys at rest (docs/protocol.md#storage-and-secrets): a key is needed in the clear to check an
 * HMAC, so the database holds it sealed as a compact JWE (`dir`, `A256GCM`)
 * under a master key that only the configuration holds. The merchant id sits
 * in the protected header, which GCM authenticates: a sealed key copied to
 * another merchant's row does not open.
 */
import { base64url, CompactEncrypt, compactDecrypt, decodeProtectedHeader } from 'jose';
import { createHash, randomBytes } from 'node:crypto';

const MASTER_KEY_BYTES = 32;
const DECRYPT_OPTIONS = { keyManagementAlgorithms: ['dir'], contentEncryptionAlgorithms: ['A256GCM'] };

/** A master key problem: missing, malformed, or not the one a key was sealed with. Never holds key material. */
export class MasterKeyError extends Error {
  override name = 'MasterKeyError';
}

/** A parsed master key with the short id written into every JWE it seals. */
export interface MasterKey {
  readonly bytes: Uint8Array;
  /** Public fingerprint (a hash prefix): tells "sealed under another master key" apart from corruption. */
  readonly kid: string;
}

/**
 * Parses `MASTER_KEY`: base64url (padding optional) of exactly 32 bytes.
 *
 * @example
 * const masterKey = parseMasterKey(process.env.MASTER_KEY);
 */
export function parseMasterKey(text: string | undefined): MasterKey {
  if (text === undefined || text.trim() === '') {
    throw new MasterKeyError(`MASTER_KEY is not set. The MySQL storage keeps API keys encrypted under it; generate one with: ${GENERATE_HINT}`);
  }
  const trimmed = text.trim().replace(/=+$/, '');
  if (!/^[A-Za-z0-9_-]+$/.test(trimmed)) {
    throw new MasterKeyError(`MASTER_KEY must be base64url (A-Z a-z 0-9 - _) of ${MASTER_KEY_BYTES} random bytes; generate one with: ${GENERATE_HINT}`);
  }
  let bytes: Uint8Array;
  try {
    bytes = base64url.decode(trimmed);
  } catch {
    bytes = new Uint8Array(0);
  }
  if (bytes.length !== MASTER_KEY_BYTES) {
    const got = bytes.length === 0 ? 'it is not valid base64url' : `it decodes to ${bytes.length}`;
    throw new MasterKeyError(`MASTER_KEY must decode to exactly ${MASTER_KEY_BYTES} bytes, ${got}; generate one with: ${GENERATE_HINT}`);
  }
  return { bytes, kid: keyId(bytes) };
}

/** How to make a master key, for error messages and the README. */
export const GENERATE_HINT = `node -e "console.log(require('node:crypto').randomBytes(32).toString('base64url'))"`;

/** A new random master key: base64url of 32 random bytes. */
export function generateMasterKey(): string {
  return randomBytes(MASTER_KEY_BYTES).toString('base64url');
}

/** A new random API key for a merchant: 32 random bytes, base64url (43 characters). */
export function generateApiKey(): string {
  return randomBytes(32).toString('base64url');
}

/** Seals an API key of `merchantId` under the master key: a compact JWE. */
export async function sealApiKey(masterKey: MasterKey, merchantId: string, apiKey: string): Promise<string> {
  return new CompactEncrypt(new TextEncoder().encode(apiKey))
    .setProtectedHeader({ alg: 'dir', enc: 'A256GCM', kid: masterKey.kid, mid: merchantId })
    .encrypt(masterKey.bytes);
}

/**
 * Opens a sealed API key of `merchantId`. Throws `MasterKeyError` when it was
 * sealed under another master key, for another merchant, or was altered.
 */
export async function openApiKey(masterKey: MasterKey, merchantId: string, sealed: string): Promise<string> {
  let result;
  try {
    result = await compactDecrypt(sealed, masterKey.bytes, DECRYPT_OPTIONS);
  } catch (error) {
    const kid = headerKid(sealed);
    if (kid !== undefined && kid !== masterKey.kid) {
      throw new MasterKeyError(`An API key of merchant "${merchantId}" was sealed under another MASTER_KEY (id ${kid}; the configured one is ${masterKey.kid}).`);
    }
    throw new MasterKeyError(`An API key of merchant "${merchantId}" does not open with the configured MASTER_KEY: it was altered or sealed under another key.`, { cause: error });
  }
  if (result.protectedHeader.mid !== merchantId) {
    throw new MasterKeyError(`A sealed API key stored for merchant "${merchantId}" belongs to another merchant.`);
  }
  return new TextDecoder().decode(result.plaintext);
}

function keyId(bytes: Uint8Array): string {
  // A prefix of a hash under a fixed label: identifies the key without helping to guess it.
  return createHash('sha256').update('merchant-api master key id\u0000').update(bytes).digest('base64url').slice(0, 8);
}

function headerKid(sealed: string): string | undefined {
  try {
    const { kid } = decodeProtectedHeader(sealed);
    return typeof kid === 'string' ? kid : undefined;
  } catch {
    return undefined;
  }
}
