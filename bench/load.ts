/**
 * Load generators: wrk (pinned to core 1, one thread) when installed, else
 * autocannon in this process (which run.ts pins to core 1). Both report the
 * same numbers; non-2xx answers and socket errors are failures.
 */
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

const WRK_DIR = fileURLToPath(new URL('./wrk/', import.meta.url));

export interface LoadSpec {
  url: string;
  path: string;
  headers: Record<string, string>;
  connections: number;
  seconds: number;
  /** Cycle through these lines of a file of request paths (1-based first line). */
  paths?: { file: string; first: number; count: number };
  pin: boolean;
}

export interface LoadResult {
  requests: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Answers other than 2xx (3xx too for autocannon). */
  non2xx: number;
  /** Connect, read, write errors and timeouts. */
  socketErrors: number;
  /** Times the path list ran out and started over (salts replayed). */
  wrapped: number;
  /** Share of one core the server used during the run (1 = all of core 0); set by run.ts. */
  serverCpu?: number;
  /** Server CPU microseconds per request; set by run.ts. */
  cpuUsPerRequest?: number;
  /** Busy share of core 0 (other work) just before the run, with the server idle; set by run.ts. */
  core0BusyBefore?: number;
}

/** True when `wrk` is on the PATH (`wrk -v` prints its version and exits 1). */
export function hasWrk(): boolean {
  const probe = spawnSync('wrk', ['-v'], { encoding: 'utf8' });
  return /^wrk /m.test(`${probe.stdout ?? ''}${probe.stderr ?? ''}`);
}

export async function runWrk(spec: LoadSpec): Promise<LoadResult> {
  const args = ['-t1', `-c${spec.connections}`, `-d${spec.seconds}s`, '--timeout', '10s'];
  for (const [name, value] of Object.entries(spec.headers)) args.push('-H', `${name}: ${value}`);
  if (spec.paths) args.push('-s', `${WRK_DIR}paths.lua`, `${spec.url}/`, '--', spec.paths.file, String(spec.paths.first), String(spec.paths.count));
  else args.push('-s', `${WRK_DIR}report.lua`, `${spec.url}${spec.path}`);
  const [command, ...rest] = spec.pin ? ['taskset', '-c', '1', 'wrk', ...args] : ['wrk', ...args];
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(command!, rest, { maxBuffer: 1 << 20, timeout: (spec.seconds + 60) * 1000 }, (error, out, err) =>
      error ? reject(new Error(`wrk failed: ${error.message}\n${err}`)) : resolve(out),
    );
  });
  const line = /WRKJSON (\{.*\})/.exec(stdout);
  if (!line) throw new Error(`wrk printed no summary:\n${stdout}`);
  const r = JSON.parse(line[1]!) as Record<string, number>;
  const seconds = r.duration_us! / 1e6;
  return {
    requests: r.requests!,
    seconds,
    rps: r.requests! / seconds,
    p50Ms: r.p50_us! / 1000,
    p99Ms: r.p99_us! / 1000,
    maxMs: r.max_us! / 1000,
    non2xx: r.status!,
    socketErrors: r.connect! + r.read! + r.write! + r.timeout!,
    wrapped: r.wrapped!,
  };
}

export async function runAutocannon(spec: LoadSpec): Promise<LoadResult> {
  let paths: string[] | undefined;
  if (spec.paths) {
    const lines = readFileSync(spec.paths.file, 'utf8').split('\n');
    paths = lines.slice(spec.paths.first - 1, spec.paths.first - 1 + spec.paths.count);
  }
  let next = 0;
  let wrapped = 0;
  const result = await autocannon({
    url: `${spec.url}${spec.path}`,
    connections: spec.connections,
    duration: spec.seconds,
    headers: spec.headers,
    requests: paths
      ? [
          {
            setupRequest: (request: { path: string }) => {
              if (next === paths!.length) {
                next = 0;
                wrapped++;
              }
              request.path = paths![next++]!;
              return request;
            },
          },
        ]
      : undefined,
  });
  const seconds = result.duration;
  const requests = result.requests.total;
  return {
    requests,
    seconds,
    rps: requests / seconds,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
    non2xx: result.non2xx,
    socketErrors: result.errors + result.timeouts,
    wrapped,
  };
}
