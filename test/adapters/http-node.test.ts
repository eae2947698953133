/**
 * The HTTP conformance suite against the standalone server on a real Node
 * process (the adapter's default direct path; http-node-fetch-objects.test.ts
 * runs the other), then every answer it got against /openapi.json.
 */
import { describeHttpConformance } from '../suites/http-conformance.js';
import { recordResponses } from '../support/http-client.js';
import { useCliServer } from '../support/processes.js';
import { conformanceSeed } from '../support/seeds.js';
import { describeRecordedAnswersMatchOpenApi } from '../support/openapi-validator.js';
import { describeObservability } from '../suites/http-observability.js';

// Metrics on, and every log line written, for the observability checks at the end.
const server = useCliServer('node', conformanceSeed(), { METRICS_PORT: '0', LOG_LEVEL: 'debug' });
const recorded = recordResponses();

describeHttpConformance({ baseUrl: () => server.url });
describeRecordedAnswersMatchOpenApi({ runtime: 'node', baseUrl: () => server.url, recorded });
describeObservability({ server: () => server.process, recorded });
