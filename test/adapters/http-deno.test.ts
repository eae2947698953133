/** The HTTP conformance suite against the standalone server on a real Deno process, then every answer it got against /openapi.json. */
import { describeHttpConformance, type ConformanceOptions } from '../suites/http-conformance.js';
import { recordResponses } from '../support/http-client.js';
import { useCliServer } from '../support/processes.js';
import { conformanceSeed } from '../support/seeds.js';
import { describeRecordedAnswersMatchOpenApi } from '../support/openapi-validator.js';
import { describeObservability } from '../suites/http-observability.js';

// Metrics on, and every log line written, for the observability checks at the end.
const server = useCliServer('deno', conformanceSeed(), { METRICS_PORT: '0', LOG_LEVEL: 'debug' });
const recorded = recordResponses();

// Deno's HTTP parser (hyper) answers these itself with a bare status line; Deno.serve has no hook to answer them in JSON.
const runtimeAnswers: ConformanceOptions['runtimeAnswers'] = {
  'query with raw invalid UTF-8 bytes': 400,
  'request line with a raw NUL byte': 400,
  'request line longer than 64 KiB': 400,
  'header longer than 64 KiB': 400,
  'header with a control character': 400,
  'garbage instead of a request line': 400,
  'two Host header lines': 400,
};

describeHttpConformance({ baseUrl: () => server.url, runtimeAnswers });
describeRecordedAnswersMatchOpenApi({ runtime: 'deno', baseUrl: () => server.url, recorded, runtimeAnswers });
describeObservability({ server: () => server.process, recorded });
