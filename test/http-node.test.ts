/** The HTTP conformance suite against the standalone server on a real Node process, then every answer it got against /openapi.json. */
import { describeHttpConformance } from './http-conformance.js';
import { recordResponses } from './fixtures/http-client.js';
import { useCliServer } from './fixtures/runtime.js';
import { conformanceSeed } from './fixtures/seeds.js';
import { describeRecordedAnswersMatchOpenApi } from './support/openapi-validator.js';

const server = useCliServer('node', conformanceSeed());
const recorded = recordResponses();

describeHttpConformance({ baseUrl: () => server.url });
describeRecordedAnswersMatchOpenApi({ runtime: 'node', baseUrl: () => server.url, recorded });
