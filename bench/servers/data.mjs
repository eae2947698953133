/**
 * Data and settings every bench server shares, so that all of them do the
 * same work on the same records. Plain JavaScript on purpose: Node, Bun and
 * Deno all run it unchanged, and no TypeScript loader sits inside a measured
 * process.
 */

/** The one merchant the load generator authenticates and signs as. */
export const MERCHANT_ID = 'bench-merchant';
export const MERCHANT_KEY = 'bench-secret-0123456789';
/** The base URL every server is told it is reachable at (the `publicUrl` option), so signatures do not depend on the port. */
export const PUBLIC_URL = 'http://api.bench.example';
/** Wide enough that one pre-signed batch of URLs stays valid for the whole run. */
export const TIMESTAMP_TOLERANCE = 86_400;
export const CURSOR_SECRET = 'bench-cursor-secret-0123456789abcdef';
/** The id the single-user case asks for. */
export const SINGLE_USER_ID = 'u0000042';

/** How many users the merchant has (the streaming case lists all of them). */
export function userCount() {
  const value = Number(globalThis.process?.env?.BENCH_USERS ?? 100_000);
  return Number.isInteger(value) && value > 0 ? value : 100_000;
}

/** Deterministic, varied user records with all 14 keys; ids sort in code-point order. */
export function makeUsers(count = userCount()) {
  const first = ['Ada', 'Grace', 'Jürgen', 'Zoë', 'Łukasz', '美咲', 'Olu', 'Anaïs'];
  const last = ['Lovelace', 'Hopper', 'Müller', 'Østergaard', 'Nakamura', 'Okafor', 'Dubois', 'Silva'];
  const cities = [['Berlin', null, 'de', 'de'], ['München', 'Bayern', 'de', 'de'], ['London', null, 'gb', 'en'], ['東京', 'Tōkyō', 'jp', 'ja']];
  const users = [];
  for (let i = 0; i < count; i++) {
    const id = `u${String(i).padStart(7, '0')}`;
    const [city, state, country, language] = cities[i % cities.length];
    const micros = String(i % 1_000_000).padStart(6, '0');
    users.push({
      shared_user_id: id,
      first_name: first[i % first.length],
      last_name: last[(i >> 3) % last.length],
      email_address: `${id}@example.com`,
      street: `Hauptstraße ${(i % 200) + 1}`,
      zip_code: String(10_000 + (i % 89_999)),
      city,
      state,
      country,
      preferred_language: language,
      date_joined: `2019-12-12T12:19:17.${micros}+00:00`,
      deactivated_at: i % 7 === 0 ? `2021-03-04T05:06:07.${micros}+00:00` : null,
      agreed_to_terms_and_conditions: i % 3 === 0 ? null : `2019-12-12T12:19:18.${micros}+00:00`,
      agreed_to_marketing: i % 5 === 0 ? `2020-01-01T00:00:00.${micros}+00:00` : null,
    });
  }
  return users;
}

/** Port from the environment (0: any free port). */
export function portFromEnv() {
  return Number(globalThis.process?.env?.PORT ?? 0);
}

/** The line the orchestrator waits for. */
export function announce(port) {
  // On stderr: stdout is the access log's, which the harness sends to a file.
  console.error(`READY ${port}`);
}

/** Exit cleanly on SIGTERM/SIGINT, so `--cpu-prof` gets written. */
export function exitOnSignal(close) {
  const stop = async () => {
    try {
      await close?.();
    } finally {
      globalThis.process.exit(0);
    }
  };
  globalThis.process.on('SIGTERM', stop);
  globalThis.process.on('SIGINT', stop);
}
