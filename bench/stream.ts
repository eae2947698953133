/**
 * The streaming list (docs/protocol.md#users: "memory stays flat however many users
 * there are"): every user of the bench merchant in one response, timed on
 * the client, with the server's peak RSS growth read from /proc.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import type { Running } from './servers.js';

export interface StreamResult {
  server: string;
  users: number;
  bytes: number;
  /** Median over the timed runs. */
  usersPerSecond: number;
  runs: number[];
  /** Peak RSS during the streams minus RSS when idle, MB (10^6 bytes). */
  peakRssGrowthMb: number;
  rssIdleMb: number;
  rssPeakMb: number;
  /** How the peak was read: the kernel's high-water mark (reset first), or polling. */
  peakSource: 'VmHWM' | 'polling';
}

function status(pid: number): { rss: number; hwm: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(text)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/** GETs the whole list; resolves with the body size (and the body, when kept). */
function getAll(url: string, authorization: string, keep: boolean): Promise<{ bytes: number; body?: string; status: number }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/merchant/users`, { headers: { authorization } }, (res) => {
      let bytes = 0;
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (keep) chunks.push(chunk);
      });
      res.on('end', () => resolve({ bytes, status: res.statusCode ?? 0, body: keep ? Buffer.concat(chunks).toString('utf8') : undefined }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

export async function measureStream(server: Running, authorization: string, users: number, runs = 3): Promise<StreamResult> {
  const idle = status(server.pid).rss;
  // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0), so
  // the start-up peak (building 100,000 records) does not count.
  let peakSource: StreamResult['peakSource'] = 'VmHWM';
  try {
    writeFileSync(`/proc/${server.pid}/clear_refs`, '5');
  } catch {
    peakSource = 'polling';
  }
  let polled = idle;
  const poll = setInterval(() => {
    try {
      polled = Math.max(polled, status(server.pid).rss);
    } catch {
      // The server exited; the run below reports it.
    }
  }, 5);

  try {
    // First run checked in full: one valid JSON document with every user once.
    const first = await getAll(server.url, authorization, true);
    if (first.status !== 200) throw new Error(`${server.def.id}: streaming list answered ${first.status}`);
    const data = (JSON.parse(first.body!) as { data: { shared_user_id: string }[] }).data;
    if (data.length !== users || new Set(data.map((u) => u.shared_user_id)).size !== users) {
      throw new Error(`${server.def.id}: streaming list has ${data.length} records, expected ${users}`);
    }
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const start = performance.now();
      const { bytes, status: code } = await getAll(server.url, authorization, false);
      const seconds = (performance.now() - start) / 1000;
      if (code !== 200 || bytes !== first.bytes) throw new Error(`${server.def.id}: stream run ${i} answered ${code} with ${bytes} bytes`);
      times.push(users / seconds);
    }
    const peak = peakSource === 'VmHWM' ? Math.max(status(server.pid).hwm, polled) : polled;
    times.sort((a, b) => a - b);
    return {
      server: server.def.id,
      users,
      bytes: first.bytes,
      usersPerSecond: times[Math.floor(times.length / 2)]!,
      runs: times,
      peakRssGrowthMb: (peak - idle) / 1e6,
      rssIdleMb: idle / 1e6,
      rssPeakMb: peak / 1e6,
      peakSource,
    };
  } finally {
    clearInterval(poll);
  }
}
