/** The `merchant-api` bin on Node. */
import { runGuarded } from './missing-package.js';

// Loaded behind the guard: an optional peer that is missing is named, not a stack trace.
await runGuarded(() => import('./node-cli.js'));
