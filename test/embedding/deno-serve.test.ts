/** The embedding recipe for Deno.serve (docs/embedding.md), through a real server of that host. */
import { describe } from 'vitest';
import { embeddingSuite } from './host-suite.js';
import { processHost } from './process-host.js';

describe('embedded in Deno.serve', () => {
  embeddingSuite(processHost('deno', 'deno-serve.ts'));
});
