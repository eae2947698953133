/**
 * docs/cli.md promises that every command and subcommand takes `--help` (`-h`) and that an unknown
 * option is one line, `Unknown option --bogus.`, followed by the usage (exit 2). This runs every
 * command line the CLI has, from its own list (`everyCommand` over the commands the bins are given),
 * through the built bin: a command or subcommand added later is checked without touching this file.
 * `-h` is checked in process: the same dispatch, without a second round of processes.
 */
import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { mysqlCommands } from '../../src/cli/commands/mysql.js';
import type { CliIo } from '../../src/cli/io.js';
import { everyCommand, runCli } from '../../src/cli/run.js';
import { CLEAN_ENV, ROOT } from '../support/processes.js';

const LINES = everyCommand(mysqlCommands);

function bin(args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['dist/cli.js', ...args], { cwd: ROOT, env: { ...process.env, ...CLEAN_ENV } }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout.trimEnd(), err: stderr.trimEnd() });
    });
  });
}

async function inProcess(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { env: {}, out: (line) => out.push(line), err: (line) => err.push(line) };
  const serve = () => Promise.reject(new Error('--help must not start a server'));
  const code = await runCli(args, io, { name: 'node', serve, commands: mysqlCommands });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('every command line of the CLI', () => {
  it('the list holds every command and subcommand there is today', () => {
    const named = LINES.map((words) => words.join(' '));
    for (const line of ['', 'help', 'serve', 'check', 'migrate', 'import', 'merchant', 'throttle', 'throttle list', 'throttle unblock']) expect(named).toContain(line);
    for (const sub of ['add', 'rotate-key', 'keys', 'revoke-key', 'delete', 'disable', 'enable', 'list']) expect(named).toContain(`merchant ${sub}`);
  });

  it.each(LINES.map((words) => [words.join(' ') || '(no command)', words] as const))('%s: --help prints its usage (0), --bogus is one line and the usage (2)', async (_, words) => {
    const [help, bogus] = await Promise.all([bin([...words, '--help']), bin([...words, '--bogus'])]);
    expect(help).toMatchObject({ code: 0, err: '' });
    expect(help.out).toMatch(/^Usage: merchant-api/);
    expect(bogus).toMatchObject({ code: 2, out: '', err: `Unknown option --bogus.\n${help.out}` });
  }, 30_000);

  it('-h is --help, for every one of them', async () => {
    for (const words of LINES) {
      const short = await inProcess([...words, '-h']);
      expect(short, words.join(' ')).toEqual(await inProcess([...words, '--help']));
      expect(short.code, words.join(' ')).toBe(0);
      expect(short.out, words.join(' ')).toMatch(/^Usage: merchant-api/);
    }
  });
});
