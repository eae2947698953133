/**
 * Salts must never be evicted: an evicted salt is a replay let through
 * (docs/scaling.md#memory-and-eviction). So every master must say
 * `maxmemory-policy noeviction`, read with `CONFIG GET maxmemory-policy`: a
 * full Redis then refuses writes, which is a 503, never a silent loss.
 * `merchant-api serve` refuses to start on any other policy
 * (`RedisSetupError`); the policy is read again at most every `recheckMs`
 * in the background, so a policy changed at run time makes signed requests
 * 503 until it is set back. Requests never wait for that re-check while the
 * last answer was good.
 *
 * `maxmemory` must be set too (not 0): without a limit Redis grows until the
 * system kills it, and the salts go with it (a restart that refuses every
 * signed request for the tolerance). With a limit and `noeviction`, a full
 * Redis refuses writes instead (issue 34 §2).
 *
 * Managed services often refuse CONFIG. There the operator checks the policy
 * in the provider's settings and says so with `assumeNoEviction`
 * (REDIS_ASSUME_NOEVICTION=true); without it, salts are refused with an
 * error saying how. The same reading checks that every master runs Redis 7
 * or newer, which the scripts need (they declare their flags).
 */
import { StorageUnavailableError } from '../../errors.js';
import type { RedisConnection } from './connection.js';

export const REQUIRED_POLICY = 'noeviction';
/** The oldest Redis whose scripts may declare flags (`#!lua`). */
export const MIN_REDIS_MAJOR = 7;

/**
 * Redis answers, but is not set up to hold salts (an evicting policy, CONFIG refused without
 * `assumeNoEviction`, a version before 7): a 503 for a request, a refusal to start for the CLI.
 */
export class RedisSetupError extends StorageUnavailableError {
  constructor(message: string) {
    super(message);
    this.name = 'RedisSetupError';
  }
}

/** The major version INFO reports, or undefined when the text has none. */
export function redisMajor(info: string): number | undefined {
  const major = /^redis_version:(\d+)\./m.exec(info)?.[1];
  return major === undefined ? undefined : Number(major);
}

/** A master's version problem, or undefined. */
function versionProblem(info: string): string | undefined {
  const major = redisMajor(info);
  if (major === undefined || major < MIN_REDIS_MAJOR) return `a master runs Redis ${/^redis_version:(\S+)/m.exec(info)?.[1] ?? 'of an unknown version'}, and the scripts need ${MIN_REDIS_MAJOR} or newer`;
  return undefined;
}

/** A master's policy problem, or undefined. */
function policyProblem(policy: string): string | undefined {
  if (policy === REQUIRED_POLICY) return undefined;
  return `maxmemory-policy is ${policy} on a master, and salts could be evicted, letting replays through; set maxmemory-policy to ${REQUIRED_POLICY}`;
}

/** A master's memory limit problem, or undefined: 0 is no limit. */
function limitProblem(maxmemory: string): string | undefined {
  if (Number(maxmemory) !== 0) return undefined;
  return (
    'maxmemory is 0 (no limit) on a master, so Redis grows until the system kills it and the salts are lost with it; ' +
    'set maxmemory (docs/scaling.md#sizing sizes it), or, where a limit is set that CONFIG does not show, REDIS_ASSUME_NOEVICTION=true (the library\'s assumeNoEviction: true)'
  );
}

/** A refusal of CONFIG by the server (renamed, disabled, or denied by an ACL), as opposed to no answer. */
function isRefusal(error: unknown): boolean {
  return error instanceof Error && (error.name === 'ReplyError' || /^(ERR|NOPERM)\b/.test(error.message));
}

export const CONFIG_REFUSED =
  'this Redis refuses CONFIG GET maxmemory-policy (managed services often do), so the eviction policy cannot be checked: ' +
  `check it yourself (the provider's parameter group or settings, or \`redis-cli INFO memory\`, line maxmemory_policy) and, once it is ${REQUIRED_POLICY}, ` +
  'set REDIS_ASSUME_NOEVICTION=true (the library\'s assumeNoEviction: true)';

/** How soon a bad policy is read again. */
const BAD_RECHECK_MS = 1000;

export interface EvictionPolicyOptions {
  /** ms between background re-readings of a good verdict (default 10,000). */
  recheckMs?: number;
  /** The operator checked the policy where CONFIG is refused: only the version is read. */
  assumeNoEviction?: boolean;
}

export class EvictionPolicyCheck {
  readonly #connection: RedisConnection;
  readonly #recheckMs: number;
  readonly #assume: boolean;
  /** The last verdict, and when it was taken (performance.now()). */
  #good = false;
  #checkedAt = Number.NEGATIVE_INFINITY;
  #running: Promise<void> | undefined;
  #problem: RedisSetupError | StorageUnavailableError = new StorageUnavailableError('Salts are not recorded on Redis: not checked yet.');

  constructor(connection: RedisConnection, options: EvictionPolicyOptions = {}) {
    this.#connection = connection;
    this.#recheckMs = options.recheckMs ?? 10_000;
    this.#assume = options.assumeNoEviction ?? false;
  }

  /**
   * Resolves when salts may be written; throws RedisSetupError when Redis is not set up for them,
   * StorageUnavailableError when it did not answer (both a 503).
   */
  async ensure(): Promise<void> {
    // A bad verdict is checked again sooner: the operator may be fixing it now.
    const stale = performance.now() - this.#checkedAt >= (this.#good ? this.#recheckMs : Math.min(this.#recheckMs, BAD_RECHECK_MS));
    if (this.#good) {
      if (stale) void this.#check().catch(() => undefined);
      return;
    }
    if (stale || this.#running) await this.#check().catch(() => undefined);
    if (!this.#good) throw this.#problem;
  }

  /** Checks now (deduplicated); resolves whatever the verdict, throws only when Redis did not answer. */
  #check(): Promise<void> {
    this.#running ??= this.#read()
      .then(
        (problem) => {
          this.#good = problem === undefined;
          if (problem !== undefined) this.#problem = new RedisSetupError(`Salts are not recorded on Redis: ${problem}.`);
          this.#checkedAt = performance.now();
        },
        (error: unknown) => {
          this.#good = false;
          // Not timed: Redis did not answer, so the next request asks again (it fails at once while Redis is away).
          this.#problem = new StorageUnavailableError(`Salts are not recorded on Redis: the eviction policy could not be read (${error instanceof Error ? error.message : 'error'}).`, { cause: error });
          throw error;
        },
      )
      .finally(() => {
        this.#running = undefined;
      });
    return this.#running;
  }

  /** The problem of the first master that has one, or undefined; throws when Redis does not answer. */
  async #read(): Promise<string | undefined> {
    const infos = await this.#connection.infoOfEveryMaster();
    if (infos.length === 0) return 'no Redis master answered';
    const version = infos.map(versionProblem).find((p) => p !== undefined);
    if (version !== undefined || this.#assume) return version;
    let policies: string[];
    try {
      policies = await this.#connection.configOfEveryMaster('maxmemory-policy');
    } catch (error) {
      if (isRefusal(error)) return CONFIG_REFUSED;
      throw error;
    }
    const policy = policies.map(policyProblem).find((p) => p !== undefined);
    if (policy !== undefined) return policy;
    // CONFIG answered for the policy, so it answers for the limit too.
    return (await this.#connection.configOfEveryMaster('maxmemory')).map(limitProblem).find((p) => p !== undefined);
  }
}
