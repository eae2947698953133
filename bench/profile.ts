/**
 * Reads a `.cpuprofile` (node --cpu-prof) and lists where the self time
 * went: by function, and by area (merchant-api, @hono/node-server, Node
 * internals, GC, native).
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  totalMs: number;
  areas: { area: string; percent: number }[];
  functions: { name: string; where: string; area: string; percent: number }[];
}

function area(url: string, name: string): string {
  if (name === '(garbage collector)') return 'GC';
  if (name === '(idle)') return 'idle';
  if (name === '(program)') return 'program (native, unattributed)';
  if (url.includes('@hono/node-server')) return '@hono/node-server';
  if (url.includes('/jose/')) return 'jose';
  if (url.includes('/.dist/') || url.includes('/dist/')) return 'merchant-api';
  if (url.includes('/bench/')) return 'bench fixture';
  if (url.startsWith('node:')) return 'Node internals (JS)';
  if (url === '') return 'native / V8 builtins';
  return 'other';
}

export function summarizeProfile(file: string, top = 25): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i] ?? 0;
    self.set(profile.samples[i]!, (self.get(profile.samples[i]!) ?? 0) + dt);
    total += dt;
  }
  const functions = new Map<string, { name: string; where: string; area: string; us: number }>();
  const areas = new Map<string, number>();
  for (const [id, us] of self) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const name = functionName || '(anonymous)';
    const where = url ? `${url.replace(/^.*\/(node_modules|\.dist|bench)\//, '$1/')}:${lineNumber + 1}` : '';
    const key = `${name}@${where}`;
    const entry = functions.get(key) ?? { name, where, area: area(url, functionName), us: 0 };
    entry.us += us;
    functions.set(key, entry);
    areas.set(entry.area, (areas.get(entry.area) ?? 0) + us);
  }
  const busy = total - (areas.get('idle') ?? 0);
  const pct = (us: number) => Math.round((us / busy) * 1000) / 10;
  return {
    totalMs: busy / 1000,
    areas: [...areas].filter(([a]) => a !== 'idle').sort((a, b) => b[1] - a[1]).map(([a, us]) => ({ area: a, percent: pct(us) })),
    functions: [...functions.values()]
      .filter((f) => f.area !== 'idle')
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((f) => ({ name: f.name, where: f.where, area: f.area, percent: pct(f.us) })),
  };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/^.*\//, '/'))) {
  const summary = summarizeProfile(process.argv[2]!, Number(process.argv[3] ?? 25));
  console.log(JSON.stringify(summary, null, 2));
}
