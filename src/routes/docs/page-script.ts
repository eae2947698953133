/**
 * The page's own files, served beside Swagger UI's under `/docs/<version>/`:
 * the initializer (a file, since the Content-Security-Policy allows no inline
 * script) and the style of the signing form. Plain ES2017 text.
 */
export const INIT_SCRIPT = String.raw`'use strict';
(function () {
  var here = document.currentScript.src;
  var specUrl = new URL('../../openapi.json', here).toString();
  var merchant = document.getElementById('signing-merchant');
  var key = document.getElementById('signing-key');
  document.getElementById('signing-form').addEventListener('submit', function (event) { event.preventDefault(); });

  function freshSalt() {
    var bytes = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, function (b) { return (b < 16 ? '0' : '') + b.toString(16); }).join('');
  }

  // Signs a call to /validatesignature in the page when a key is typed: the key is never sent.
  function signRequest(request) {
    var url = new URL(request.url, location.href);
    if (!/\/validatesignature$/.test(url.pathname) || key.value === '') return request;
    var id = merchant.value || url.searchParams.get('cp') || '';
    request.url = merchantApiSigning.signUrl(request.method || 'GET', url.toString(), id, key.value, Math.floor(Date.now() / 1000), freshSalt());
    return request;
  }

  // The signing form fills cp, ts, salt and hmac: the page does not ask for them.
  function relaxSignedParameters(spec) {
    var operation = spec.paths && spec.paths['/validatesignature'] && spec.paths['/validatesignature'].get;
    (operation && operation.parameters || []).forEach(function (parameter) {
      if (['cp', 'ts', 'salt', 'hmac'].indexOf(parameter.name) < 0) return;
      parameter.required = false;
      parameter.description = 'Filled by the signing form at the top of this page when it has a key. ' + parameter.description;
    });
    return spec;
  }

  fetch(specUrl, { headers: { accept: 'application/json' } })
    .then(function (response) { return response.json(); })
    .then(function (spec) {
      window.ui = SwaggerUIBundle({
        spec: relaxSignedParameters(spec),
        dom_id: '#swagger-ui',
        presets: [SwaggerUIBundle.presets.apis],
        layout: 'BaseLayout',
        validatorUrl: null,
        deepLinking: false,
        queryConfigEnabled: false,
        supportedSubmitMethods: ['get', 'head'],
        requestInterceptor: signRequest
      });
    });
})();
`;

export const PAGE_CSS = `.signing { max-width: 1460px; margin: 0 auto; padding: 16px 20px 0; font-family: sans-serif; }
.signing form { display: flex; gap: 16px; flex-wrap: wrap; align-items: end; }
.signing label { display: flex; flex-direction: column; font-size: 14px; gap: 4px; }
.signing input { padding: 6px 8px; min-width: 240px; }
.signing p { font-size: 14px; margin: 0 0 8px; }
`;
