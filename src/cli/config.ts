/**
 * The standalone server's configuration, read from the environment (the
 * README's configuration table). Every bad value is named in one error.
 */
import { CliUsageError } from './io.js';

export interface ServerConfig {
  port: number;
  hostname: string;
  /** Explicit SEED_FILE, or undefined for the bundled demo seed. */
  seedFile?: string;
  publicUrl?: string[];
  trustProxy: boolean;
  timestampTolerance: number;
  storageTimeout: number;
  cursorSecret?: string;
  tls?: { certFile: string; keyFile: string };
  databaseUrl?: string;
}

export function readServerConfig(env: Record<string, string | undefined>): ServerConfig {
  const problems: string[] = [];
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name} must be a whole number from ${min} to ${max} (got "${raw}")`);
      return fallback;
    }
    return Number(raw);
  };
  const text = (name: string): string | undefined => (env[name] === undefined || env[name] === '' ? undefined : env[name]);

  const trust = (text('TRUST_PROXY') ?? 'false').toLowerCase();
  if (!['true', 'false', '1', '0', 'yes', 'no'].includes(trust)) problems.push(`TRUST_PROXY must be true or false (got "${env.TRUST_PROXY}")`);
  const cursorSecret = text('CURSOR_SECRET');
  if (cursorSecret !== undefined && new TextEncoder().encode(cursorSecret).length < 32) problems.push('CURSOR_SECRET must be at least 32 bytes long');
  const certFile = text('TLS_CERT_FILE');
  const keyFile = text('TLS_KEY_FILE');
  if ((certFile === undefined) !== (keyFile === undefined)) problems.push('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  const publicUrl = text('PUBLIC_URL')?.split(',').map((s) => s.trim()).filter(Boolean);

  const config: ServerConfig = {
    port: int('PORT', 8787, 0, 65535),
    hostname: text('HOST') ?? '127.0.0.1',
    seedFile: text('SEED_FILE'),
    publicUrl,
    trustProxy: ['true', '1', 'yes'].includes(trust),
    timestampTolerance: int('TIMESTAMP_TOLERANCE', 300, 1, 86_400),
    storageTimeout: int('STORAGE_TIMEOUT', 5000, 1, 600_000),
    cursorSecret,
    tls: certFile && keyFile ? { certFile, keyFile } : undefined,
    databaseUrl: text('DATABASE_URL'),
  };
  if (problems.length) throw new CliUsageError(`Invalid configuration: ${problems.join('; ')}.`);
  return config;
}
