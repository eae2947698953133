/**
 * The database driver, the query builder, Redis and Prometheus are optional
 * peer dependencies (docs/install.md), so that a merchant installing only
 * `merchant-api/client` gets none of them. The command line loads them
 * only for the commands that use them (serve and the MySQL commands); when
 * one is missing, it says which to install instead of a stack trace.
 */

import process from 'node:process';
import { peerVersionProblem } from './peer-versions.js';

/** The optional peers, as package.json lists them. */
export const OPTIONAL_PEERS = ['kysely', 'mysql2', 'ioredis', 'prom-client'] as const;

/** A one-line fix for an import that failed on a missing optional peer; undefined for any other error. */
export function missingPackageMessage(error: unknown): string | undefined {
  const text = error instanceof Error ? error.message : String(error);
  // Node: "Cannot find package 'x' imported from …"; Bun: "Cannot find package 'x' from '…'"; Deno: "Could not find package 'x' …" or "Cannot find module 'x'".
  const name = /(?:find|resolve) (?:package|module) ['"]([^'"/]+(?:\/[^'"/]+)?)['"]/.exec(text)?.[1];
  if (!name || !(OPTIONAL_PEERS as readonly string[]).includes(name)) return undefined;
  return `merchant-api: the package ${name} is not installed. The commands serve, migrate, import, merchant and throttle need ${OPTIONAL_PEERS.join(', ')} beside merchant-api (help and check need none): npm install ${OPTIONAL_PEERS.join(' ')} (docs/install.md).`;
}

/** Runs a runtime's command line, loaded only here so that a missing peer, or one of a release outside the supported range, is caught and named. */
export async function runGuarded(load: () => Promise<unknown>): Promise<void> {
  const unsupported = peerVersionProblem(OPTIONAL_PEERS);
  if (unsupported) {
    // A configuration problem, as a bad variable is (docs/cli.md: exit 2).
    process.stderr.write(`${unsupported}\n`);
    process.exit(2);
  }
  try {
    await load();
  } catch (error) {
    const message = missingPackageMessage(error);
    if (!message) throw error;
    process.stderr.write(`${message}\n`);
    process.exit(1);
  }
}
