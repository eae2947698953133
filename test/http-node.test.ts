/** The HTTP conformance suite against the standalone server on a real Node process. */
import { describeHttpConformance } from './http-conformance.js';
import { useCliServer } from './fixtures/runtime.js';
import { conformanceSeed } from './fixtures/seeds.js';

const server = useCliServer('node', conformanceSeed());

describeHttpConformance({ baseUrl: () => server.url });
