/** The embedding recipe for Koa, a middleware with ctx.respond = false (docs/embedding.md), through a real server of that host. */
import { describe } from 'vitest';
import { embeddingSuite } from './host-suite.js';
import { processHost } from './process-host.js';

describe('embedded in Koa, a middleware with ctx.respond = false', () => {
  embeddingSuite(processHost('node', 'koa.ts'));
});
