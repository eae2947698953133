/**
 * The names of the keys the Redis state writes (docs/scaling.md#sizing).
 *
 * A salt's key is a fixed-length hash of (merchant id, salt) under the
 * prefix: no merchant id or salt in the clear in a key name, and the same
 * small size for every salt whatever the client sends, so Redis memory is
 * the signed rate times the window times one known size. The key's hash tag
 * (the part in braces) is one of `SALT_GROUPS` groups, taken from the hash
 * itself: on a Redis Cluster the salts spread over every master, and each
 * salt shares its slot with its group's life marker (salt-script.ts), so one
 * script reads the marker and writes the salt atomically.
 *
 * An address's throttle counter and its pairs' share the address's tag, so
 * one script changes them together on a cluster too; the tags of addresses
 * are escaped, so no address can move its keys to another's tag.
 */
import { createHash } from 'node:crypto';

/** Default prefix of every key and channel. */
export const DEFAULT_PREFIX = 'merchant-api:';

/** Bytes of SHA-256 kept in a salt's key: 128 bits, so no two salts ever share a key in practice. */
const SALT_HASH_BYTES = 16;

/**
 * Groups of salts, each with one life marker: enough to spread the salts over
 * the masters of a cluster, few enough that every marker is written when an
 * instance starts. A power of two, so a group is the hash's first bits.
 */
export const SALT_GROUPS = 1024;

/** An address as it may appear inside a hash tag: `%`, `{` and `}` escaped, so it is one-to-one. */
function tagSafe(id: string): string {
  return id.replace(/[%{}]/g, (c) => (c === '%' ? '%25' : c === '{' ? '%7B' : '%7D'));
}

/** The group of a salt's hash: its first ten bits. */
function groupOf(hash: Buffer): number {
  return ((hash[0]! << 8) | hash[1]!) & (SALT_GROUPS - 1);
}

/** A group's hash tag: three hex digits, so every salt's key has the same length. */
function tag(group: number): string {
  return group.toString(16).padStart(3, '0');
}

export class RedisKeys {
  readonly prefix: string;
  readonly #database: number;

  /** `database`: the connection's database number, which Pub/Sub ignores, so the channel names it. */
  constructor(prefix = DEFAULT_PREFIX, database = 0) {
    this.#database = database;
    if (/[{}]/.test(prefix)) throw new TypeError('The Redis prefix must not contain { or }: it would change the hash tags.');
    if (prefix.length > 64) throw new TypeError('The Redis prefix must be at most 64 characters: it is part of every salt\'s key.');
    this.prefix = prefix;
  }

  /** Since when a group's salts are kept (Unix seconds): see salt-script.ts. */
  lifeMarker(group: number): string {
    return `${this.prefix}{${tag(group)}}life`;
  }

  /** The `run_id` of the Redis that recorded a group's salts, beside its marker: see salt-script.ts. */
  bootMarker(group: number): string {
    return `${this.prefix}{${tag(group)}}boot`;
  }

  /** A group's sequence, raised by every new salt: a restart that lost a write is told by it (salt-script.ts). */
  sequence(group: number): string {
    return `${this.prefix}{${tag(group)}}seq`;
  }

  /**
   * The key of a merchant's salt and the life and boot markers of its group. The id's length goes first, so
   * no (merchant, salt) pair hashes the same text as another.
   */
  salt(merchantId: string, salt: string): { key: string; marker: string; boot: string; sequence: string; group: number } {
    const hash = createHash('sha256').update(`${merchantId.length}:${merchantId}${salt}`).digest();
    const group = groupOf(hash);
    return { key: `${this.prefix}{${tag(group)}}${hash.subarray(2, 2 + SALT_HASH_BYTES).toString('base64url')}`, marker: this.lifeMarker(group), boot: this.bootMarker(group), sequence: this.sequence(group), group };
  }

  /** The failure counter of a client address (a hash). */
  addressCounter(address: string): string {
    return `${this.prefix}{a:${tagSafe(address)}}:address`;
  }

  /** The consecutive failures of a merchant from an address (a hash), in the address's slot. */
  pairCounter(address: string, merchantId: string): string {
    return `${this.prefix}{a:${tagSafe(address)}}:pair:${merchantId}`;
  }

  /** The throttle's counter keys, each scored by the latest second it may live (throttle-scripts.ts ADMIT), in a slot of its own. */
  get census(): string {
    return `${this.prefix}{census}`;
  }

  /** Blocks in force, scored by their end, for instances that start (a sorted set of its own slot). */
  get blocks(): string {
    return `${this.prefix}{blocks}`;
  }

  /**
   * The channel every running instance listens to and nothing is sent on: Pub/Sub outlives a
   * FLUSHALL, so an instance that finds no life markers but listeners here knows the Redis lost
   * its data while instances ran (salt-script.ts). Named with the database, as the throttle's.
   */
  get presenceChannel(): string {
    return this.#database === 0 ? `${this.prefix}presence` : `${this.prefix}db${this.#database}:presence`;
  }

  /**
   * The channel every changed throttle record is published on. Pub/Sub has no databases: two
   * deployments on DB 0 and DB 1 of one server would hear each other's blocks, so a database other
   * than 0 is part of the name (0 keeps the name earlier versions used).
   */
  get throttleChannel(): string {
    return this.#database === 0 ? `${this.prefix}throttle` : `${this.prefix}db${this.#database}:throttle`;
  }
}
