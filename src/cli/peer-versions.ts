/**
 * The optional peers the command line loads must be releases this package
 * supports (package.json "peerDependencies"): a Kysely of the next minor can
 * fail to link ("Export named 'Migrator' not found") or misbehave later, and
 * Bun and `--legacy-peer-deps` install one without a word. At start, an
 * installed peer outside its range is named with both versions instead.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

interface PackageJson {
  name?: string;
  version?: string;
  peerDependencies?: Record<string, string>;
}

/** The nearest package.json above `file` whose name is `name`. */
function packageJsonAbove(file: string, name: string): PackageJson | undefined {
  for (let directory = dirname(file); ; directory = dirname(directory)) {
    const candidate = join(directory, 'package.json');
    if (existsSync(candidate)) {
      const json = JSON.parse(readFileSync(candidate, 'utf8')) as PackageJson;
      if (json.name === name) return json;
    }
    if (dirname(directory) === directory) return undefined;
  }
}

type Triple = [number, number, number];
const triple = (version: string): Triple | undefined => {
  const match = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(version.trim());
  return match ? [Number(match[1]), Number(match[2] ?? 0), Number(match[3] ?? 0)] : undefined;
};
const compare = (a: Triple, b: Triple): number => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

/** One comparator of a range: `^x.y.z`, `~x.y.z`, `>=`, `>`, `<=`, `<`, `=` or a bare version. */
function satisfiesComparator(version: Triple, comparator: string): boolean {
  const match = /^(\^|~|>=|<=|>|<|=)?\s*(.+)$/.exec(comparator);
  const bound = match && triple(match[2]!);
  if (!bound) return false;
  const order = compare(version, bound);
  switch (match[1]) {
    case '^': {
      // The leftmost non-zero part is fixed: ^1.9.0 is <2, ^0.28.18 is <0.29.
      const upper: Triple = bound[0] > 0 ? [bound[0] + 1, 0, 0] : bound[1] > 0 ? [0, bound[1] + 1, 0] : [0, 0, bound[2] + 1];
      return order >= 0 && compare(version, upper) < 0;
    }
    case '~':
      return order >= 0 && compare(version, [bound[0], bound[1] + 1, 0]) < 0;
    case '>=':
      return order >= 0;
    case '>':
      return order > 0;
    case '<=':
      return order <= 0;
    case '<':
      return order < 0;
    default:
      return order === 0;
  }
}

/**
 * Whether `version` is in `range`, for the forms package.json uses here
 * (`^`, `~`, comparisons joined by spaces, alternatives by `||`). A
 * pre-release counts as its release: 0.30.0-beta.1 is outside `<0.30`.
 */
export function satisfies(version: string, range: string): boolean {
  const parsed = triple(version);
  if (!parsed) return false;
  return range.split('||').some((alternative) => {
    const comparators = alternative.trim().replace(/(\^|~|>=|<=|>|<|=)\s+/g, '$1').split(/\s+/).filter(Boolean);
    return comparators.length > 0 && comparators.every((comparator) => satisfiesComparator(parsed, comparator));
  });
}

/**
 * The one-line problem of the first of `peers` installed (as `from`
 * resolves it) at a release outside merchant-api's range, or undefined. A
 * peer that is not installed is not a problem here: the command that needs it
 * names it when it loads (missing-package.ts).
 */
export function peerVersionProblem(peers: readonly string[], from: string = fileURLToPath(import.meta.url)): string | undefined {
  const own = packageJsonAbove(from, 'merchant-api');
  const ranges = own?.peerDependencies ?? {};
  const require = createRequire(from);
  for (const name of peers) {
    const range = ranges[name];
    if (!range) continue;
    let entry: string;
    try {
      entry = require.resolve(name);
    } catch {
      continue;
    }
    const version = packageJsonAbove(entry, name)?.version;
    if (version && !satisfies(version, range)) {
      return `merchant-api: ${name} ${version} is installed, but merchant-api ${own?.version ?? ''} supports ${name} ${range}: npm install ${name}@"${range}" (docs/install.md).`;
    }
  }
  return undefined;
}
