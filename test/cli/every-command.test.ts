/**
 * docs/cli.md promises that every command and subcommand takes `--help` (`-h`) and that an unknown
 * option is one line, `Unknown option --bogus.`, followed by the usage (exit 2). This runs every
 * command line the CLI has, from its own list (`everyCommand` over the commands the bins are given),
 * through the CLI's dispatch in process (`runCli`, what every bin runs, with the output captured):
 * a command or subcommand added later is checked without touching this file. The built bins of
 * Node, Bun and Deno then answer a command and a subcommand exactly as the dispatch does, on
 * stdout and stderr with the exit code: what a process adds, checked once per runtime rather
 * than once per command line.
 */
import { describe, expect, it } from 'vitest';
import { mysqlCommands } from '../../src/cli/commands/mysql.js';
import { mysqlCommands as lazyMysqlCommands } from '../../src/cli/commands/mysql-lazy.js';
import { everyCommand, runCli } from '../../src/cli/run.js';
import { CLEAN_ENV, CLI, RUNTIMES, runInDirectory, runtimeCommand, ROOT, type Runtime } from '../support/processes.js';
import { captureIo } from '../support/recording.js';

const LINES = everyCommand(mysqlCommands);

interface Run {
  code: number | null;
  out: string;
  err: string;
}

/** The built bin of `runtime`, as a user runs it. */
async function bin(runtime: Runtime, args: string[]): Promise<Run> {
  const [command, argv] = runtimeCommand(runtime, CLI[runtime], args);
  const { code, stdout, stderr } = await runInDirectory(command, argv, ROOT, CLEAN_ENV);
  return { code, out: stdout.trimEnd(), err: stderr.trimEnd() };
}

async function inProcess(args: string[]): Promise<Run> {
  const io = captureIo({});
  const serve = () => Promise.reject(new Error('--help must not start a server'));
  const code = await runCli(args, io, { name: 'node', serve, commands: mysqlCommands });
  return { code, out: io.lines.join('\n'), err: io.errors.join('\n') };
}

describe('every command line of the CLI', () => {
  it('the bins list, without loading them, the MySQL commands and subcommands there are (commands/mysql-lazy.ts)', () => {
    expect(everyCommand(lazyMysqlCommands)).toEqual(LINES);
  });

  it('the list holds every command and subcommand there is today', () => {
    const named = LINES.map((words) => words.join(' '));
    for (const line of ['', 'help', 'serve', 'check', 'migrate', 'import', 'merchant', 'throttle', 'throttle list', 'throttle unblock']) expect(named).toContain(line);
    for (const sub of ['add', 'rotate-key', 'keys', 'revoke-key', 'delete', 'disable', 'enable', 'list']) expect(named).toContain(`merchant ${sub}`);
  });

  it('merchant-api --help names every command and subcommand there is (a command added later must be listed)', async () => {
    const help = (await inProcess(['--help'])).out;
    // The words of the usage lines of a command: `merchant disable ID | enable ID` names disable and
    // enable, `webhook add|list|...` each of its subcommands.
    const named = (command: string) =>
      help
        .split('\n')
        .filter((line) => line.startsWith(`  ${command} `))
        .flatMap((line) => line.trim().split(/[\s|]+/));
    for (const [command, sub] of LINES.filter((words) => words.length > 0)) {
      expect(named(command!), `merchant-api --help lists ${command}`).toContain(command);
      if (sub) expect(named(command!), `merchant-api --help lists ${command} ${sub}`).toContain(sub);
    }
    expect(help).toContain('import --erase FILE');
  });

  it.each(LINES.map((words) => [words.join(' ') || '(no command)', words] as const))('%s: --help prints its usage (0), --bogus is one line and the usage (2)', async (_, words) => {
    const [help, bogus] = await Promise.all([inProcess([...words, '--help']), inProcess([...words, '--bogus'])]);
    expect(help).toMatchObject({ code: 0, err: '' });
    expect(help.out).toMatch(/^Usage: merchant-api/);
    expect(bogus).toMatchObject({ code: 2, out: '', err: `Unknown option --bogus.\n${help.out}` });
  });

  it('-h is --help, for every one of them', async () => {
    for (const words of LINES) {
      const short = await inProcess([...words, '-h']);
      expect(short, words.join(' ')).toEqual(await inProcess([...words, '--help']));
      expect(short.code, words.join(' ')).toBe(0);
      expect(short.out, words.join(' ')).toMatch(/^Usage: merchant-api/);
    }
  });

  describe.each(RUNTIMES)('the built bin on %s', (runtime) => {
    // The top-level usage (which lists every command) and a subcommand of a command group.
    it.each([[[]], [['merchant', 'rotate-key']]] as const)('answers %j --help and --bogus as the dispatch does, usage on stdout (0), the refusal on stderr (2)', async (words) => {
      const [help, bogus] = await Promise.all([bin(runtime, [...words, '--help']), bin(runtime, [...words, '--bogus'])]);
      expect(help).toEqual({ ...(await inProcess([...words, '--help'])), code: 0, err: '' });
      expect(help.out).toMatch(/^Usage: merchant-api/);
      expect(bogus).toEqual({ ...(await inProcess([...words, '--bogus'])), code: 2, out: '' });
    }, 30_000);
  });
});
