/**
 * Checks HTTP answers against the OpenAPI document the server serves: the
 * status is documented for the operation (method and path template, below
 * the server's base path), the content type is documented, the body
 * validates against the documented schema (Ajv, JSON Schema 2020-12, formats
 * from ajv-formats), and every documented required header is there and
 * matches its schema. HEAD answers must have no body and the content type
 * the GET answer documents.
 *
 * Answers no operation can claim are held to what the document says of them:
 * an unknown path is the `NotFound` response; a request whose target could not
 * even be read (an adapter's or parser's answer) must be an answer every
 * operation documents; another method on a known path must be the 405 of its
 * operations.
 */
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { send, type RecordedExchange } from './http-client.js';
import { MALFORMED, type MalformedCase } from '../suites/http-conformance.js';

type Json = Record<string, any>;

const DOCUMENT_ID = 'openapi.json';
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** One answer to check (what `recordResponses()` records, or an in-process `Response` read the same way). */
export type Exchange = Pick<RecordedExchange, 'method' | 'target' | 'status' | 'headers' | 'body'>;

/** A documented response, with the JSON pointer it was found at (after following `$ref`s). */
interface Documented {
  where: string;
  pointer: string;
  response: Json;
  /** Where the media types of a HEAD answer are documented: the GET response of the same status. */
  mediaFrom?: { pointer: string; response: Json };
}

interface PathMatch {
  template: string;
  item: Json;
}

export class OpenApiValidator {
  readonly #document: Json;
  readonly #ajv: Ajv2020;
  readonly #compiled = new Map<string, ValidateFunction>();
  readonly #basePath: string;

  constructor(document: Json) {
    this.#document = document;
    this.#ajv = new Ajv2020({ allErrors: true });
    addFormats(this.#ajv);
    // The document's own top-level fields are not JSON Schema keywords; declared as such so
    // that schemas inside it can be referenced by pointer without turning strict mode off.
    for (const key of Object.keys(document)) this.#ajv.addKeyword(key);
    this.#ajv.addSchema(document, DOCUMENT_ID);
    const server = (document.servers as { url: string }[] | undefined)?.[0]?.url ?? '/';
    this.#basePath = new URL(server, 'http://x').pathname.replace(/\/+$/, '');
  }

  /** The problems of one answer; empty when it is exactly as documented. */
  check(exchange: Exchange): string[] {
    if (exchange.status === 0) return ['no answer: the connection closed without a status line'];
    const found = this.#documented(exchange);
    if (typeof found === 'string') return [found];
    return found.flatMap((documented) => this.#against(exchange, documented).map((problem) => `${documented.where}: ${problem}`));
  }

  /** The documented response(s) this answer must match, or why there is none. */
  #documented(exchange: Exchange): Documented[] | string {
    const status = String(exchange.status);
    const method = exchange.method.toLowerCase();
    const path = this.#path(exchange.target);
    const match = path === undefined ? undefined : this.#match(path);
    if (!match) {
      if (path !== undefined && status === '404') return [this.#notFound(method)];
      // Nothing names an operation (an unreadable request, or one refused before routing): the
      // answer must be one that every operation documents, and match each of them.
      const asMethod = method === 'head' ? 'head' : 'get';
      const everywhere = this.#operations()
        .filter(([, opMethod]) => opMethod === asMethod)
        .map(([template]) => this.#response(template, asMethod, status));
      const missing = everywhere.find((d) => typeof d === 'string');
      return missing !== undefined ? `${status} answered to ${exchange.method} ${exchange.target} (no operation), but ${missing}` : (everywhere as Documented[]);
    }
    const { template, item } = match;
    if (item[method]) {
      const documented = this.#response(template, method, status);
      return typeof documented === 'string' ? documented : [documented];
    }
    if (status !== '405') return `${exchange.method} is no operation of ${template}, yet the answer is ${status}, not 405`;
    // Another method (which may carry a body, unlike HEAD): the 405 every operation of the path lists.
    const operations = METHODS.filter((m) => item[m] && m !== 'head').map((m) => this.#response(template, m, status));
    const missing = operations.find((d) => typeof d === 'string');
    return missing !== undefined ? (missing as string) : (operations as Documented[]);
  }

  /** The request path below the base path, dot segments resolved as the Fetch API does; undefined if there is none. */
  #path(target: string): string | undefined {
    if (!target.startsWith('/') && !/^https?:\/\//i.test(target)) return undefined;
    let pathname: string;
    try {
      pathname = new URL(target, 'http://x').pathname;
    } catch {
      return undefined;
    }
    if (!this.#basePath) return pathname;
    if (pathname !== this.#basePath && !pathname.startsWith(`${this.#basePath}/`)) return '';
    return pathname.slice(this.#basePath.length) || '/';
  }

  /** The path item of a path: an exact path, a template (a `{name}` is one non-empty segment), or one that takes a trailing slash. */
  #match(path: string): PathMatch | undefined {
    const paths = this.#document.paths as Record<string, Json>;
    if (paths[path] && !path.includes('{')) return { template: path, item: paths[path] };
    for (const [template, item] of Object.entries(paths)) {
      if (!template.includes('{')) continue;
      const pattern = new RegExp(`^${template.split(/\{[^}]+\}/).map(escapeRegExp).join('[^/]+')}$`);
      if (pattern.test(path)) return { template, item };
    }
    const trimmed = path.endsWith('/') ? path.slice(0, -1) : undefined;
    if (trimmed && paths[trimmed]?.['x-trailing-slash'] === true) return { template: trimmed, item: paths[trimmed] };
    return undefined;
  }

  #operations(): [string, string][] {
    return Object.entries(this.#document.paths as Record<string, Json>).flatMap(([template, item]) =>
      METHODS.filter((m) => item[m]).map((m): [string, string] => [template, m]),
    );
  }

  #response(template: string, method: string, status: string): Documented | string {
    const operation = ['paths', template, method];
    const responses = this.#at(pointer(...operation, 'responses'));
    const key = [status, `${status[0]}XX`, 'default'].find((k) => responses?.[k] !== undefined);
    const where = `${method.toUpperCase()} ${template} ${status}`;
    if (key === undefined) return `${where} is not documented`;
    const [at, response] = this.#resolve(pointer(...operation, 'responses', key));
    const documented: Documented = { where, pointer: at, response };
    if (method === 'head') {
      const get = this.#at(pointer('paths', template, 'get', 'responses', key));
      if (get !== undefined) {
        const [getAt, getResponse] = this.#resolve(pointer('paths', template, 'get', 'responses', key));
        documented.mediaFrom = { pointer: getAt, response: getResponse };
      }
    }
    return documented;
  }

  #notFound(method: string): Documented {
    const [at, response] = this.#resolve(pointer('components', 'responses', 'NotFound'));
    return method === 'head'
      ? { where: 'HEAD (unknown path) 404', pointer: at, response: { ...response, content: undefined }, mediaFrom: { pointer: at, response } }
      : { where: `${method.toUpperCase()} (unknown path) 404`, pointer: at, response };
  }

  #against(exchange: Exchange, documented: Documented): string[] {
    const problems: string[] = [];
    const { response } = documented;
    for (const name of Object.keys(response.headers ?? {})) {
      const [at, header] = this.#resolve(`${documented.pointer}/headers/${escape(name)}`);
      const value = exchange.headers[name.toLowerCase()];
      if (value === undefined) {
        if (header.required) problems.push(`required header ${name} is missing`);
        continue;
      }
      const text = Array.isArray(value) ? value.join(', ') : value;
      if (header.schema && !this.#validate(`${at}/schema`, text)) problems.push(`header ${name}: ${JSON.stringify(text)} ${this.#errors(`${at}/schema`)}`);
    }
    const type = String(exchange.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (exchange.method.toUpperCase() === 'HEAD') {
      if (exchange.body !== '') problems.push(`a HEAD answer with a body (${exchange.body.length} characters)`);
      const media = documented.mediaFrom?.response.content;
      if (media && !(type in media)) problems.push(`content type ${JSON.stringify(type)} is not the documented ${Object.keys(media).join(', ')}`);
      return problems;
    }
    const content = response.content as Json | undefined;
    if (!content) {
      if (exchange.body !== '') problems.push('a body where none is documented');
      return problems;
    }
    if (!(type in content)) return [...problems, `content type ${JSON.stringify(type)} is not the documented ${Object.keys(content).join(', ')}`];
    let body: unknown;
    try {
      body = JSON.parse(exchange.body);
    } catch {
      return [...problems, `the body is not JSON: ${JSON.stringify(exchange.body.slice(0, 200))}`];
    }
    const schema = `${documented.pointer}/content/${escape(type)}/schema`;
    if (!this.#validate(schema, body)) problems.push(`the body ${JSON.stringify(exchange.body.slice(0, 300))} ${this.#errors(schema)}`);
    return problems;
  }

  #validate(schemaPointer: string, value: unknown): boolean {
    let validate = this.#compiled.get(schemaPointer);
    if (!validate) {
      validate = this.#ajv.compile({ $ref: `${DOCUMENT_ID}#${schemaPointer.split('/').map(encodeURIComponent).join('/')}` });
      this.#compiled.set(schemaPointer, validate);
    }
    return validate(value) as boolean;
  }

  #errors(schemaPointer: string): string {
    return this.#ajv.errorsText(this.#compiled.get(schemaPointer)!.errors, { dataVar: 'body' });
  }

  #at(at: string): Json | undefined {
    let node: any = this.#document;
    for (const part of at.split('/').slice(1)) node = node?.[part.replaceAll('~1', '/').replaceAll('~0', '~')];
    return node;
  }

  /** Follows `$ref`s inside the document: the final pointer and object. */
  #resolve(at: string): [string, Json] {
    let node = this.#at(at);
    for (let hops = 0; node && typeof node.$ref === 'string' && hops < 10; hops++) {
      at = (node.$ref as string).slice(1);
      node = this.#at(at);
    }
    if (!node) throw new Error(`OpenAPI document: nothing at #${at}`);
    return [at, node];
  }
}

function escape(part: string): string {
  return part.replaceAll('~', '~0').replaceAll('/', '~1');
}

function pointer(...parts: string[]): string {
  return parts.map((part) => `/${escape(part)}`).join('');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The headers of a fetch `Response` as node:http gives them (lower-case names), and its body. */
export async function exchangeOf(request: Request, response: Response): Promise<Exchange> {
  const url = new URL(request.url);
  return {
    method: request.method,
    target: url.pathname + url.search,
    status: response.status,
    headers: Object.fromEntries(response.headers),
    body: await response.text(),
  };
}

export interface RecordedCheckOptions {
  /** Which runtime serves (for the summary line). */
  runtime: string;
  baseUrl: () => string;
  /** What `recordResponses()` returned before the suite ran. */
  recorded: readonly RecordedExchange[];
  /** The conformance suite's `runtimeAnswers`: raw requests this runtime's HTTP layer answers itself, bare and without JSON. */
  runtimeAnswers?: Partial<Record<MalformedCase, number>>;
}

/**
 * A last test for a runtime suite: every answer recorded while the suite ran
 * is checked against the `/openapi.json` the server serves. Raw malformed
 * requests the runtime answers itself (before the API runs) are left out.
 */
export function describeRecordedAnswersMatchOpenApi(options: RecordedCheckOptions): void {
  describe('every answer above, against /openapi.json', () => {
    it('is documented for its operation, with its content type, body schema and required headers', async () => {
      const answers = [...options.recorded];
      const { host } = new URL(options.baseUrl());
      const runtimeCase = new Map<string, number>();
      for (const [name, status] of Object.entries(options.runtimeAnswers ?? {})) runtimeCase.set(MALFORMED[name as MalformedCase](host), status!);
      const document = JSON.parse((await send(`${options.baseUrl()}/openapi.json`)).body);
      const validator = new OpenApiValidator(document);
      const problems: string[] = [];
      let excluded = 0;
      const statuses = new Map<number, number>();
      for (const answer of answers) {
        if (answer.raw !== undefined && runtimeCase.get(answer.raw) === answer.status) {
          excluded++;
          continue;
        }
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        for (const problem of validator.check(answer)) problems.push(`${answer.method} ${answer.target.slice(0, 120)} -> ${answer.status}: ${problem}`);
      }
      const tally = [...statuses].sort(([a], [b]) => a - b).map(([status, n]) => `${status}: ${n}`).join(', ');
      console.info(`[openapi] ${options.runtime}: ${answers.length - excluded} answers validated against /openapi.json (${tally}); ${excluded} answered by the runtime itself left out`);
      expect(problems).toEqual([]);
      // The whole suite ran, not a filtered few tests.
      expect(answers.length - excluded).toBeGreaterThan(0);
    });
  });
}
