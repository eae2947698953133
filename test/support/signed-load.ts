/**
 * Signed URLs sent without pause to running servers while a test breaks their database: each loop
 * signs a URL with a fresh salt, sends it to the next server, and keeps every URL answered 200 (for
 * the replay afterwards) with the time of every answer, so that a test can say how long the
 * servers refused service. After a refusal a loop waits a little, so that 503s answered in a
 * millisecond do not take the machine's cores from the database starting again.
 */
import { signUrl } from '../../src/signing/index.js';
import { send } from './http-client.js';
import { sleep } from './sleep.js';

export interface Answer {
  /** performance.now() when the answer arrived. */
  at: number;
  status: number;
  /** Which server (index into the list) answered. */
  server: number;
}

export interface SignedLoad {
  /** Path and query of every URL some server answered 200. */
  readonly accepted: readonly string[];
  readonly answers: readonly Answer[];
  /** Ends the loops; resolves once every request in flight has its answer. */
  stop(): Promise<void>;
}

export function startSignedLoad(servers: () => readonly string[], options: { merchantId: string; key: string; publicUrl: string; loops?: number }): SignedLoad {
  const accepted: string[] = [];
  const answers: Answer[] = [];
  let running = true;
  let next = 0;
  const loop = async () => {
    while (running) {
      const targets = servers();
      const server = next++ % targets.length;
      const signed = new URL(signUrl(options.key, `${options.publicUrl}/validatesignature`, { cp: options.merchantId }));
      const target = `${signed.pathname}${signed.search}`;
      let status: number;
      try {
        ({ status } = await send(`${targets[server]}${target}`));
      } catch {
        status = 0;
      }
      answers.push({ at: performance.now(), status, server });
      if (status === 200) accepted.push(target);
      else await sleep(50);
    }
  };
  const loops = Array.from({ length: options.loops ?? 4 }, loop);
  return {
    accepted,
    answers,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** The first answer of `status` after `since` (from `server` when given), or undefined. */
export function firstAnswer(answers: readonly Answer[], since: number, status: number, server?: number): Answer | undefined {
  return answers.find((a) => a.at > since && a.status === status && (server === undefined || a.server === server));
}

/**
 * Sends every URL of `targets` again, 8 at a time, each to `server(i)`; resolves with the final
 * status of each. A 503 (the database busy or still starting) is no verdict: it is sent again,
 * up to 20 times, so that only 200 (accepted twice) or 400 (refused as a replay) remain.
 */
export async function replayAll(targets: readonly string[], server: (i: number) => string): Promise<number[]> {
  const statuses: number[] = new Array(targets.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < targets.length; i = next++) {
      // A 503 (a node still recovering) is asked again until it answers otherwise, for 60 s at most:
      // a deadline, not a count of tries, so a busy machine gets the same time as a quiet one.
      for (const deadline = Date.now() + 60_000; ; ) {
        const { status } = await send(`${server(i)}${targets[i]}`);
        statuses[i] = status;
        if (status !== 503 || Date.now() > deadline) break;
        await sleep(250);
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return statuses;
}
