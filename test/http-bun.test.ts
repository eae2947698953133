/** The HTTP conformance suite against the standalone server on a real Bun process. */
import { describeHttpConformance } from './http-conformance.js';
import { useCliServer } from './fixtures/runtime.js';
import { conformanceSeed } from './fixtures/seeds.js';

const server = useCliServer('bun', conformanceSeed());

describeHttpConformance({
  baseUrl: () => server.url,
  // Bun's HTTP parser answers these itself with a bare status line; Bun.serve has no hook to answer them in JSON.
  runtimeAnswers: {
    'request line with a raw NUL byte': 505,
    'request line longer than 64 KiB': 431,
    'header longer than 64 KiB': 431,
    'header with a control character': 400,
    'garbage instead of a request line': 400,
  },
});
