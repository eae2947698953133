/**
 * The client's types cannot drift from the server's: openapi-typescript
 * generates types from the server's OpenAPI document (`openApiDocument('', ROUTES)`,
 * what GET /openapi.json serves), and tsc checks that each of the client's
 * wire types and the generated one are assignable both ways (and have the
 * same keys, so an optional property on one side only counts too), for the
 * client's source and for its published declarations (dist/client.d.ts).
 * A control run on a deliberately altered document must fail, so the check
 * is known to bite.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import openapiTS, { astToString } from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '../../src/openapi/document.js';
import { ROUTES } from '../../src/routes/table.js';
import { ROOT } from '../support/processes.js';

const CHECKS = (from: string) => `
import type { components, operations } from './openapi.js';
import type { ErrorDetail, ErrorEnvelope, SignatureErrorBody, SignatureResult, UserFilters, UserListBody, UserPageBody, UserRecord, UsersQuery } from ${JSON.stringify(from)};

/** true when A and B are assignable to each other. */
type Mutual<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** Mutual, and the same keys: an optional property only one side has counts too. */
type Same<A, B> = Mutual<A, B> extends true ? Mutual<keyof A, keyof B> : false;
function assert<T extends true>(): T | void {}
type Schemas = components['schemas'];

assert<Same<UserRecord, Schemas['User']>>();
assert<Same<ErrorDetail, Schemas['Error']>>();
assert<Mutual<ErrorDetail['code'], Schemas['Error']['code']>>();
assert<Same<ErrorEnvelope, Schemas['ErrorEnvelope']>>();
assert<Same<SignatureResult, Schemas['SignatureValid']>>();
assert<Mutual<SignatureErrorBody, Schemas['SignatureError'] | Schemas['SignatureUnknownMerchant']>>();
assert<Same<UserPageBody, Schemas['UserPage']>>();
assert<Same<UserListBody, Schemas['UserList']>>();
assert<Same<UserListBody, Schemas['UserOne']>>();
assert<Same<UsersQuery, NonNullable<operations['listUsers']['parameters']['query']>>>();
// The filters of the client are the list's filter parameters, camelCased: a new filter on the server fails here.
// include_removed is not a filter: changes() sends it (the change feed, docs/protocol.md#removals).
type Snake<S extends string> = S extends \`\${infer H}\${infer T}\` ? \`\${H extends Lowercase<H> ? H : \`_\${Lowercase<H>}\`}\${Snake<T>}\` : S;
assert<Mutual<Snake<keyof UserFilters & string>, Exclude<keyof NonNullable<operations['listUsers']['parameters']['query']>, 'limit' | 'cursor' | 'include_removed'>>>();
// The one path parameter of GET /merchant/users/{shared_user_id} is what user() takes.
assert<Same<operations['getUser']['parameters']['path'], { shared_user_id: UserRecord['shared_user_id'] }>>();
`;

/** The four programs: the checks against the client's source and its declarations, and two controls on altered documents. */
type Variant = 'source' | 'declarations' | 'state never null' | 'a new filter';
const VARIANTS: Variant[] = ['source', 'declarations', 'state never null', 'a new filter'];
const fileOf = (variant: Variant) => variant.replaceAll(' ', '-');

/** A copy of the document where state is never null: the record checks must fail. */
function stateNeverNull() {
  const altered = openApiDocument('', ROUTES) as { components: { schemas: { User: { properties: Record<string, unknown> } } } };
  altered.components.schemas.User.properties.state = { type: 'string' };
  return altered;
}

/** A copy of the document with a new filter: the query and filter checks must fail. */
function newFilter() {
  const altered = openApiDocument('', ROUTES) as { paths: Record<string, { get: { parameters: unknown[] } }> };
  const listUsers = Object.entries(altered.paths).find(([path]) => path.endsWith('/merchant/users'))![1].get;
  listUsers.parameters = [...listUsers.parameters, { name: 'country', in: 'query', schema: { type: 'string' } }];
  return altered;
}

let dir: string;
/** tsc's report of the one program, line by line, by the variant whose files it names (`shared`: the client's own files). */
let reports: Record<Variant | 'shared', string[]>;
let status: number | null;

/**
 * Generates openapi-<variant>.ts from each variant's document beside check-<variant>.ts, the checks against the
 * client's types, and type-checks all of them as one program: one tsc run, each variant's errors told apart
 * by the file they are in.
 */
async function typeCheckAll(): Promise<void> {
  const inputs: Record<Variant, [unknown, string]> = {
    source: [openApiDocument('', ROUTES), join(ROOT, 'src/client/index.js')],
    declarations: [openApiDocument('', ROUTES), join(ROOT, 'dist/client.js')],
    'state never null': [stateNeverNull(), join(ROOT, 'src/client/index.js')],
    'a new filter': [newFilter(), join(ROOT, 'src/client/index.js')],
  };
  const files: string[] = [];
  for (const variant of VARIANTS) {
    const [document, from] = inputs[variant];
    writeFileSync(join(dir, `openapi-${fileOf(variant)}.ts`), astToString(await openapiTS(document as never)));
    writeFileSync(join(dir, `check-${fileOf(variant)}.ts`), CHECKS(from).replace("from './openapi.js'", `from './openapi-${fileOf(variant)}.js'`));
    files.push(`openapi-${fileOf(variant)}.ts`, `check-${fileOf(variant)}.ts`);
  }
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      extends: join(ROOT, 'tsconfig.json'),
      compilerOptions: { noEmit: true, noUnusedLocals: false, typeRoots: [join(ROOT, 'node_modules', '@types')], paths: {} },
      include: [],
      files,
    }),
  );
  const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir, '--pretty', 'false'], { cwd: dir, encoding: 'utf8' });
  status = tsc.status;
  reports = { source: [], declarations: [], 'state never null': [], 'a new filter': [], shared: [] };
  // An error's first line names its file; the lines after it (no file) belong to it.
  let current: Variant | 'shared' = 'shared';
  for (const line of (tsc.stdout + tsc.stderr).trim().split('\n').filter(Boolean)) {
    if (!/^\s/.test(line)) current = VARIANTS.find((variant) => new RegExp(`^(check|openapi)-${fileOf(variant)}\\.ts\\(`).test(line)) ?? 'shared';
    reports[current].push(line.replace(/^check-[\w-]+\.ts/, 'check.ts'));
  }
}

/** A variant's report: its own errors, and any in the files all of them share (the client's). */
const reportOf = (variant: Variant) => [...reports.shared, ...reports[variant]].join('\n');

describe('the client types against types generated from the OpenAPI document (openapi-typescript)', () => {
  beforeAll(async () => {
    expect(existsSync(join(ROOT, 'dist/client.d.ts')), 'run npm run build first').toBe(true);
    dir = mkdtempSync(join(tmpdir(), 'merchant-api-client-types-'));
    await typeCheckAll();
  }, 120_000);
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the client source (src/client) and the generated types are assignable both ways', () => {
    expect(reportOf('source')).toBe('');
  });

  it('so are the published declarations (dist/client.d.ts)', () => {
    expect(reportOf('declarations')).toBe('');
  });

  /** The lines of the checks that tsc reports errors on (TS2344: the pair is not mutually assignable). */
  const failingChecks = (report: string) => {
    const lines = CHECKS('x').split('\n');
    return [...new Set([...report.matchAll(/check\.ts\((\d+),\d+\): error TS2344/g)].map((m) => /assert<(?:Same|Mutual)<(\w+(?:<[^,]+>)?)/.exec(lines[Number(m[1]) - 1]!)?.[1]))];
  };

  it('control: a document where state is never null fails the record checks', () => {
    expect(status).not.toBe(0);
    expect(failingChecks(reportOf('state never null'))).toEqual(['UserRecord', 'UserPageBody', 'UserListBody']);
  });

  it('control: a document with a new filter fails the query and filter checks', () => {
    expect(status).not.toBe(0);
    expect(failingChecks(reportOf('a new filter'))).toEqual(['UsersQuery', 'Snake<keyof UserFilters & string>']);
  });
});
