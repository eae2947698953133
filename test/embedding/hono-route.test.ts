/** The embedding recipe for Hono app.route(prefix, sub-app) on Node (docs/embedding.md), through a real server of that host. */
import { describe } from 'vitest';
import { embeddingSuite } from './host-suite.js';
import { processHost } from './process-host.js';

describe('embedded in Hono app.route(prefix, sub-app) on Node', () => {
  embeddingSuite(processHost('node', 'hono-route.ts'));
});
