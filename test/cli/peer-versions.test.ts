/** The range check of the optional peers at the command's start (src/cli/peer-versions.ts), against npm's reading of the same ranges. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import { satisfies } from '../../src/cli/peer-versions.js';

// npm's semver as the judge: in node_modules through the dev dependencies (the lockfile pins it), not a dependency of the package.
const semver = createRequire(import.meta.url)('semver') as { satisfies(version: string, range: string): boolean };

const RANGES = ['>=0.28.18 <0.30', '^0.28.18', '^1.9.0', '~1.9.0', '^6.0.0', '^3.24.6', '^15.1.3', '^0.28.18 || ^0.29', '>= 1.2.3 < 2'];

describe('satisfies', () => {
  it('reads the ranges of package.json as npm does, for every release version', () => {
    const part = fc.integer({ min: 0, max: 40 });
    fc.assert(
      fc.property(part, part, part, fc.constantFrom(...RANGES), (major, minor, patch, range) => {
        const version = `${major % 20}.${minor}.${patch}`;
        expect(satisfies(version, range), `${version} in ${range}`).toBe(semver.satisfies(version, range));
      }),
      { numRuns: 2000 },
    );
  });

  it('puts the cases that matter on the right side', () => {
    expect(satisfies('0.29.9', '>=0.28.18 <0.30')).toBe(true);
    expect(satisfies('0.28.18', '>=0.28.18 <0.30')).toBe(true);
    expect(satisfies('0.28.17', '>=0.28.18 <0.30')).toBe(false);
    expect(satisfies('0.30.0', '>=0.28.18 <0.30')).toBe(false);
    expect(satisfies('0.30.0-beta.2', '>=0.28.18 <0.30')).toBe(false);
    expect(satisfies('1.10.0', '^1.9.0')).toBe(true);
    expect(satisfies('2.0.0', '^1.9.0')).toBe(false);
    expect(satisfies('not a version', '^1.9.0')).toBe(false);
  });
});
