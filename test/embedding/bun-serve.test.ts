/** The embedding recipe for Bun.serve (docs/embedding.md), through a real server of that host. */
import { describe } from 'vitest';
import { embeddingSuite } from './host-suite.js';
import { processHost } from './process-host.js';

describe('embedded in Bun.serve', () => {
  embeddingSuite(processHost('bun', 'bun-serve.ts'));
});
