/** The embedding recipe for Express 5, app.use(prefix, createRequestListener(api)) (docs/embedding.md), through a real server of that host. */
import { describe } from 'vitest';
import { embeddingSuite } from './host-suite.js';
import { processHost } from './process-host.js';

describe('embedded in Express 5, app.use(prefix, createRequestListener(api))', () => {
  embeddingSuite(processHost('node', 'express5.ts'));
});
