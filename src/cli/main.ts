/**
 * The `merchant-api` bin (package.json "bin"). A bin cannot branch on the
 * runtime, and its `#!/usr/bin/env node` line is Node's, so when Bun or Deno
 * runs it (`bunx --bun merchant-api`, `deno run … node_modules/.bin/merchant-api`)
 * it loads that runtime's command line: its own server and workers.
 */
import { runGuarded } from './missing-package.js';

const runtime = globalThis as { Bun?: unknown; Deno?: unknown };

// Loaded behind the guard: an optional peer that is missing is named, not a stack trace.
await runGuarded(() => (runtime.Bun !== undefined ? import('./bun-cli.js') : runtime.Deno !== undefined ? import('./deno-cli.js') : import('./node-cli.js')));
