/** The embedding recipe for Hono app.mount(prefix, api.fetch) on Node (docs/embedding.md), through a real server of that host. */
import { describe } from 'vitest';
import { embeddingSuite } from './host-suite.js';
import { processHost } from './process-host.js';

describe('embedded in Hono app.mount(prefix, api.fetch) on Node', () => {
  embeddingSuite(processHost('node', 'hono-mount.ts'));
});
