/**
 * Bench settings: flags override environment variables override defaults.
 * The defaults keep a full run (3 rounds, 13 servers, 3 cases) at about
 * 13-17 minutes on two cores (estimated from the 8-10 of the 8 servers before
 * 28 November 2026; the two `merchant-api serve` rows of 6 December 2026
 * each load their seed file first); `--quick` is a one-round smoke run of a
 * minute or two.
 */

export type CaseId = 'validatesignature' | 'user' | 'page';
export const CASES: CaseId[] = ['validatesignature', 'user', 'page'];

export interface BenchOptions {
  /** Seconds measured per server and case. */
  duration: number;
  /** Seconds of unmeasured load before each measurement. */
  warmup: number;
  rounds: number;
  connections: number;
  /** Server ids to run (default all); see servers.ts. */
  servers?: string[];
  cases: CaseId[];
  loader: 'wrk' | 'autocannon' | 'auto';
  /** Skip the 100,000-user streaming measurement. */
  stream: boolean;
  /** Only profile merchant-api on Node with --cpu-prof, no comparison. */
  profile: boolean;
  /** Highest req/s any server is expected to reach: sizes the pre-signed path file so no salt repeats. */
  maxRate: number;
  quick: boolean;
  /** Another build's dist/ to run as an extra Node server, for before/after comparisons. */
  baselineDist?: string;
}

const HELP = `npm run bench [-- options]
  --quick               1 round of 3 s (+1 s warm-up) per server and case
  --duration=S          seconds measured per server and case (BENCH_DURATION, default 6)
  --warmup=S            seconds of warm-up before each measurement (BENCH_WARMUP, default 2)
  --rounds=N            alternating rounds, medians reported (BENCH_ROUNDS, default 3)
  --connections=N       concurrent connections (BENCH_CONNECTIONS, default 50)
  --servers=a,b         only these servers: ${'node-constant,fetch-constant,node-plain,node-plain-stream,merchant-api-node,merchant-api-node-fetch,merchant-api-node-nolog,merchant-api-node-quiet,merchant-api-cli,merchant-api-cli-nolog,hono-node,merchant-api-bun,merchant-api-deno'}
  --cases=a,b           only these cases: ${CASES.join(',')}
  --loader=wrk|autocannon   default: wrk when installed, else autocannon (BENCH_LOADER)
  --no-stream           skip the 100,000-user streaming measurement
  --profile             run merchant-api on Node under --cpu-prof per case and print the hottest functions
                        (--servers=merchant-api-cli: the standalone server, node dist/cli.js serve)
  --baseline-dist=DIR   also run merchant-api on Node from another build's dist/ (before/after)
  --max-rate=N          req/s the pre-signed paths must cover (BENCH_MAX_RATE, default 120000)`;

export function parseOptions(argv: string[], env: Record<string, string | undefined>): BenchOptions {
  const flags = new Map<string, string>();
  for (const arg of argv) {
    if (arg === '--help' || arg === '-h') {
      console.log(HELP);
      process.exit(0);
    }
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!match) throw new Error(`Unknown argument ${arg}\n${HELP}`);
    flags.set(match[1]!, match[2] ?? 'true');
  }
  const quick = flags.has('quick') || env.BENCH_QUICK === '1';
  const number = (flag: string, envName: string, fallback: number): number => {
    const raw = flags.get(flag) ?? env[envName];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0) throw new Error(`--${flag} must be a positive number (got ${raw})`);
    return value;
  };
  const list = (flag: string): string[] | undefined => flags.get(flag)?.split(',').map((s) => s.trim()).filter(Boolean);
  const cases = (list('cases') ?? CASES) as CaseId[];
  for (const c of cases) if (!CASES.includes(c)) throw new Error(`Unknown case ${c}; cases: ${CASES.join(', ')}`);
  const loader = (flags.get('loader') ?? env.BENCH_LOADER ?? 'auto') as BenchOptions['loader'];
  if (!['wrk', 'autocannon', 'auto'].includes(loader)) throw new Error(`--loader must be wrk or autocannon`);
  return {
    duration: number('duration', 'BENCH_DURATION', quick ? 3 : 6),
    warmup: number('warmup', 'BENCH_WARMUP', quick ? 1 : 2),
    rounds: Math.round(number('rounds', 'BENCH_ROUNDS', quick ? 1 : 3)),
    connections: Math.round(number('connections', 'BENCH_CONNECTIONS', 50)),
    servers: list('servers'),
    cases,
    loader,
    stream: !flags.has('no-stream'),
    profile: flags.has('profile'),
    maxRate: number('max-rate', 'BENCH_MAX_RATE', 120_000),
    quick,
    baselineDist: flags.get('baseline-dist'),
  };
}
