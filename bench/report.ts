/** Medians over rounds, the printed table, and the performance targets checked against them. */
import type { LoadResult } from './load.js';
import type { StreamResult } from './stream.js';

export interface Measurement extends LoadResult {
  round: number;
  server: string;
  label: string;
  case: string;
  /** req/s divided by the constant-JSON server's req/s in the same round. */
  ratio?: number;
  /** The same ratio from server CPU time per request, which other load on the machine disturbs less. */
  cpuRatio?: number;
}

export interface Row {
  server: string;
  label: string;
  case: string;
  rounds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  ratio?: number;
  cpuRatio?: number;
  serverCpu: number;
  cpuUsPerRequest: number;
  failures: number;
  wrapped: number;
}

export interface Target {
  name: string;
  goal: string;
  measured: string;
  met: boolean | undefined;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function aggregate(measurements: Measurement[]): Row[] {
  const groups = new Map<string, Measurement[]>();
  for (const m of measurements) {
    const key = `${m.server}\u0000${m.case}`;
    groups.set(key, [...(groups.get(key) ?? []), m]);
  }
  return [...groups.values()].map((ms) => {
    const ratios = ms.map((m) => m.ratio).filter((r): r is number => r !== undefined);
    const cpuRatios = ms.map((m) => m.cpuRatio).filter((r): r is number => r !== undefined && Number.isFinite(r));
    return {
      server: ms[0]!.server,
      label: ms[0]!.label,
      case: ms[0]!.case,
      rounds: ms.length,
      rps: median(ms.map((m) => m.rps)),
      p50Ms: median(ms.map((m) => m.p50Ms)),
      p99Ms: median(ms.map((m) => m.p99Ms)),
      ratio: ratios.length ? median(ratios) : undefined,
      cpuRatio: cpuRatios.length ? median(cpuRatios) : undefined,
      serverCpu: median(ms.map((m) => m.serverCpu ?? NaN)),
      cpuUsPerRequest: median(ms.map((m) => m.cpuUsPerRequest ?? NaN)),
      failures: ms.reduce((sum, m) => sum + m.non2xx + m.socketErrors, 0),
      wrapped: ms.reduce((sum, m) => sum + m.wrapped, 0),
    };
  });
}

const fmt = (n: number | undefined, digits = 0) => (n === undefined ? '-' : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }));

/** A Markdown table (readable in a terminal too). */
export function table(rows: Row[]): string {
  const lines = [
    '| server | case | req/s | p50 ms | p99 ms | x (0) | server CPU | CPU us/req | x (0) by CPU | failures |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  const x = (n: number | undefined) => (n === undefined ? '-' : `${fmt(n, 2)}x`);
  for (const r of rows) {
    const failures = r.failures === 0 ? '0' : `**${fmt(r.failures)}**${r.wrapped ? ' (paths ran out)' : ''}`;
    lines.push(
      `| ${r.label} | ${r.case} | ${fmt(r.rps)} | ${fmt(r.p50Ms, 2)} | ${fmt(r.p99Ms, 2)} | ${x(r.ratio)} | ` +
        `${Number.isFinite(r.serverCpu) ? `${fmt(r.serverCpu * 100)}%` : '-'} | ${fmt(r.cpuUsPerRequest, 1)} | ${x(r.cpuRatio)} | ${failures} |`,
    );
  }
  return lines.join('\n');
}

export function streamTable(results: StreamResult[]): string {
  const lines = ['| server | users | MB sent | users/s (median) | peak RSS growth MB | idle RSS MB |', '|---|--:|--:|--:|--:|--:|'];
  for (const s of results) {
    lines.push(`| ${s.server} | ${fmt(s.users)} | ${fmt(s.bytes / 1e6, 1)} | ${fmt(s.usersPerSecond)} | ${fmt(s.peakRssGrowthMb, 1)} | ${fmt(s.rssIdleMb, 1)} |`);
  }
  return lines.join('\n');
}

/** Per-round ratios of two servers on one case: median, lowest and highest (the spread). */
export function pairedSpread(ms: Measurement[], caseId: string, a: string, b: string, by: 'rps' | 'cpu' = 'rps'): { median: number; min: number; max: number; rounds: number } | undefined {
  const ratios: number[] = [];
  for (const m of ms.filter((x) => x.server === a && x.case === caseId)) {
    const other = ms.find((x) => x.server === b && x.case === caseId && x.round === m.round);
    // By CPU: the other's CPU time per request over this one's, so that above 1 is faster here too.
    const ratio = !other ? NaN : by === 'rps' ? m.rps / other.rps : other.cpuUsPerRequest! / m.cpuUsPerRequest!;
    if (Number.isFinite(ratio)) ratios.push(ratio);
  }
  return ratios.length ? { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios), rounds: ratios.length } : undefined;
}

/**
 * What `npm run bench` prints first: each merchant-api server against the
 * plain peer (bench/servers/plain-node.mjs) and against the fs.WriteStream
 * one (plain-node-stream.mjs), req/s of the same round, median and spread;
 * and by server CPU time per request, which other work on a shared machine
 * disturbs less.
 */
export function plainPeerTable(ms: Measurement[], servers: { id: string; label: string }[]): string | undefined {
  const lines = ['| server | case | x plain peer (1) | spread | x (1) by CPU | spread | x (1b) WriteStream peer | spread | rounds |', '|---|---|--:|---|--:|---|--:|---|--:|'];
  const x = (r: ReturnType<typeof pairedSpread>) => (r === undefined ? ['-', '-'] : [`${fmt(r.median, 2)}x`, `${fmt(r.min, 2)}-${fmt(r.max, 2)}`]);
  for (const caseId of ['validatesignature', 'user', 'page']) {
    for (const server of servers.filter((s) => s.id.startsWith('merchant-api-'))) {
      const plain = pairedSpread(ms, caseId, server.id, 'node-plain');
      const byCpu = pairedSpread(ms, caseId, server.id, 'node-plain', 'cpu');
      const stream = pairedSpread(ms, caseId, server.id, 'node-plain-stream');
      if (!plain && !stream) continue;
      lines.push(`| ${server.label} | ${caseId} | ${x(plain).join(' | ')} | ${x(byCpu).join(' | ')} | ${x(stream).join(' | ')} | ${plain?.rounds ?? stream?.rounds} |`);
    }
  }
  return lines.length > 2 ? lines.join('\n') : undefined;
}

/** A paired ratio as `median (lowest-highest)`. */
const spread = (r: ReturnType<typeof pairedSpread>, unit: string) => (r === undefined ? 'not run' : `${fmt(r.median, 2)}${unit} (${fmt(r.min, 2)}-${fmt(r.max, 2)}, ${r.rounds} rounds)`);

/** Per-round ratios to the constant-JSON server (measured on its own case, `constant`): median and spread. */
function limitSpread(ms: Measurement[], caseId: string, server: string): ReturnType<typeof pairedSpread> {
  const ratios = ms.filter((m) => m.server === server && m.case === caseId && m.ratio !== undefined).map((m) => m.ratio!);
  return ratios.length ? { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios), rounds: ratios.length } : undefined;
}

/** Per-round ratio of two servers on one case, median over rounds. */
const pairedRatio = (ms: Measurement[], caseId: string, a: string, b: string) => pairedSpread(ms, caseId, a, b)?.median;

export function targets(rows: Row[], ms: Measurement[], streams: StreamResult[]): Target[] {
  const row = (server: string, c: string) => rows.find((r) => r.server === server && r.case === c);
  const out: Target[] = [];
  const ratioTarget = (c: string) => {
    const r = row('merchant-api-node', c)?.ratio;
    out.push({ name: `${c} on the Node adapter vs the constant-JSON limit`, goal: '>= 0.60x', measured: r === undefined ? 'not run' : `${fmt(r, 2)}x`, met: r === undefined ? undefined : r >= 0.6 });
  };
  ratioTarget('validatesignature');
  ratioTarget('user');
  for (const c of ['validatesignature', 'user']) {
    // Both with every default on and the same JSON access line written to a file with process.stdout.write (bench/servers/plain-node.mjs).
    const vsPlain = pairedRatio(ms, c, 'merchant-api-node', 'node-plain');
    out.push({ name: `${c} on the Node adapter, every default on, vs the plain peer (node:http, the same access line by process.stdout.write)`, goal: '>= 1.0x', measured: vsPlain === undefined ? 'not run' : `${fmt(vsPlain, 2)}x`, met: vsPlain === undefined ? undefined : vsPlain >= 1 });
  }
  for (const c of ['validatesignature', 'user']) {
    const onOff = pairedSpread(ms, c, 'merchant-api-node', 'merchant-api-node-nolog');
    out.push({
      name: `${c}: access log on vs off (every other default on), same round`,
      goal: '>= 0.95',
      measured: onOff === undefined ? 'not run' : `${fmt(onOff.median, 2)} (${fmt(onOff.min, 2)}-${fmt(onOff.max, 2)})`,
      met: onOff === undefined ? undefined : onOff.median >= 0.95,
    });
  }
  // The standalone server as deployed (`merchant-api serve`, bench/servers.ts), issue 43.
  for (const c of ['validatesignature', 'user']) {
    const vsPlain = pairedSpread(ms, c, 'merchant-api-cli', 'node-plain');
    out.push({ name: `${c} on merchant-api serve, every default on, vs the plain peer`, goal: '>= 1.0x', measured: spread(vsPlain, 'x'), met: vsPlain === undefined ? undefined : vsPlain.median >= 1 });
    const onOff = pairedSpread(ms, c, 'merchant-api-cli', 'merchant-api-cli-nolog');
    out.push({ name: `${c} on merchant-api serve: access log on vs off (ACCESS_LOG=false), same round`, goal: '>= 0.95', measured: spread(onOff, ''), met: onOff === undefined ? undefined : onOff.median >= 0.95 });
    const vsLimit = limitSpread(ms, c, 'merchant-api-cli');
    out.push({ name: `${c} on merchant-api serve vs the constant-JSON limit`, goal: '>= 0.35x', measured: spread(vsLimit, 'x'), met: vsLimit === undefined ? undefined : vsLimit.median >= 0.35 });
  }
  const vsHono = pairedRatio(ms, 'validatesignature', 'merchant-api-node', 'hono-node');
  out.push({ name: 'validatesignature on the Node adapter vs the Hono app', goal: '>= 1.5x', measured: vsHono === undefined ? 'not run' : `${fmt(vsHono, 2)}x`, met: vsHono === undefined ? undefined : vsHono >= 1.5 });
  for (const c of ['validatesignature', 'user', 'page']) {
    const quiet = pairedRatio(ms, c, 'merchant-api-node-quiet', 'merchant-api-node');
    const cost = quiet === undefined ? undefined : (quiet - 1) * 100;
    out.push({ name: `${c}: cost of the access log and hooks (vs the same build with them off)`, goal: '<= 5%', measured: cost === undefined ? 'not run' : `${fmt(cost, 1)}%`, met: cost === undefined ? undefined : cost <= 5 });
  }
  const bun = pairedRatio(ms, 'validatesignature', 'merchant-api-bun', 'merchant-api-node');
  out.push({ name: 'validatesignature on Bun vs on Node', goal: '>= 2x', measured: bun === undefined ? 'not run' : `${fmt(bun, 2)}x`, met: bun === undefined ? undefined : bun >= 2 });
  for (const r of rows.filter((x) => x.server === 'merchant-api-deno')) {
    const q = r.p99Ms / r.p50Ms;
    out.push({ name: `Deno p99 vs p50, ${r.case}`, goal: '<= 3x', measured: `${fmt(r.p99Ms, 2)} / ${fmt(r.p50Ms, 2)} ms = ${fmt(q, 2)}x`, met: q <= 3 });
  }
  if (!streams.some((s) => s.server === 'merchant-api-node')) {
    out.push({ name: 'stream 100,000 users on Node', goal: '< 50 MB, >= 200,000 users/s', measured: 'not run', met: undefined });
  }
  for (const s of streams) {
    out.push({ name: `stream ${fmt(s.users)} users, ${s.server}: peak RSS growth`, goal: '< 50 MB', measured: `${fmt(s.peakRssGrowthMb, 1)} MB`, met: s.peakRssGrowthMb < 50 });
    out.push({ name: `stream ${fmt(s.users)} users, ${s.server}: throughput`, goal: '>= 200,000 users/s', measured: `${fmt(s.usersPerSecond)} users/s`, met: s.usersPerSecond >= 200_000 });
  }
  const failed = rows.filter((r) => r.failures > 0);
  out.push({ name: 'every measured answer a 2xx', goal: '0 failures', measured: failed.length ? failed.map((r) => `${r.server}/${r.case}: ${r.failures}`).join(', ') : '0', met: failed.length === 0 });
  return out;
}

export function targetTable(list: Target[]): string {
  const lines = ['| target | goal | measured | |', '|---|---|---|---|'];
  for (const t of list) lines.push(`| ${t.name} | ${t.goal} | ${t.measured} | ${t.met === undefined ? '-' : t.met ? 'met' : '**missed**'} |`);
  return lines.join('\n');
}
