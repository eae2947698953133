/**
 * The repository is the whole product: a user clones it and nothing else.
 * No tracked file may read or cite reference material kept outside it, and
 * comments point to docs/ rather than to an outside contract.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';

// Built from pieces so that this file does not match itself.
const OUTSIDE = ['..', 'shared'].join('/');
const OUTSIDE_CONTRACT = new RegExp(['SPEC', '\\s+sections?\\s+\\d|', 'SPEC', '\\.md'].join(''));

/** Tracked files from git, or every file but dependencies and build output when this is not a git checkout. */
function repositoryFiles(): string[] {
  if (existsSync(`${ROOT}.git`)) {
    return execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter(Boolean);
  }
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(`${ROOT}${dir}`)) {
      if (['node_modules', 'dist', '.git'].includes(name)) continue;
      const path = dir ? `${dir}/${name}` : name;
      if (statSync(`${ROOT}${path}`).isDirectory()) walk(path);
      else files.push(path);
    }
  };
  walk('');
  return files;
}

describe('the repository stands alone', () => {
  const files = repositoryFiles().filter((file) => existsSync(`${ROOT}${file}`) && file !== 'package-lock.json');

  it('finds the files it checks', () => {
    expect(files).toContain('README.md');
    expect(files).toContain('test/fixtures/signing-vectors.json');
  });

  it(`has no file that reads or cites ${OUTSIDE}`, () => {
    const offenders = files.filter((file) => readFileSync(`${ROOT}${file}`, 'utf8').includes(OUTSIDE));
    expect(offenders).toEqual([]);
  });

  it('cites docs/ for the contract, never an outside SPEC document', () => {
    const offenders = files.filter((file) => OUTSIDE_CONTRACT.test(readFileSync(`${ROOT}${file}`, 'utf8')));
    expect(offenders).toEqual([]);
  });
});
