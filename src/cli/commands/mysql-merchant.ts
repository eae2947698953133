/**
 * `merchant-api merchant add|disable|enable|rotate-key|keys|revoke-key|delete|list`: merchant
 * and key administration on MySQL. A new key is printed once and stored only sealed; keys are
 * named by their public id (`key_...`) and fingerprint. Every change writes one log event
 * (admin-log.ts). Running servers take a new key at once (a key they do not know makes them
 * read the merchant again); a revoked key, a disabled merchant or a deleted one reaches them
 * within their key cache TTL.
 */
import { createInterface } from 'node:readline/promises';
import {
  addMerchant,
  addRandomMerchantKey,
  deleteMerchant,
  listMerchantKeys,
  listMerchants,
  revokeMerchantKey,
  rotateMerchantKey,
  setMerchantStatus,
  updateMerchantKey,
  type MerchantKeySummary,
} from '../../storage/mysql/index.js';
import { keyModeProblem } from '../../cli-internal.js';
import { ACTOR_OPTION, actorOf } from './actor.js';
import { KEY_OPTIONS, KEY_OPTIONS_USAGE, keySettingsOf } from './key-options.js';
import type { CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';
import type { MysqlConfig } from '../config.js';
import { logAdminChange } from './admin-log.js';
import { runMysqlCommand, withDatabase } from './mysql-env.js';
import { commandGroup, parseCommandArgs } from './parse-args.js';
import { parseDuration } from './duration.js';

const USAGE = `Usage: merchant-api merchant <subcommand>
  add ID [--disabled] [KEY OPTIONS] [--json]
                                      add a merchant with a new random API key (printed once)
  add-key ID [--mode live|test] [KEY OPTIONS] [--json]
                                      add a new random key beside the others (printed once);
                                      --mode test: a test key (test_…), which sees the test dataset only
  disable ID | enable ID              stop or restore access for a merchant
  rotate-key ID [--revoke-old | --expire-old-in DURATION] [KEY OPTIONS] [--json]
                                      add a new key; --revoke-old revokes every older one now,
                                      --expire-old-in (e.g. 24h, 7d) lets them work until then
  update-key ID KEY_ID [KEY OPTIONS] [--no-expiry]
                                      change a key's name, scopes, networks or end
                                      (an empty --name or --allow-from clears it)
  keys ID [--json]                    the merchant's keys: id, name, mode, scopes, created, last used, expires, networks
  revoke-key ID KEY_ID                revoke one key, named by its id (see keys)
  delete ID [--yes]                   delete a merchant with its keys and user shares (asks first)
  list [--json]                       every merchant with its status and key counts
${KEY_OPTIONS_USAGE}
Every change takes --actor NAME (else MERCHANT_API_ACTOR, else the OS user) for the audit trail.`;

/** The `merchant` command. */
export const merchantCommand = commandGroup('merchant', USAGE, {
  add,
  'add-key': addKey,
  'update-key': updateKey,
  disable: (args, io, config) => setStatus('disable', args, io, config),
  enable: (args, io, config) => setStatus('enable', args, io, config),
  'rotate-key': rotate,
  keys,
  'revoke-key': revokeKey,
  delete: remove,
  list,
});

async function add(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { disabled: { type: 'boolean' }, json: { type: 'boolean' }, ...KEY_OPTIONS, ...ACTOR_OPTION }, 1);
  if (parsed === 'help') return help(io);
  const [id] = parsed.positionals as [string];
  const settings = keySettingsOf(parsed.values);
  const key = config.masterKey();
  return runMysqlCommand(io, 'merchant add', () =>
    withDatabase(config, async (db) => {
      const status = parsed.values.disabled ? 'disabled' : 'active';
      const { apiKey, keyId, fingerprint, expiresAt } = await addMerchant(db, key, id, { status, key: settings, actor: actorOf(parsed.values, io) });
      logAdminChange(io, 'merchant_added', { merchant_id: id, status, key_id: keyId }, 'merchant added with a new key');
      if (parsed.values.json) io.out(JSON.stringify({ merchant_id: id, status, api_key: apiKey, key_id: keyId, fingerprint, expires_at: expiresAt }));
      else {
        io.out(`Merchant "${id}" added (${status}).`);
        io.out(`API key ${keyId} (fingerprint ${fingerprint}), shown only now (stored encrypted): ${apiKey}`);
        if (expiresAt !== null) io.out(`It works until ${expiresAt}.`);
      }
      return 0;
    }),
  );
}

async function setStatus(action: 'disable' | 'enable', args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { ...ACTOR_OPTION }, 1);
  if (parsed === 'help') return help(io);
  const [id] = parsed.positionals as [string];
  const ttl = config.keyCacheTtlMs / 1000;
  return runMysqlCommand(io, `merchant ${action}`, () =>
    withDatabase(config, async (db) => {
      const status = action === 'disable' ? 'disabled' : 'active';
      if (!(await setMerchantStatus(db, id, status, actorOf(parsed.values, io)))) {
        io.out(`Merchant "${id}" was ${status} already; nothing changed.`);
        return 0;
      }
      logAdminChange(io, 'merchant_status_set', { merchant_id: id, status }, `merchant ${action}d`);
      io.out(`Merchant "${id}" ${action}d. Running servers notice within ${ttl} s (KEY_CACHE_TTL).`);
      return 0;
    }),
  );
}

async function rotate(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { 'revoke-old': { type: 'boolean' }, 'expire-old-in': { type: 'string' }, json: { type: 'boolean' }, ...KEY_OPTIONS, ...ACTOR_OPTION }, 1);
  if (parsed === 'help') return help(io);
  const [id] = parsed.positionals as [string];
  const revokeOld = Boolean(parsed.values['revoke-old']);
  const expireText = parsed.values['expire-old-in'] as string | undefined;
  if (revokeOld && expireText !== undefined) throw new CliUsageError(`Give --revoke-old or --expire-old-in, not both.\n${USAGE}`);
  const expireOldInSeconds = expireText === undefined ? undefined : parseDuration(expireText, '--expire-old-in');
  const settings = keySettingsOf(parsed.values);
  const key = config.masterKey();
  const ttl = config.keyCacheTtlMs / 1000;
  return runMysqlCommand(io, 'merchant rotate-key', () =>
    withDatabase(config, async (db) => {
      const result = await rotateMerchantKey(db, key, id, { revokeOld, expireOldInSeconds, key: settings, actor: actorOf(parsed.values, io) });
      const old = revokeOld ? { revoked_key_ids: result.oldKeyIds } : expireOldInSeconds !== undefined ? { expiring_key_ids: result.oldKeyIds, expire_at: result.oldKeysExpireAt } : {};
      logAdminChange(io, 'merchant_key_rotated', { merchant_id: id, key_id: result.keyId, ...old }, 'new key added');
      if (parsed.values.json) {
        io.out(JSON.stringify({ merchant_id: id, api_key: result.apiKey, key_id: result.keyId, fingerprint: result.fingerprint, expires_at: result.expiresAt, revoked: result.revoked, old_keys_expire_at: result.oldKeysExpireAt ?? null }));
        return 0;
      }
      io.out(`New API key ${result.keyId} (fingerprint ${result.fingerprint}) for "${id}", shown only now (stored encrypted): ${result.apiKey}`);
      io.out('It works at once on every running server.');
      if (revokeOld) io.out(`Revoked ${result.revoked} older key(s); running servers may accept them for up to ${ttl} s more (KEY_CACHE_TTL).`);
      else if (expireOldInSeconds !== undefined) io.out(`The ${result.oldKeyIds.length} older key(s) keep working until ${result.oldKeysExpireAt} (UTC), then stop (running servers: up to ${ttl} s later).`);
      else io.out('Older keys still work: revoke them with `merchant revoke-key`, or roll with --revoke-old or --expire-old-in, once clients use the new one.');
      return 0;
    }),
  );
}

async function keys(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { json: { type: 'boolean' } }, 1);
  if (parsed === 'help') return help(io);
  const [id] = parsed.positionals as [string];
  const key = config.masterKey();
  return runMysqlCommand(io, 'merchant keys', () =>
    withDatabase(config, async (db) => {
      const found = await listMerchantKeys(db, key, id);
      if (parsed.values.json) {
        io.out(JSON.stringify(found));
        return 0;
      }
      table(
        io,
        ['KEY ID', 'NAME', 'MODE', 'FINGERPRINT', 'STATE', 'SCOPES', 'CREATED (UTC)', 'LAST USED (UTC)', 'REVOKED (UTC)', 'EXPIRES (UTC)', 'ALLOW FROM'],
        found.map((k) => [k.key_id, k.name ?? '-', k.mode, k.fingerprint, state(k), k.scopes.join(','), k.created_at, k.last_used_at ?? '-', k.revoked_at ?? '-', k.expires_at ?? '-', k.allow_from.join(',') || 'anywhere']),
      );
      return 0;
    }),
  );
}

function state(key: MerchantKeySummary): string {
  if (key.active) return 'active';
  return key.revoked_at !== null ? 'revoked' : 'expired';
}

async function addKey(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { json: { type: 'boolean' }, mode: { type: 'string' }, ...KEY_OPTIONS, ...ACTOR_OPTION }, 1);
  if (parsed === 'help') return help(io);
  const [id] = parsed.positionals as [string];
  const mode = parsed.values.mode as string | undefined;
  // A key's mode is chosen when it is made, and never changed: a live key turned test would keep a secret without the test_ prefix.
  if (mode !== undefined && keyModeProblem(mode) !== undefined) throw new CliUsageError(`--mode: ${keyModeProblem(mode)}.`);
  const settings = { ...keySettingsOf(parsed.values), ...(mode === 'test' && { mode: 'test' as const }) };
  const key = config.masterKey();
  return runMysqlCommand(io, 'merchant add-key', () =>
    withDatabase(config, async (db) => {
      const added = await addRandomMerchantKey(db, key, id, settings, actorOf(parsed.values, io));
      const keyMode = settings.mode ?? 'live';
      logAdminChange(io, 'merchant_key_added', { merchant_id: id, key_id: added.keyId, mode: keyMode }, 'key added');
      if (parsed.values.json) {
        io.out(JSON.stringify({ merchant_id: id, api_key: added.apiKey, key_id: added.keyId, fingerprint: added.fingerprint, expires_at: added.expiresAt, mode: keyMode }));
        return 0;
      }
      io.out(`New ${keyMode === 'test' ? 'test ' : ''}API key ${added.keyId} (fingerprint ${added.fingerprint}) for "${id}", shown only now (stored encrypted): ${added.apiKey}`);
      if (keyMode === 'test') io.out('A test key sees the merchant\'s test dataset only, never live data (docs/test-mode.md).');
      io.out(`It works at once on every running server, beside the merchant's other keys${added.expiresAt === null ? '' : `, until ${added.expiresAt}`}.`);
      return 0;
    }),
  );
}

async function updateKey(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { ...KEY_OPTIONS, 'no-expiry': { type: 'boolean' }, ...ACTOR_OPTION }, 2);
  if (parsed === 'help') return help(io);
  const [id, keyId] = parsed.positionals as [string, string];
  const settings = keySettingsOf(parsed.values, true);
  if (Object.keys(settings).length === 0) throw new CliUsageError(`Give what to change: --name, --scopes, --allow-from, --expires-in or --no-expiry.\n${USAGE}`);
  const ttl = config.keyCacheTtlMs / 1000;
  return runMysqlCommand(io, 'merchant update-key', () =>
    withDatabase(config, async (db) => {
      const { changed } = await updateMerchantKey(db, id, keyId, settings, actorOf(parsed.values, io));
      if (changed.length === 0) {
        io.out(`Key ${keyId} of "${id}" had these settings already; nothing changed.`);
        return 0;
      }
      logAdminChange(io, 'merchant_key_updated', { merchant_id: id, key_id: keyId, changed }, 'key updated');
      io.out(`Key ${keyId} of "${id}" updated (${changed.join(', ')}); running servers apply it within ${ttl} s (KEY_CACHE_TTL).`);
      return 0;
    }),
  );
}

async function revokeKey(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { ...ACTOR_OPTION }, 2);
  if (parsed === 'help') return help(io);
  const [id, keyId] = parsed.positionals as [string, string];
  const ttl = config.keyCacheTtlMs / 1000;
  return runMysqlCommand(io, 'merchant revoke-key', () =>
    withDatabase(config, async (db) => {
      const revoked = await revokeMerchantKey(db, id, keyId, actorOf(parsed.values, io));
      if (!revoked) {
        io.out(`Key ${keyId} of "${id}" was revoked already; nothing changed.`);
        return 0;
      }
      logAdminChange(io, 'merchant_key_revoked', { merchant_id: id, key_id: keyId }, 'key revoked');
      io.out(`Key ${keyId} of "${id}" revoked; running servers may accept it for up to ${ttl} s more (KEY_CACHE_TTL).`);
      return 0;
    }),
  );
}

async function remove(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { yes: { type: 'boolean', short: 'y' }, ...ACTOR_OPTION }, 1);
  if (parsed === 'help') return help(io);
  const [id] = parsed.positionals as [string];
  if (!parsed.values.yes) {
    const ask = terminalQuestion();
    if (!ask) throw new CliUsageError(`Refusing to delete merchant "${id}" without --yes: standard input is not a terminal to ask on.`);
    const answer = await ask(`Delete merchant "${id}" with its keys, user shares and the users no other merchant shares? This cannot be undone. Type the merchant id to confirm: `);
    if (answer !== id) {
      io.err('Not deleted: the answer was not the merchant id.');
      return 1;
    }
  }
  const ttl = config.keyCacheTtlMs / 1000;
  return runMysqlCommand(io, 'merchant delete', () =>
    withDatabase(config, async (db) => {
      const deleted = await deleteMerchant(db, id, actorOf(parsed.values, io));
      logAdminChange(io, 'merchant_deleted', { merchant_id: id, keys: deleted.keys, shares: deleted.shares, users: deleted.users }, 'merchant deleted');
      io.out(`Merchant "${id}" deleted: ${deleted.keys} key(s), ${deleted.shares} user share(s), ${deleted.users} user(s) no other merchant shared. Running servers notice within ${ttl} s (KEY_CACHE_TTL).`);
      return 0;
    }),
  );
}

async function list(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const parsed = parse(args, { json: { type: 'boolean' } }, 0);
  if (parsed === 'help') return help(io);
  return runMysqlCommand(io, 'merchant list', () =>
    withDatabase(config, async (db) => {
      const merchants = await listMerchants(db);
      if (parsed.values.json) {
        // snake_case, as every JSON the CLI prints.
        io.out(JSON.stringify(merchants.map((m) => ({ id: m.id, status: m.status, active_keys: m.activeKeys, revoked_keys: m.revokedKeys, created_at: m.createdAt }))));
        return 0;
      }
      if (merchants.length === 0) io.out('No merchants yet: add one with `merchant-api merchant add ID`.');
      else table(io, ['ID', 'STATUS', 'ACTIVE KEYS', 'REVOKED KEYS', 'CREATED (UTC)'], merchants.map((m) => [m.id, m.status, String(m.activeKeys), String(m.revokedKeys), m.createdAt]));
      return 0;
    }),
  );
}

function help(io: CliIo): number {
  io.out(USAGE);
  return 0;
}

/** Columns padded to their widest cell. */
function table(io: CliIo, head: string[], rows: string[][]): void {
  const all = [head, ...rows];
  const widths = head.map((_, column) => Math.max(...all.map((row) => row[column]!.length)));
  for (const row of all) io.out(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd());
}

type Options = Parameters<typeof parseCommandArgs>[1];

/** The arguments with exactly `count` positionals (the merchant id, and a key id for revoke-key). */
function parse(args: string[], options: Options, count: number): ReturnType<typeof parseCommandArgs> {
  const parsed = parseCommandArgs(args, options, USAGE);
  if (parsed !== 'help' && parsed.positionals.length !== count) {
    throw new CliUsageError(`${count === 0 ? 'This subcommand takes no ID.' : count === 1 ? 'Give exactly one merchant ID.' : 'Give the merchant ID and the KEY_ID.'}\n${USAGE}`);
  }
  return parsed;
}

/** A question on the terminal, or undefined when standard input is not one (a pipe, CI). */
function terminalQuestion(): ((question: string) => Promise<string>) | undefined {
  if (!process.stdin.isTTY) return undefined;
  return async (question) => {
    const terminal = createInterface({ input: process.stdin, output: process.stderr });
    try {
      return (await terminal.question(question)).trim();
    } finally {
      terminal.close();
    }
  };
}
