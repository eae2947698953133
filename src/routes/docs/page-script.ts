/**
 * The page's own files, served beside Swagger UI's under `/docs/<version>/`:
 * the initializer (a file, since the Content-Security-Policy allows no inline
 * script) and the page's style. Plain ES2017 text.
 *
 * The initializer shows the OpenAPI document, not changed for tools
 * (`/openapi.json` stays whole), in a form made for reading
 * (docs/embedding.md#the-api-reference-page):
 * - each HEAD twin is folded into its GET (a line of the GET's description):
 *   listed apart they doubled the list and said the same thing twice;
 * - every answer but a success is one paragraph: its description, its body on
 *   one line with its error codes, and the names of its headers. Drawn whole
 *   (an example, a media type and a table of headers each) an opened operation
 *   was 3,400-9,100 px tall; the full schemas stay under "Schemas";
 * - the signing form sits in the `/validatesignature` operation, above its
 *   parameters, and says what it signed; a call sent without a key and
 *   without an hmac says, there, to use it.
 */
export const INIT_SCRIPT = String.raw`'use strict';
(function () {
  var here = document.currentScript.src;
  var specUrl = new URL('../../openapi.json', here).toString();
  var signing = document.getElementById('signing');
  var merchant = document.getElementById('signing-merchant');
  var key = document.getElementById('signing-key');
  var status = document.getElementById('signing-status');
  document.getElementById('signing-form').addEventListener('submit', function (event) { event.preventDefault(); });

  function freshSalt() {
    var bytes = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, function (b) { return (b < 16 ? '0' : '') + b.toString(16); }).join('');
  }

  function say(text, hint) {
    status.textContent = text;
    status.className = hint ? 'signing-status signing-hint' : 'signing-status';
  }

  // Signs a call to /validatesignature in the page when a key is typed: the key is never sent.
  function signRequest(request) {
    var url = new URL(request.url, location.href);
    if (!/\/validatesignature$/.test(url.pathname)) return request;
    if (key.value === '') {
      // Signed by hand (an hmac typed in) is the user's business; anything else would only be refused.
      if (!url.searchParams.get('hmac')) {
        say('This call is not signed: type a merchant id and one of its API keys in this signing form, then Execute again (or fill cp, ts, salt and hmac yourself).', true);
        merchant.value === '' ? merchant.focus() : key.focus();
      }
      return request;
    }
    var id = merchant.value || url.searchParams.get('cp') || '';
    request.url = merchantApiSigning.signUrl(request.method || 'GET', url.toString(), id, key.value, Math.floor(Date.now() / 1000), freshSalt());
    var signed = new URL(request.url).searchParams;
    say('Signed: cp=' + signed.get('cp') + ', ts=' + signed.get('ts') + ', salt=' + signed.get('salt') + ', hmac=' + signed.get('hmac') + ' (see the Request URL below).', false);
    return request;
  }

  // The signing form fills cp, ts, salt and hmac: the page does not ask for them.
  function relaxSignedParameters(spec) {
    var operation = spec.paths && spec.paths['/validatesignature'] && spec.paths['/validatesignature'].get;
    (operation && operation.parameters || []).forEach(function (parameter) {
      if (['cp', 'ts', 'salt', 'hmac'].indexOf(parameter.name) < 0) return;
      parameter.required = false;
      parameter.description = 'Filled by the signing form of this operation (above) when it has a key. ' + parameter.description;
    });
    return spec;
  }

  // A HEAD twin becomes a line of its GET: same answers, no body.
  function foldHeadTwins(spec) {
    Object.keys(spec.paths || {}).forEach(function (path) {
      var item = spec.paths[path];
      if (!item.get || !item.head) return;
      item.get.summary += ' (also HEAD)';
      item.get.description = (item.get.description || '') + '\n\n**HEAD** ' + path + ': ' + item.head.description;
      delete item.head;
    });
    return spec;
  }

  function lookup(spec, reference) {
    return reference.replace(/^#\//, '').split('/').reduce(function (node, part) { return node && node[part.replace(/~1/g, '/').replace(/~0/g, '~')]; }, spec);
  }

  function isObject(value) { return value !== null && typeof value === 'object' && !Array.isArray(value); }

  function deepMerge(target, source) {
    Object.keys(source).forEach(function (name) {
      if (isObject(target[name]) && isObject(source[name])) target[name] = deepMerge(Object.assign({}, target[name]), source[name]);
      else target[name] = source[name];
    });
    return target;
  }

  // A schema with its $ref followed and its allOf merged in: enough to write one example.
  function flat(spec, schema, depth) {
    if (depth > 8 || !isObject(schema)) return {};
    if (schema.$ref) return flat(spec, deepMerge(Object.assign({}, lookup(spec, schema.$ref)), Object.assign({}, schema, { $ref: undefined })), depth + 1);
    if (!schema.allOf) return schema;
    var rest = Object.assign({}, schema);
    delete rest.allOf;
    var merged = schema.allOf.reduce(function (out, part) { return deepMerge(out, flat(spec, part, depth + 1)); }, {});
    return deepMerge(merged, rest);
  }

  // One short example of a schema: required properties only, the first allowed value.
  function example(spec, schema, depth) {
    var s = flat(spec, schema, depth);
    if (depth > 8) return null;
    if ('const' in s) return s.const;
    if (s.enum) return s.enum[0];
    if (s.properties || s.type === 'object') {
      var out = {};
      (s.required || Object.keys(s.properties || {})).forEach(function (name) { out[name] = example(spec, (s.properties || {})[name], depth + 1); });
      return out;
    }
    if (s.type === 'array') return s.maxItems === 0 ? [] : [example(spec, s.items, depth + 1)];
    if (s.type === 'integer' || s.type === 'number') return 0;
    if (s.type === 'boolean') return true;
    return '…';
  }

  // The error codes a body may carry, where the schema names them.
  function codes(spec, schema) {
    var s = flat(spec, schema, 0);
    var items = s.properties && s.properties.errors && flat(spec, s.properties.errors, 0).items;
    var code = items && flat(spec, items, 0).properties && flat(spec, items, 0).properties.code;
    return code ? flat(spec, code, 0).enum || [] : [];
  }

  function bodyInWords(spec, schema) {
    var alternatives = schema.oneOf || schema.anyOf || [schema];
    return alternatives.map(function (alternative) {
      var named = codes(spec, alternative);
      var line = '\x60' + JSON.stringify(example(spec, alternative, 0)) + '\x60';
      // One code is in the example already; several are listed.
      return named.length > 1 ? line + ', code one of ' + named.map(function (c) { return '\x60' + c + '\x60'; }).join(', ') : line;
    }).join(', or ');
  }

  // Every answer but a success as one paragraph: what it means, its body on one line, its headers by name.
  var EVERY_ANSWER = ['Cache-Control', 'X-Request-Id'];

  function compactAnswer(spec, answer) {
    var resolved = answer.$ref ? lookup(spec, answer.$ref) : answer;
    var media = resolved.content && resolved.content['application/json'];
    var parts = [];
    if (media && media.schema) parts.push('Body: ' + bodyInWords(spec, media.schema) + '.');
    else parts.push('No body.');
    // Cache-Control and X-Request-Id are on every answer (said at the top of the page): the others are named.
    var headers = Object.keys(resolved.headers || {}).filter(function (name) { return EVERY_ANSWER.indexOf(name) < 0; });
    if (headers.length) parts.push('Headers: ' + headers.join(', ') + '.');
    return { description: resolved.description + '\n\n' + parts.join(' ') };
  }

  // A success keeps its example and its table of headers, less the two every answer has.
  function withoutEveryAnswerHeaders(spec, answer) {
    var resolved = answer.$ref ? lookup(spec, answer.$ref) : answer;
    var headers = {};
    Object.keys(resolved.headers || {}).forEach(function (name) { if (EVERY_ANSWER.indexOf(name) < 0) headers[name] = resolved.headers[name]; });
    return Object.assign({}, resolved, { headers: headers });
  }

  function compactAnswers(spec) {
    Object.keys(spec.paths || {}).forEach(function (path) {
      var item = spec.paths[path];
      ['get', 'head', 'post', 'put', 'patch', 'delete'].forEach(function (method) {
        var operation = item[method];
        if (!operation || !operation.responses) return;
        Object.keys(operation.responses).forEach(function (code) {
          if (code.charAt(0) !== '2') operation.responses[code] = compactAnswer(spec, operation.responses[code]);
          else operation.responses[code] = withoutEveryAnswerHeaders(spec, operation.responses[code]);
        });
      });
    });
    return spec;
  }

  // The signing form, drawn into the /validatesignature operation above its parameters; kept (and
  // so its fields) while the operation is closed, to be put back when it opens.
  function SigningFormPlugin(system) {
    var React = system.React;
    function attach(slot) { if (slot && signing.parentNode !== slot) { slot.appendChild(signing); signing.hidden = false; } }
    return {
      wrapComponents: {
        parameters: function (Original) {
          return function (props) {
            var pathMethod = props.pathMethod || [];
            var drawn = React.createElement(Original, props);
            if (pathMethod[0] !== '/validatesignature' || pathMethod[1] !== 'get') return drawn;
            return React.createElement('div', null, React.createElement('div', { className: 'signing-slot', ref: attach }), drawn);
          };
        }
      }
    };
  }

  fetch(specUrl, { headers: { accept: 'application/json' } })
    .then(function (response) { return response.json(); })
    .then(function (spec) {
      window.ui = SwaggerUIBundle({
        spec: compactAnswers(foldHeadTwins(relaxSignedParameters(spec))),
        dom_id: '#swagger-ui',
        presets: [SwaggerUIBundle.presets.apis],
        plugins: [SigningFormPlugin],
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

export const PAGE_CSS = `.signing { margin: 0 0 12px; padding: 12px 20px; font-family: sans-serif; background: rgba(97, 175, 254, 0.1); border-radius: 4px; }
.signing form { display: flex; gap: 16px; flex-wrap: wrap; align-items: end; }
.signing label { display: flex; flex-direction: column; font-size: 14px; gap: 4px; }
.signing label { font-weight: normal; color: #3b4151; }
/* After swagger-ui.css, as specific as its input rules: the two fields look alike, focused or not. */
.swagger-ui .signing input { margin: 0; padding: 6px 8px; min-width: 240px; border: 1px solid #d9d9d9; border-radius: 4px; }
.signing p { font-size: 14px; margin: 0 0 8px; }
.signing .signing-status { margin: 8px 0 0; font-family: monospace; font-size: 13px; overflow-wrap: anywhere; }
.signing .signing-status:empty { display: none; }
.signing .signing-hint { font-family: sans-serif; font-weight: bold; color: #a41e22; }
.swagger-ui .response-col_links, .swagger-ui .responses-table .col_header.response-col_links { display: none; }
.swagger-ui tr.response .response-col_description .markdown p:last-child { margin-bottom: 0; }
/* Before "Try it out" a parameter's field is a disabled box holding its name: hidden until it can be typed in. */
.swagger-ui .parameters-col_description input[disabled], .swagger-ui .parameters-col_description select[disabled] { display: none; }
/* Every answer is JSON: the media type chooser of each success has nothing to choose. */
.swagger-ui .responses-inner .response-control-media-type { display: none; }
.docs-note { max-width: 1460px; margin: 0 auto; padding: 16px 20px 0; font-family: sans-serif; font-size: 14px; }
`;
