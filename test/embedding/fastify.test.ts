/** The embedding recipe for Fastify, a catch-all route with reply.hijack() (docs/embedding.md), through a real server of that host. */
import { describe } from 'vitest';
import { embeddingSuite } from './host-suite.js';
import { processHost } from './process-host.js';

describe('embedded in Fastify, a catch-all route with reply.hijack()', () => {
  embeddingSuite(processHost('node', 'fastify.ts'));
});
