/** The embedding recipe for Express 4, app.all(prefix/*, createRequestListener(api)) (docs/embedding.md#express), through a real server of that host. */
import { describe } from 'vitest';
import { embeddingSuite } from './host-suite.js';
import { processHost } from './process-host.js';

describe('embedded in Express 4, app.all(prefix/*, createRequestListener(api))', () => {
  embeddingSuite(processHost('node', 'express4-route.ts'));
});
