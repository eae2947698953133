/**
 * The HTTP conformance suite against the standalone server on a real Node
 * process, its adapter on the path that builds a Fetch `Request` and
 * `Response` for every request (MERCHANT_API_FETCH_OBJECTS=1): the twin of
 * http-node.test.ts, which runs the default direct path, so that the two
 * paths give the same answers (adapters/node-direct.ts).
 */
import { describeHttpConformance } from '../suites/http-conformance.js';
import { recordResponses } from '../support/http-client.js';
import { useCliServer } from '../support/processes.js';
import { conformanceSeed } from '../support/seeds.js';
import { describeRecordedAnswersMatchOpenApi } from '../support/openapi-validator.js';
import { describeObservability } from '../suites/http-observability.js';

const server = useCliServer('node', conformanceSeed(), { METRICS_PORT: '0', LOG_LEVEL: 'debug', MERCHANT_API_FETCH_OBJECTS: '1' });
const recorded = recordResponses();

describeHttpConformance({ baseUrl: () => server.url });
describeRecordedAnswersMatchOpenApi({ runtime: 'node', baseUrl: () => server.url, recorded });
describeObservability({ server: () => server.process, recorded });
