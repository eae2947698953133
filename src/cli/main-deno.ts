/** The `merchant-api` command on Deno: the same commands as `main.ts`, served by `Deno.serve`. */
import { runGuarded } from './missing-package.js';

// Loaded behind the guard: an optional peer that is missing is named, not a stack trace.
await runGuarded(() => import('./deno-cli.js'));
