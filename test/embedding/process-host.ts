/**
 * Runs one host fixture of test/fixtures/embedding/ as a process of its own
 * (Node through tsx, Bun, Deno) for the enclosing suite, and gives the
 * shared suite its origin, a `fetch`, and what it printed.
 */
import { afterAll, beforeAll } from 'vitest';
import { startServer, type Runtime, type ServerProcess } from '../support/processes.js';
import type { Host } from './host-suite.js';

/** `env`: the process's environment beyond the test's own (the Node adapter's path, test/support/node-paths.ts). */
export function processHost(runtime: Runtime, fixture: string, env: Record<string, string> = {}): Host {
  let server: ServerProcess | undefined;
  beforeAll(async () => {
    server = await startServer(runtime, `test/fixtures/embedding/${fixture}`, env);
  });
  afterAll(async () => {
    await server?.stop();
  });
  const started = () => {
    if (!server) throw new Error(`${fixture} has not started`);
    return server;
  };
  return {
    origin: () => started().url,
    send: (url, init) => fetch(url, init),
    output: () => started().output(),
  };
}
