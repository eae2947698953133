/**
 * The throttle's shared counters on Redis (docs/security.md#sharing-the-counters-on-redis).
 * Failures and resets run the scripts of throttle-scripts.ts, which answer
 * the records they changed and publish them; each instance's subscription
 * hands what the others published to its throttles at once, so a block made
 * anywhere is refused everywhere within a round trip, with no polling. Blocks
 * are also kept in an index, for an instance that starts and for one whose
 * subscription broke (messages sent meanwhile are lost to it).
 */
import { MAX_ID_LENGTH } from '../contract.js';
import type { ReservationAnswer, ThrottleFailure, ThrottleRecord, ThrottleReservation, ThrottleRules, ThrottleStore, ThrottleStoreListener } from '../throttle-store.js';
import { countThrottleFull, RESERVATION_SECONDS, WeakListeners } from '../throttle-store.js';
import type { RedisConnection } from './connection.js';
import type { RedisKeys } from './keys.js';
import { ADMIT, INDEX_BLOCKS, PAIR_MEMORY_SECONDS, READ_BLOCKS, RECORD_FAILURE, RELEASE_CHECKS, RESERVE_CHECKS, RESET_PAIR, RESET_VISIBLE_SECONDS, SETTLE_ADMISSION } from './throttle-scripts.js';

/** Most blocks kept in the index, and read by an instance that starts. */
export const MAX_INDEXED_BLOCKS = 10_000;
/**
 * A census entry outlives its key by up to this (seconds), so a counter written often renews it
 * at most once an hour: the census over-counts by the keys that ended in the last hour, never under.
 */
export const CENSUS_RENEW_SECONDS = 3600;
/** A message larger than this is not one of ours: it is ignored. */
const MAX_MESSAGE_BYTES = 65_536;

/**
 * Addresses shared: printable ASCII up to 64 characters. The throttle gives
 * its address key (an IPv4 address, or an IPv6 network such as
 * `2001:db8:1:2::/64`: src/limits/address-key.ts), which fits whenever the client's address is an IP; others stay counted locally.
 */
export function isShareableAddress(address: string): boolean {
  return /^[\x21-\x7e]{1,64}$/.test(address);
}

export class RedisThrottleStore implements ThrottleStore {
  readonly #connection: RedisConnection;
  readonly #keys: RedisKeys;
  /** Tells this instance's messages from the others', which its throttles already have. */
  readonly #origin = crypto.randomUUID();
  /** Weak: a handler nobody holds any more stops being told, and its throttle can be collected. */
  readonly #listeners = new WeakListeners();
  #unsubscribe: (() => void) | undefined;
  #subscribedOnce = false;
  #closed = false;
  #fullCount = 0;

  constructor(connection: RedisConnection, keys: RedisKeys) {
    this.#connection = connection;
    this.#keys = keys;
  }

  async recordFailure({ address, merchantId, now, reserved }: ThrottleFailure, rules: ThrottleRules): Promise<readonly ThrottleRecord[]> {
    if (this.#closed || !isShareableAddress(address)) return [];
    const pair = merchantId !== undefined && merchantId.length <= MAX_ID_LENGTH;
    const keys = [this.#keys.addressCounter(address), ...(pair ? [this.#keys.pairCounter(address, merchantId)] : [])];
    const args = [now, rules.pairFailures, rules.pairBlockSeconds, rules.pairMaxBlockSeconds, rules.addressFailures, rules.addressWindowSeconds, rules.addressBlockSeconds];
    const giveBack = [reserved?.address ? 1 : 0, reserved?.pair && pair ? 1 : 0, reserved?.pair && pair ? merchantId : ''];
    const reply = await this.#connection.run(RECORD_FAILURE, keys, [...args, this.#keys.throttleChannel, this.#origin, address, pair ? merchantId : '', ...giveBack, ...censusHorizons(rules)]);
    const asked = parseAdmission(reply);
    if (asked !== undefined) await this.#settleAdmission(asked, keys, address, pair ? merchantId : undefined, now, rules);
    const records = parseMessage(reply)?.records ?? [];
    // A block just made (its count started again): kept for instances that start later.
    const blocks = records.filter((record) => record.blockedUntil > now && record.failures === 0);
    if (blocks.length > 0) {
      const members = blocks.flatMap((record) => [record.blockedUntil, JSON.stringify(record)]);
      // The count is in, and published: a failed index write costs only instances that start later, so it is reported, not thrown.
      await this.#connection.run(INDEX_BLOCKS, [this.#keys.blocks], [now, MAX_INDEXED_BLOCKS, ...members]).catch((error: unknown) => {
        for (const listener of this.#listeners.live()) listener.failed(error);
      });
    }
    return records;
  }

  /** Failures this store could not count in Redis because the census was full (`merchant_api_throttle_full_total`). */
  get fullCount(): number {
    return this.#fullCount;
  }

  /**
   * A counter new to the census (or due to renew its entry), just written: admitted while there
   * is room, else it goes again and the failure stays counted by each instance alone.
   */
  async #settleAdmission(asked: { address: boolean; pair: boolean }, keys: string[], address: string, merchantId: string | undefined, now: number, rules: ThrottleRules): Promise<void> {
    const [addressHorizon, pairHorizon] = censusHorizons(rules);
    const wanted: [member: string, until: number][] = [];
    if (asked.address) wanted.push([address, now + addressHorizon + CENSUS_RENEW_SECONDS]);
    const askPair = asked.pair && merchantId !== undefined;
    if (askPair) wanted.push([`${address}\n${merchantId}`, now + pairHorizon + CENSUS_RENEW_SECONDS]);
    const answers = await this.#admit(wanted, now, rules);
    const addressAnswer = asked.address ? answers[0]! : '';
    const pairAnswer = askPair ? answers[asked.address ? 1 : 0]! : '';
    await this.#connection.run(SETTLE_ADMISSION, askPair ? keys : keys.slice(0, 1), askPair ? [addressAnswer, pairAnswer] : [addressAnswer]);
    if (answers.some((until) => until === 0)) {
      this.#fullCount++;
      countThrottleFull();
      for (const listener of this.#listeners.live()) listener.full?.(rules.maxEntries);
    }
  }

  /** Asks the census to admit `members` (docs/scaling.md#the-throttles-keys): until when each is, 0 when refused. */
  async #admit(members: readonly [member: string, until: number][], now: number, rules: ThrottleRules): Promise<number[]> {
    if (members.length === 0) return [];
    const reply = await this.#connection.run(ADMIT, [this.#keys.census], [now, rules.maxEntries, ...members.flat()]);
    return members.map((_, i) => (Array.isArray(reply) ? Number(reply[i]) || 0 : 0));
  }

  async reserveChecks({ address, merchantId, addressCount, pairCount, forced, now }: ThrottleReservation, rules: ThrottleRules): Promise<ReservationAnswer> {
    // Counted locally only (as its failures): nothing to reserve here.
    if (this.#closed || !isShareableAddress(address)) return { granted: true, records: [] };
    const merchant = merchantId !== undefined && merchantId.length <= MAX_ID_LENGTH ? merchantId : '';
    const keys = [this.#keys.addressCounter(address), this.#keys.pairCounter(address, merchant)];
    const args = [now, rules.pairFailures, rules.addressFailures, rules.addressWindowSeconds, this.#origin, merchant, addressCount, merchant === '' ? 0 : pairCount, RESERVATION_SECONDS, forced?.address ?? 0, merchant === '' ? 0 : (forced?.pair ?? 0), this.#keys.throttleChannel, address];
    return { granted: (await this.#connection.run(RESERVE_CHECKS, keys, args)) === 1, records: [] };
  }

  async releaseChecks({ address, merchantId, addressCount, pairCount }: ThrottleReservation): Promise<void> {
    if (this.#closed || !isShareableAddress(address)) return;
    const merchant = merchantId !== undefined && merchantId.length <= MAX_ID_LENGTH ? merchantId : '';
    await this.#connection.run(RELEASE_CHECKS, [this.#keys.addressCounter(address)], [this.#origin, merchant, addressCount, pairCount]);
  }

  async resetPair(address: string, merchantId: string, now: number): Promise<readonly ThrottleRecord[]> {
    if (this.#closed || !isShareableAddress(address) || merchantId.length > MAX_ID_LENGTH) return [];
    const reply = await this.#connection.run(RESET_PAIR, [this.#keys.pairCounter(address, merchantId)], [now, this.#keys.throttleChannel, this.#origin, address, merchantId]);
    return parseMessage(reply)?.records ?? [];
  }

  async activeBlocks(now: number): Promise<readonly ThrottleRecord[]> {
    if (this.#closed) return [];
    const reply = await this.#connection.run(READ_BLOCKS, [this.#keys.blocks], [now, MAX_INDEXED_BLOCKS]);
    return (Array.isArray(reply) ? reply : []).flatMap((member) => {
      const record = typeof member === 'string' ? parseIndexedBlock(member) : undefined;
      return record ? [record] : [];
    });
  }

  subscribe(listener: ThrottleStoreListener): () => void {
    if (this.#closed) return () => undefined;
    const remove = this.#listeners.add(listener);
    this.#unsubscribe ??= this.#connection.subscribe(this.#keys.throttleChannel, {
      message: (text) => this.#received(text),
      ready: () => this.#subscriptionReady(),
      failed: (error) => {
        for (const live of this.#listeners.live()) live.failed(error);
      },
    });
    return () => {
      remove();
      if (this.#listeners.size === 0) this.#stopListening();
    };
  }

  /** Stops listening; the counters stay in Redis. */
  close(): void {
    this.#closed = true;
    this.#listeners.clear();
    this.#stopListening();
  }

  #stopListening(): void {
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    this.#subscribedOnce = false;
  }

  #received(text: string): void {
    if (text.length > MAX_MESSAGE_BYTES) return;
    const message = parseMessage(text);
    if (message === undefined || message.origin === this.#origin) return;
    const listeners = this.#listeners.live();
    if (listeners.length === 0) return this.#stopListening();
    if (message.busy.length > 0) {
      for (const listener of listeners) listener.busy?.(message.busy);
      return;
    }
    for (const listener of listeners) listener.learn(message.records);
  }

  /** Subscribed again after a break: what was published meanwhile is lost, so the blocks in force are read. */
  #subscriptionReady(): void {
    if (!this.#subscribedOnce) {
      // The first time, each throttle reads the blocks itself when it starts.
      this.#subscribedOnce = true;
      return;
    }
    this.activeBlocks(Math.floor(Date.now() / 1000)).then(
      (records) => {
        for (const listener of this.#listeners.live()) listener.learn(records);
      },
      (error: unknown) => {
        for (const listener of this.#listeners.live()) listener.failed(error);
      },
    );
  }
}

/**
 * The longest an address's counter key and a pair's live after a write, in seconds (throttle-scripts.ts
 * sets their expiry): the address's window or its block, a pair's memory or its longest block; a
 * second more each. The reservations' expiry and an operator's lift (RESET_VISIBLE_SECONDS) are within both.
 */
export function censusHorizons(rules: ThrottleRules): [address: number, pair: number] {
  return [Math.max(rules.addressWindowSeconds, rules.addressBlockSeconds, RESERVATION_SECONDS, RESET_VISIBLE_SECONDS) + 1, Math.max(PAIR_MEMORY_SECONDS, rules.pairMaxBlockSeconds) + 1];
}

/** Which counters the census must admit (RECORD_FAILURE's answer), or undefined when none. */
function parseAdmission(reply: unknown): { address: boolean; pair: boolean } | undefined {
  if (typeof reply !== 'string' || !reply.includes('"admit"')) return undefined;
  const admit = (safeParse(reply) as { admit?: unknown } | undefined)?.admit;
  if (!Array.isArray(admit)) return undefined;
  return { address: admit[0] === 1, pair: admit[1] === 1 };
}

/** A member of the blocks index, or undefined when it is not one. */
export function parseIndexedBlock(member: string): ThrottleRecord | undefined {
  return toRecord(safeParse(member));
}

interface Message {
  origin: string;
  records: ThrottleRecord[];
  /** Addresses another instance just reserved checks of (RESERVE_CHECKS). */
  busy: string[];
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A script's answer or a published message; undefined when it is not one. */
function parseMessage(reply: unknown): Message | undefined {
  if (typeof reply !== 'string' || reply === '') return undefined;
  const value = safeParse(reply) as { origin?: unknown; records?: unknown; busy?: unknown } | undefined;
  if (typeof value?.origin !== 'string') return undefined;
  const busy = Array.isArray(value.busy) ? value.busy.filter((address): address is string => typeof address === 'string' && isShareableAddress(address)) : [];
  // cjson writes an empty table as {}; a message always has records, but a malformed one has none.
  const records = Array.isArray(value.records) ? value.records.map(toRecord).filter((r): r is ThrottleRecord => r !== undefined) : [];
  return { origin: value.origin, records, busy };
}

function toRecord(value: unknown): ThrottleRecord | undefined {
  const v = value as Record<string, unknown> | undefined;
  if (typeof v !== 'object' || v === null) return undefined;
  const { scope, address, merchantId, failures, windowStart, blocks, blockedUntil, version, lifted } = v;
  if ((scope !== 'address' && scope !== 'pair') || typeof address !== 'string' || typeof version !== 'string') return undefined;
  if (![failures, windowStart, blocks, blockedUntil].every((n) => typeof n === 'number' && Number.isFinite(n))) return undefined;
  if (scope === 'pair' && (typeof merchantId !== 'string' || merchantId === '')) return undefined;
  return {
    scope,
    address,
    merchantId: scope === 'pair' ? (merchantId as string) : undefined,
    failures: failures as number,
    windowStart: windowStart as number,
    blocks: blocks as number,
    blockedUntil: blockedUntil as number,
    // An operator's lift (throttle-admin.ts): every instance drops the block.
    ...(lifted === true ? { lifted: true } : {}),
    version,
  };
}
