/** The `merchant-api` command on Bun: the same commands as `main.ts`, served by `Bun.serve`. */
import { runGuarded } from './missing-package.js';

// Loaded behind the guard: an optional peer that is missing is named, not a stack trace.
await runGuarded(() => import('./bun-cli.js'));
