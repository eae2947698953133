/**
 * The documentation is tested like code, so that it cannot quietly rot:
 * - every ```ts block of README.md and docs/*.md type-checks and runs from
 *   the packed, installed package: test/package/docs-from-package.test.ts;
 * - README's table of docs/ lists exactly the pages there, and every
 *   relative link and anchor, in the docs and in source comments, resolves;
 * - the worked signing example, the documented answers of
 *   /validatesignature and the documented error example are what the
 *   handler answers; every variable the CLI reads and every command it has
 *   is documented;
 * - the CLI transcripts of docs/mysql.md are replayed against MariaDB.
 * The quick start itself (npm start, the README's curl lines) runs in
 * test/package/examples.test.ts.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { canonicalMessage, sign, signUrl } from '../../src/signing/index.js';
import { createMemoryStorage } from '../../src/storage/memory/index.js';
import { anchors, codeBlocks, docPages, docsDirectory, links, readPage, sectionHeadings, tableAfter, type CodeBlock } from '../support/docs-markdown.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { ROOT } from '../support/processes.js';

const PAGES = docPages();
const seed = JSON.parse(readFileSync(`${ROOT}examples/seed.json`, 'utf8'));

describe('links', () => {
  it('README lists exactly the pages in docs/, each once', () => {
    const listed = tableAfter(readPage('README.md'), '## Documentation').map((row) => /\]\((docs\/[^)#]+)\)/.exec(row[0]!)?.[1]);
    expect([...listed].sort()).toEqual(docsDirectory().map((name) => `docs/${name}`));
    expect(new Set(listed).size).toBe(listed.length);
  });

  it('every relative link in README.md and docs/ points to an existing file and heading', () => {
    const broken: string[] = [];
    for (const page of PAGES) {
      for (const { target } of links(page)) {
        if (/^[a-z]+:/i.test(target)) continue;
        const [path = '', anchor] = target.split('#');
        const file = path === '' ? page : normalize(join(dirname(page), path));
        if (!existsSync(`${ROOT}${file}`)) broken.push(`${page}: ${target} (no file ${file})`);
        else if (anchor !== undefined && file.endsWith('.md') && !anchors(readPage(file)).has(anchor)) broken.push(`${page}: ${target} (no heading #${anchor} in ${file})`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('docs/architecture.md names every folder of src/', () => {
    const page = readPage('docs/architecture.md');
    const folders = readdirSync(`${ROOT}src`, { recursive: true, encoding: 'utf8' })
      .filter((name) => statSync(`${ROOT}src/${name}`).isDirectory())
      .map((name) => `src/${name.replaceAll('\\', '/')}`);
    expect(folders.length).toBeGreaterThanOrEqual(20);
    // Named as `src/a/b/` or `src/a/b`, in backticks: a file path inside the folder does not count.
    expect(folders.filter((folder) => !page.includes(`\`${folder}/\``) && !page.includes(`\`${folder}\``)).sort()).toEqual([]);
  });

  it('docs/protocol.md has the sections that source comments link to', () => {
    expect(sectionHeadings(readPage('docs/protocol.md'))).toEqual([
      'Endpoints',
      'Signing',
      'Validating a signature',
      'Replay and timestamps',
      'Users',
      'Keys',
      'Pagination and cursors',
      'Changed since',
      'Removals',
      'Filters',
      'Conditional requests',
      'Safe retries',
      'Errors',
      'Limits',
      'Failures',
      'Storage and secrets',
    ]);
  });

  it('every section of docs/protocol.md that the code cites exists', () => {
    const headings = anchors(readPage('docs/protocol.md'));
    const missing: string[] = [];
    for (const file of sourceFiles()) {
      const text = readFileSync(`${ROOT}${file}`, 'utf8');
      for (const match of text.matchAll(/docs\/protocol\.md((?:#[a-z0-9-]+)(?:\s+and\s+#[a-z0-9-]+)*)/g)) {
        for (const anchor of match[1]!.match(/#[a-z0-9-]+/g) ?? []) {
          if (!headings.has(anchor.slice(1))) missing.push(`${file}: docs/protocol.md${anchor}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });
});

describe('docs/protocol.md agrees with the handler', () => {
  const protocol = readPage('docs/protocol.md');

  it('the worked signing example: joined pairs, message and hmac', () => {
    const query = /^\s+(cp=demo-merchant&ts=\d+&salt=\w+&note=\S+)&hmac=…$/m.exec(protocol)![1]!;
    const pairs = [...new URLSearchParams(query)];
    const url = 'https://api.example.com/validatesignature';
    expect(protocol).toContain(`\`${url}\``);
    const message = canonicalMessage({ method: 'GET', url, params: pairs });
    const example = codeBlocks('docs/protocol.md', protocol).find((block) => block.text.startsWith('message: '))!;
    const [messageLine, hmacLine] = example.text.split('\n');
    expect(messageLine).toBe(`message: ${message}`);
    // The hmac independently of the library: HMAC-SHA224 of the documented message.
    const documented = messageLine!.slice('message: '.length);
    expect(hmacLine).toBe(`hmac: ${createHmac('sha224', 'demo-secret').update(documented).digest('hex')}`);
    expect(hmacLine).toBe(`hmac: ${sign('demo-secret', { method: 'GET', url, params: pairs })}`);
    expect(protocol).toContain('    cp=demo-merchant&note=a%20b%21&salt=3f2a9c&ts=1700000000\n');
  });

  it('every row of the /validatesignature outcome table is the answer the handler gives', async () => {
    const api = demoApi();
    const base = 'http://127.0.0.1:8787/validatesignature';
    const signedWithTs = (ts: string) => {
      const params: [string, string][] = [['cp', 'demo-merchant'], ['ts', ts], ['salt', 'salt-with-a-word-for-ts']];
      return `${base}?cp=demo-merchant&ts=${ts}&salt=salt-with-a-word-for-ts&hmac=${sign('demo-secret', { method: 'GET', url: base, params })}`;
    };
    const replayed = signUrl('demo-secret', base, { cp: 'demo-merchant' });
    // One request per row, in the table's order.
    const requests: (() => Promise<Response>)[] = [
      () => api.fetch(new Request(`${base}?cp=demo-merchant`)),
      () => api.fetch(new Request(`${base}?cp=a&cp=b&ts=1&salt=s&hmac=h`)),
      () => api.fetch(new Request(`${base}?cp=${'c'.repeat(129)}&ts=1&salt=s&hmac=h`)),
      () => api.fetch(new Request(`${base}?cp=nobody&ts=1&salt=s&hmac=h`)),
      () => api.fetch(new Request(signUrl('closed-shop-key', base, { cp: 'closed-shop' }))),
      () => api.fetch(new Request(`${base}?cp=demo-merchant&ts=1&salt=s&hmac=${'0'.repeat(56)}`)),
      () => api.fetch(new Request(signedWithTs('soon'))),
      () => api.fetch(new Request(signUrl('demo-secret', base, { cp: 'demo-merchant' }, { now: () => Date.now() - 301_000 }))),
      async () => {
        expect((await api.fetch(new Request(replayed))).status).toBe(200);
        return api.fetch(new Request(replayed));
      },
    ];
    const rows = tableAfter(protocol, '## Validating a signature');
    expect(rows).toHaveLength(requests.length);
    for (const [n, row] of rows.entries()) {
      const response = await requests[n]!();
      expect({ row: n + 1, status: response.status, body: await response.text() }).toEqual({ row: n + 1, status: Number(row[1]), body: row[2]!.replace(/^`|`$/g, '') });
    }
    expect(protocol).toContain('`{"status":"ok","is_valid":true}` with 200');
  });

  it('the error example is the body the handler answers', async () => {
    const [, target, body] = /For example, `GET ([^`]+)` answers\n\n```json\n(.+)\n```/.exec(protocol)!;
    const response = await demoApi().fetch(new Request(`http://127.0.0.1:8787${target}`, { headers: { authorization: `Basic ${btoa('demo-merchant:demo-secret')}` } }));
    expect(await response.text()).toBe(body);
  });
});

describe('the configuration and the command line are documented', () => {
  it('docs/configuration.md lists exactly the environment variables the CLI reads', () => {
    const read = new Set<string>();
    for (const file of readdirSync(`${ROOT}src/cli`, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts'))) {
      const text = readFileSync(`${ROOT}src/cli/${file}`, 'utf8');
      for (const match of text.matchAll(/\br\.(?:text|int|bool)\('([A-Z][A-Z0-9_]*)'|\benv(?:\.|\[')([A-Z][A-Z0-9_]*)/g)) read.add(match[1] ?? match[2]!);
    }
    const documented = tableAfter(readPage('docs/configuration.md'), '## The standalone server').flatMap((row) => row[0]!.match(/[A-Z][A-Z0-9_]+/g) ?? []);
    expect(new Set(documented)).toEqual(read);
    const inReadme = tableAfter(readPage('README.md'), '## Configuration').flatMap((row) => row[0]!.match(/[A-Z][A-Z0-9_]+/g) ?? []);
    expect(inReadme.filter((name) => !read.has(name))).toEqual([]);
  });

  it('docs/cli.md covers every command and option of `merchant-api help`', () => {
    const usage = execFileSync(process.execPath, ['dist/cli.js', 'help'], { cwd: ROOT, encoding: 'utf8' });
    const cli = readPage('docs/cli.md');
    const headings = [...anchors(cli)];
    const commands: string[] = [];
    for (const line of usage.split('\n')) {
      // "  merchant disable ID | enable ID   ..." names merchant disable and merchant enable.
      const words = /^ {2}([a-z].*)$/.exec(line)?.[1]!.split(/\s+/) ?? [];
      if (words[0] === 'merchant') commands.push(...words.filter((word, i) => i === 1 || words[i - 1] === '|').map((word) => `merchant ${word}`));
      else if (words[0]) commands.push(words[0]);
    }
    expect(commands).toEqual(expect.arrayContaining(['serve', 'migrate', 'import', 'merchant add', 'merchant list', 'help']));
    const undocumented = commands.filter((command) => !headings.some((anchor) => anchor.includes(command.replace(' ', '-'))) && !cli.includes(`\`${command}\``));
    expect(undocumented).toEqual([]);
    const options = [...new Set(usage.match(/--[a-z-]+/g))];
    expect(options.filter((option) => !cli.includes(option))).toEqual([]);
  });
});

const mysql = await mysqlAvailable();

describe.skipIf(!mysql)('the CLI transcripts of docs/mysql.md, replayed against MariaDB', () => {
  let db: TestDatabase;
  let work: string;
  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    // The commands run from the checkout: dist/ and examples/ are linked in, users.ndjson is the documented bad file.
    work = mkdtempSync(join(tmpdir(), 'merchant-api-transcript-'));
    symlinkSync(join(ROOT, 'dist'), join(work, 'dist'), 'dir');
    symlinkSync(join(ROOT, 'examples'), join(work, 'examples'), 'dir');
    const user = { ...seed.users.find((u: { merchant_id: string }) => u.merchant_id === 'demo-merchant'), shared_user_id: 'usr-9001' };
    writeFileSync(
      join(work, 'users.ndjson'),
      [JSON.stringify(user), '{not json', JSON.stringify({ ...user, date_joined: 'yesterday' }), JSON.stringify({ ...user, merchant_id: 'no-such-shop' })].join('\n') + '\n',
    );
  });
  afterAll(async () => {
    await db?.drop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('finds the transcripts', () => {
    expect(transcripts().length).toBeGreaterThanOrEqual(3);
  });

  it('prints what the docs show, command by command, in the order of the page', () => {
    const env = { ...process.env, DATABASE_URL: db.url, MASTER_KEY: db.masterKeyText, KEY_CACHE_TTL: '', STORAGE_TIMEOUT: '' };
    for (const block of transcripts()) {
      for (const { command, expected } of steps(block)) {
        const run = spawnSync('bash', ['-c', command], { cwd: work, env, encoding: 'utf8' });
        const output = (run.stdout + run.stderr).trimEnd().split('\n');
        expect({ at: `${block.page}:${block.line}`, command, output: output.map(timeless) }).toEqual({ at: `${block.page}:${block.line}`, command, output: expected.map(timeless) });
      }
    }
  });
});

function transcripts(): CodeBlock[] {
  return codeBlocks('docs/mysql.md').filter((block) => block.marker === 'transcript');
}

/** A transcript's commands (`$ ...`) with the lines each is shown to print. */
function steps(block: CodeBlock): { command: string; expected: string[] }[] {
  const result: { command: string; expected: string[] }[] = [];
  for (const line of block.text.split('\n')) {
    if (line.startsWith('$ ')) result.push({ command: line.slice(2), expected: [] });
    else result.at(-1)!.expected.push(line);
  }
  return result;
}

/** Durations differ from run to run. */
function timeless(line: string): string {
  return line.replace(/ in \d+\.\d s: /, ' in N s: ').replace(/^\{"time":"[^"]+"/, '{"time":"T"');
}

function demoApi() {
  // Started a minute ago: requests signed now are after its start (a ts of the start's own second is refused).
  return createMerchantApi({ storage: createMemoryStorage({ seed, startedAt: Date.now() / 1000 - 60 }), logger: silentLogger, accessLog: false, tracing: false });
}

/** Tracked source files that may cite the docs (the test's own sources included). */
function sourceFiles(): string[] {
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard', 'src', 'adapters', 'test', 'examples', 'bench'], { cwd: ROOT, encoding: 'utf8' });
  return files.split('\0').filter((file) => /\.(ts|mts|mjs|json)$/.test(file) && existsSync(`${ROOT}${file}`));
}
