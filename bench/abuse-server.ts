/**
 * The standalone server as the abuse benchmarks run it: `serve` from a build
 * (dist/cli.js, or another build's for before/after figures), pinned to core 0
 * with taskset (which execs it, so the pid is the server's), no access log.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

export const ROOT = new URL('../', import.meta.url).pathname;

export interface AbuseServer {
  url: string;
  pid: number;
  child: ChildProcess;
  /** Everything it printed so far. */
  output(): string;
  stop(): Promise<void>;
}

/** Starts `node <cli> serve` with `env` on top of quiet defaults; resolves once it prints its URL. */
export async function startAbuseServer(cli: string, env: Record<string, string>, command = 'serve'): Promise<AbuseServer> {
  const child = spawn('taskset', ['-c', '0', process.execPath, resolve(ROOT, cli), command], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', ACCESS_LOG: 'false', LOG_LEVEL: 'error', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const url = await new Promise<string>((done, fail) => {
    const check = () => {
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) done(match[1]!);
    };
    child.stdout!.on('data', check);
    void exited.then(() => fail(new Error(`server exited: ${out}`)));
  });
  return {
    url,
    pid: child.pid!,
    child,
    output: () => out,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}
