/** The HTTP conformance suite against the standalone server on a real Bun process, then every answer it got against /openapi.json. */
import { describeHttpConformance, type ConformanceOptions } from '../suites/http-conformance.js';
import { recordResponses } from '../support/http-client.js';
import { useCliServer } from '../support/processes.js';
import { conformanceSeed } from '../support/seeds.js';
import { describeRecordedAnswersMatchOpenApi } from '../support/openapi-validator.js';
import { describeObservability } from '../suites/http-observability.js';

// Metrics on, and every log line written, for the observability checks at the end.
const server = useCliServer('bun', conformanceSeed(), { METRICS_PORT: '0', LOG_LEVEL: 'debug' });
const recorded = recordResponses();

// Bun's HTTP parser answers these itself with a bare status line; Bun.serve has no hook to answer them in JSON.
const runtimeAnswers: ConformanceOptions['runtimeAnswers'] = {
  'request line with a raw NUL byte': 505,
  'request line longer than 64 KiB': 431,
  'header longer than 64 KiB': 431,
  'header with a control character': 400,
  'garbage instead of a request line': 400,
};

// Bun resolves dot segments (plain and percent-encoded) before Bun.serve's fetch sees the request.
describeHttpConformance({ baseUrl: () => server.url, runtimeAnswers, resolvesDotSegments: true });
describeRecordedAnswersMatchOpenApi({ runtime: 'bun', baseUrl: () => server.url, recorded, runtimeAnswers });
describeObservability({ server: () => server.process, recorded });
