/** The embedding recipe for Fastify, a catch-all route with reply.hijack() (docs/embedding.md), through a real server of that host. */
import { describe } from 'vitest';
import { embeddingSuite } from './host-suite.js';
import { processHost } from './process-host.js';
import { NODE_PATHS } from '../support/node-paths.js';

// On both paths of the Node adapter (test/support/node-paths.ts).
for (const path of NODE_PATHS) {
  describe(`embedded in Fastify, a catch-all route with reply.hijack(), ${path.name}`, () => {
    embeddingSuite(processHost('node', 'fastify.ts', path.env));
  });
}
