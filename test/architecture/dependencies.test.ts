/**
 * The direction of imports (docs/architecture.md#the-direction-of-imports):
 * dependency-cruiser runs over src/ and adapters/ with dependency-rules.cjs
 * and the test fails listing every violation. A control tree, written to a
 * temporary folder, breaks each rule once beside imports the rules allow, and
 * must be reported exactly: so a rule that stopped matching (a renamed
 * folder, a mistyped pattern) fails here instead of passing everything.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { cruise, type ICruiseResult } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';

const RULES = join(ROOT, 'test/architecture/dependency-rules.cjs');

/** Every violation in `roots` (relative to `baseDir`), one line each, and how many modules were read. */
async function check(baseDir: string, roots: string[]): Promise<{ violations: string[]; modules: number }> {
  const options = await extractDepcruiseOptions(RULES);
  const tsConfigFile = join(baseDir, 'tsconfig.json');
  const { output } = await cruise(roots, { ...options, baseDir, tsConfig: { fileName: tsConfigFile } }, {}, { tsConfig: extractTSConfig(tsConfigFile) });
  const result = output as ICruiseResult;
  const violations = result.summary.violations.map((v) => {
    const cycle = v.cycle ? ` (cycle: ${v.cycle.map((step) => step.name).join(' → ')})` : '';
    return `${v.rule.name}: ${v.from} → ${v.to}${cycle}`;
  });
  return { violations: [...new Set(violations)].sort(), modules: result.summary.totalCruised };
}

describe('the direction of imports', () => {
  it('src/ and adapters/ import only downward, with no cycle', async () => {
    const { violations, modules } = await check(ROOT, ['src', 'adapters']);
    expect(violations, `docs/architecture.md#the-direction-of-imports; rules in test/architecture/dependency-rules.cjs:\n${violations.join('\n')}\n`).toEqual([]);
    // The cruise really read the tree (it resolved the .js specifiers to the .ts files).
    expect(modules).toBeGreaterThan(80);
  });
});

/** The control tree: path → source. Every file exports `x` and the type `T`. */
const CONTROL: Record<string, string> = {
  'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'ESNext', moduleResolution: 'Bundler', target: 'ES2022', strict: true } }),
  'src/errors.ts': '',
  'src/defaults.ts': '',
  'src/index.ts': `import { x as a } from './api.js'; import { x as b } from './stray/thing.js';`,
  'src/api.ts': `import { x as a } from './http/context.js'; import { x as b } from './storage/guard.js'; import { x as c } from './storage/sql/key-ids.js';`,
  'src/stray/thing.ts': '',
  'src/http/context.ts': `import { x as a } from '../errors.js';`,
  // The request's layers, each importing the ones below it: pipeline, routes, openapi, limits, observe, http.
  'src/pipeline/pipeline.ts': `import { x as a } from '../routes/table.js'; import { x as b } from './answer.js'; import { x as c } from '../http/context.js';`,
  'src/pipeline/answer.ts': '',
  // A cycle inside one folder, where imports are otherwise free.
  'src/routes/table.ts': `import { x as a } from './match.js'; import { x as b } from '../openapi/document.js';`,
  'src/routes/match.ts': `import { x as a } from './table.js';`,
  'src/routes/user.ts': `import { x as a } from '../pipeline/answer.js';`,
  'src/openapi/document.ts': `import { x as a } from '../limits/throttle.js';`,
  'src/limits/throttle.ts': `import { x as a } from '../client/index.js'; import { x as b } from '../observe/logger.js';`,
  'src/observe/logger.ts': `import { x as a } from '../http/context.js';`,
  'src/http/url.ts': `import { x as a } from '../routes/table.js';`,
  'src/auth/basic-auth.ts': `import { x as a } from '../signing/index.js';`,
  // Even a type-only import upward is refused.
  'src/auth/other.ts': `import type { T } from '../http/context.js';`,
  'src/signing/index.ts': '',
  'src/listing/cursor.ts': `import { x as a } from '../http/context.js';`,
  'src/storage/contract.ts': `import { x as a } from '../errors.js';`,
  'src/storage/guard.ts': `import { x as a } from '../limits/throttle.js';`,
  'src/storage/seed/seed.ts': `import { x as a } from '../../json/split.js';`,
  'src/json/split.ts': '',
  'src/storage/memory/index.ts': `import { x as a } from './own.js'; import { x as b } from '../contract.js'; import { x as c } from '../seed/seed.js'; import { x as d } from '../mysql/index.js';`,
  'src/storage/memory/own.ts': `import { x as a } from '../../defaults.js'; import { x as b } from '../../signing/index.js';`,
  'src/storage/mysql/index.ts': `import { x as a } from './sql-values.js'; import { x as b } from '../guard.js'; import { x as c } from '../sql/key-ids.js';`,
  // The shared SQL folder sees only the contract, not a storage of its own rank.
  'src/storage/sql/key-ids.ts': `import { x as a } from '../contract.js'; import { x as b } from '../mysql/sql-values.js';`,
  'src/storage/mysql/sql-values.ts': `import { x as a } from '../../errors.js';`,
  'src/storage/redis/index.ts': `import { x as a } from '../throttle-store.js'; import { x as b } from '../memory/own.js'; import { x as c } from '../sql/key-ids.js'; import { x as d } from '../forwarding-storage.js';`,
  'src/storage/forwarding-storage.ts': `import { x as a } from './contract.js';`,
  'src/storage/throttle-store.ts': '',
  'src/client/index.ts': `import type { T } from '../storage/contract.js'; import { x as a } from '../signing/index.js'; import { x as b } from '../errors.js'; import { x as c } from '../http/context.js';`,
  'src/cli/run.ts': `import { x as a } from '../index.js'; import { x as b } from '../storage/mysql/index.js'; import { x as c } from '../../adapters/bun.js'; import { x as d } from './config.js'; import { x as e } from '../storage/mysql/sql-values.js'; import { x as f } from '../../adapters/serve-options.js';`,
  'src/cli/config.ts': `import { x as a } from '../cli-internal.js'; import { x as b } from '../routes/table.js'; import { x as c } from '../options.js';`,
  'src/cli-internal.ts': `import { x as a } from './storage/mysql/sql-values.js';`,
  'src/options.ts': `import { x as a } from './defaults.js'; import { x as b } from './cli-internal.js';`,
  'adapters/node.ts': `import { x as a } from '../src/api.js'; import { x as b } from '../src/cli/run.js';`,
  'adapters/bun.ts': `import { x as a } from '../src/index.js';`,
  'adapters/serve-options.ts': '',
  'src/nowhere.ts': `import { x as a } from './missing.js';`,
};

/**
 * What the control tree must produce: each rule at least once, and nothing for
 * the allowed imports beside them (a cycle is reported on one of its edges).
 */
const EXPECTED = [
  'adapters-imports-upward: adapters/node.ts → src/cli/run.ts',
  'auth-listing-signing-imports-upward: src/auth/other.ts → src/http/context.ts',
  'auth-listing-signing-imports-upward: src/listing/cursor.ts → src/http/context.ts',
  'cli-imports-entry-points-only: src/cli/config.ts → src/options.ts',
  'cli-imports-entry-points-only: src/cli/config.ts → src/routes/table.ts',
  'cli-imports-entry-points-only: src/cli/run.ts → adapters/serve-options.ts',
  'cli-imports-entry-points-only: src/cli/run.ts → src/storage/mysql/sql-values.ts',
  'cli-internal-used-by-cli-only: src/options.ts → src/cli-internal.ts',
  'client-imports-signing-json-and-types: src/client/index.ts → src/errors.ts',
  'client-imports-signing-json-and-types: src/client/index.ts → src/http/context.ts',
  'client-used-by-cli-only: src/limits/throttle.ts → src/client/index.ts',
  'http-imports-upward: src/http/url.ts → src/routes/table.ts',
  'no-circular: src/routes/match.ts → src/routes/table.ts (cycle: src/routes/table.ts → src/routes/match.ts)',
  'no-unresolvable: src/nowhere.ts → ./missing.js',
  'outside-the-layers: src/index.ts → src/stray/thing.ts',
  'outside-the-layers: src/nowhere.ts → ./missing.js',
  'routes-imports-upward: src/routes/user.ts → src/pipeline/answer.ts',
  'sql-shared-by-sql-storages-only: src/api.ts → src/storage/sql/key-ids.ts',
  'sql-shared-by-sql-storages-only: src/storage/redis/index.ts → src/storage/sql/key-ids.ts',
  'storage-implementation-imports-contract-only: src/storage/memory/index.ts → src/storage/mysql/index.ts',
  'storage-implementation-imports-contract-only: src/storage/memory/own.ts → src/signing/index.ts',
  'storage-implementation-imports-contract-only: src/storage/mysql/index.ts → src/storage/guard.ts',
  'storage-implementation-imports-contract-only: src/storage/redis/index.ts → src/storage/memory/own.ts',
  'storage-implementation-imports-contract-only: src/storage/sql/key-ids.ts → src/storage/mysql/sql-values.ts',
  'storage-json-errors-imports-upward: src/storage/guard.ts → src/limits/throttle.ts',
  'storage-json-errors-imports-upward: src/storage/memory/own.ts → src/signing/index.ts',
];

describe('the rules, on a control tree that breaks each of them', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'merchant-api-dependency-rules-'));
    for (const [file, imports] of Object.entries(CONTROL)) {
      mkdirSync(join(dir, dirname(file)), { recursive: true });
      writeFileSync(join(dir, file), file.endsWith('.json') ? imports : `${imports}\nexport const x = 1;\nexport type T = number;\n`);
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reports exactly the deliberate violations', async () => {
    const { violations } = await check(dir, ['src', 'adapters']);
    expect(violations).toEqual(EXPECTED);
  });
});
