/**
 * `GET /docs`: an interactive reference of the OpenAPI document (Swagger UI),
 * and `GET /docs/{version}/{file}`, its files. Not part of the API, so not in
 * the OpenAPI document: these routes sit outside the table (src/routes/table.ts)
 * and `createMerchantApi` adds them unless `docsPage: false`.
 *
 * Everything comes from this server: Swagger UI's files from the optional
 * package `swagger-ui-dist` (or the embedder's `docsAssets`), the page's own
 * from src/routes/docs/. The Content-Security-Policy allows nothing else, no
 * inline script and no validator; the files carry a version in their path and
 * are cached for a year.
 */
import { MerchantApiError } from '../../errors.js';
import { reply, type Reply } from '../../http/responses.js';
import { response } from '../../openapi/fragments.js';
import type { OperationDoc } from '../../openapi/operation.js';
import type { Route } from '../route.js';
import type { DocsAssets, SwaggerUiFile } from './assets.js';
import { INIT_SCRIPT, PAGE_CSS } from './page-script.js';
import { SIGNING_SCRIPT } from './signing-script.js';

const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  // React sets style properties from script; Swagger UI's icons are data: URLs.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';
const IMMUTABLE = 'public, max-age=31536000, immutable';

/** The page's own files, and the content type of every file. */
const OWN: Record<string, { type: string; text: string }> = {
  'signing.js': { type: JS, text: SIGNING_SCRIPT },
  'init.js': { type: JS, text: INIT_SCRIPT },
  'page.css': { type: CSS, text: PAGE_CSS },
};
const SWAGGER: Record<SwaggerUiFile, string> = { 'swagger-ui-bundle.js': JS, 'swagger-ui.css': CSS };

/** FNV-1a of the page's own files: their change is a new path, like a new Swagger UI. */
function fingerprint(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return (hash >>> 0).toString(16).padStart(8, '0');
}
const OWN_FINGERPRINT = fingerprint(Object.values(OWN).map((file) => file.text).join('\n'));

const NO_SWAGGER_UI = new MerchantApiError('not_found', 'The API reference page needs the optional package swagger-ui-dist: install it beside merchant-api (npm install swagger-ui-dist), or turn the page off (DOCS_PAGE=false).');
const NO_SUCH_FILE = new MerchantApiError('not_found', 'No such file of the API reference page.');

function page(version: string): string {
  const at = `docs/${version}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Merchant API reference</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${at}/swagger-ui.css">
<link rel="stylesheet" href="${at}/page.css">
<script src="${at}/swagger-ui-bundle.js" defer></script>
<script src="${at}/signing.js" defer></script>
<script src="${at}/init.js" defer></script>
</head>
<body>
<p class="docs-note">To try <code>/validatesignature</code>, open it: its signing form takes a merchant id and one of its API keys, and the page signs each call (cp, ts, salt, hmac) itself; the key never leaves the page. The other operations take the merchant id and key through "Authorize". Every answer carries <code>Cache-Control</code>, and every answer of the API itself (not one a runtime adapter gives before it runs) <code>X-Request-Id</code>; an error names its other headers.</p>
<section class="signing" id="signing" aria-label="Signing" hidden>
<p>Type a merchant id and one of its API keys: the page signs the call (a fresh ts and salt, the hmac), and the key is never sent.</p>
<form id="signing-form" autocomplete="off">
<label>Merchant id <input id="signing-merchant" name="merchant" type="text" spellcheck="false"></label>
<label>API key <input id="signing-key" name="key" type="password"></label>
</form>
<p id="signing-status" class="signing-status" role="status" aria-live="polite"></p>
</section>
<div id="swagger-ui"></div>
</body>
</html>
`;
}

const PAGE_DOC: OperationDoc = { tag: 'Service', description: 'The API reference page (not in the document).', readsQuery: false, responses: { '200': response('HTML.', {}) } };

/** The two routes of the page, reading Swagger UI's files from `load` at the first request (once). */
export function docsRoutes(load: () => Promise<DocsAssets>): Route[] {
  let assets: Promise<{ version: string; files: Map<string, Promise<string>>; source: DocsAssets } | undefined> | undefined;
  const loaded = () =>
    (assets ??= load().then(
      (source) => ({ version: `${source.version}-${OWN_FINGERPRINT}`, files: new Map(), source }),
      () => undefined,
    ));

  const docsPage = async (): Promise<Reply> => {
    const found = await loaded();
    if (!found) throw NO_SWAGGER_UI;
    return reply(200, page(found.version), { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache', 'content-security-policy': CSP, 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' });
  };

  const docsFile = async (_ctx: unknown, input: { params: Record<string, string> }): Promise<Reply> => {
    const found = await loaded();
    if (!found) throw NO_SWAGGER_UI;
    const { version, file } = input.params as { version: string; file: string };
    if (version !== found.version) throw NO_SUCH_FILE;
    const headers = (type: string) => ({ 'content-type': type, 'cache-control': IMMUTABLE, 'x-content-type-options': 'nosniff' });
    const own = Object.hasOwn(OWN, file) ? OWN[file] : undefined;
    if (own) return reply(200, own.text, headers(own.type));
    if (!Object.hasOwn(SWAGGER, file)) throw NO_SUCH_FILE;
    let text = found.files.get(file);
    if (text === undefined) {
      text = found.source.read(file as SwaggerUiFile);
      found.files.set(file, text);
    }
    try {
      return reply(200, await text, headers(SWAGGER[file as SwaggerUiFile]));
    } catch {
      found.files.delete(file);
      throw NO_SWAGGER_UI;
    }
  };

  return [
    { id: 'docsPage', method: 'GET', pattern: '/docs', auth: 'none', errorShape: 'envelope', summary: 'The API reference page', handle: docsPage, openapi: PAGE_DOC },
    { id: 'docsFile', method: 'GET', pattern: '/docs/{version}/{file}', auth: 'none', errorShape: 'envelope', summary: 'A file of the API reference page', handle: docsFile, openapi: PAGE_DOC },
  ];
}
