/** The embedding recipe for Express 5, app.all(prefix/*splat, createRequestListener(api)) (docs/embedding.md#express), through a real server of that host. */
import { describe } from 'vitest';
import { embeddingSuite } from './host-suite.js';
import { processHost } from './process-host.js';
import { NODE_PATHS } from '../support/node-paths.js';

// On both paths of the Node adapter (test/support/node-paths.ts).
for (const path of NODE_PATHS) {
  describe(`embedded in Express 5, app.all(prefix/*splat, createRequestListener(api)), ${path.name}`, () => {
    embeddingSuite(processHost('node', 'express5-route.ts', path.env));
  });
}
