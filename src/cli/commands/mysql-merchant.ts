/**
 * `merchant-api merchant add|disable|enable|rotate-key|list`: merchant and
 * key administration on MySQL. A new key is printed once and stored only
 * sealed; running servers see changes within their key cache TTL.
 */
import { parseArgs } from 'node:util';
import { addMerchant, listMerchants, rotateMerchantKey, setMerchantStatus } from '../../storage/mysql/index.js';
import type { CliCommand, CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';
import type { MysqlConfig } from '../config.js';
import { runMysqlCommand, withDatabase } from './mysql-env.js';

const USAGE = `Usage: merchant-api merchant <subcommand>
  add ID [--disabled] [--json]        add a merchant with a new random API key (printed once)
  disable ID | enable ID              stop or restore access for a merchant
  rotate-key ID [--revoke-old] [--json]
                                      add a new key; --revoke-old revokes every older one
  list [--json]                       every merchant with its status and key counts`;

/** The `merchant` command. */
export const merchantCommand: CliCommand = async (args, io, config) => {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'add':
      return add(rest, io, config);
    case 'disable':
    case 'enable':
      return setStatus(sub, rest, io, config);
    case 'rotate-key':
      return rotate(rest, io, config);
    case 'list':
      return list(rest, io, config);
    default:
      throw new CliUsageError(sub === undefined ? USAGE : `Unknown merchant subcommand "${sub}".\n${USAGE}`);
  }
};

async function add(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const { id, values } = parse(args, { disabled: { type: 'boolean' }, json: { type: 'boolean' } });
  const key = config.masterKey();
  return runMysqlCommand(io, 'merchant add', () =>
    withDatabase(config, async (db) => {
      const status = values.disabled ? 'disabled' : 'active';
      const { apiKey } = await addMerchant(db, key, id, { status });
      if (values.json) io.out(JSON.stringify({ merchant_id: id, status, api_key: apiKey }));
      else {
        io.out(`Merchant "${id}" added (${status}).`);
        io.out(`API key, shown only now (stored encrypted): ${apiKey}`);
      }
      return 0;
    }),
  );
}

async function setStatus(action: 'disable' | 'enable', args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const { id } = parse(args, {});
  const ttl = config.keyCacheTtlMs / 1000;
  return runMysqlCommand(io, `merchant ${action}`, () =>
    withDatabase(config, async (db) => {
      await setMerchantStatus(db, id, action === 'disable' ? 'disabled' : 'active');
      io.out(`Merchant "${id}" ${action}d. Running servers notice within ${ttl} s (KEY_CACHE_TTL).`);
      return 0;
    }),
  );
}

async function rotate(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  const { id, values } = parse(args, { 'revoke-old': { type: 'boolean' }, json: { type: 'boolean' } });
  const key = config.masterKey();
  const ttl = config.keyCacheTtlMs / 1000;
  return runMysqlCommand(io, 'merchant rotate-key', () =>
    withDatabase(config, async (db) => {
      const { apiKey, revoked } = await rotateMerchantKey(db, key, id, { revokeOld: Boolean(values['revoke-old']) });
      if (values.json) {
        io.out(JSON.stringify({ merchant_id: id, api_key: apiKey, revoked }));
        return 0;
      }
      io.out(`New API key for "${id}", shown only now (stored encrypted): ${apiKey}`);
      if (values['revoke-old']) io.out(`Revoked ${revoked} older key(s); running servers may accept them for up to ${ttl} s more (KEY_CACHE_TTL).`);
      else io.out('Older keys still work: revoke them with --revoke-old once clients use the new one.');
      return 0;
    }),
  );
}

async function list(args: string[], io: CliIo, config: MysqlConfig): Promise<number> {
  let values: { json?: boolean };
  try {
    values = parseArgs({ args, options: { json: { type: 'boolean' } }, allowPositionals: false, strict: true }).values;
  } catch (error) {
    throw new CliUsageError(`${(error as Error).message}\n${USAGE}`);
  }
  return runMysqlCommand(io, 'merchant list', () =>
    withDatabase(config, async (db) => {
      const merchants = await listMerchants(db);
      if (values.json) {
        io.out(JSON.stringify(merchants));
        return 0;
      }
      if (merchants.length === 0) io.out('No merchants yet: add one with `merchant-api merchant add ID`.');
      const rows = [['ID', 'STATUS', 'ACTIVE KEYS', 'REVOKED KEYS', 'CREATED (UTC)'], ...merchants.map((m) => [m.id, m.status, String(m.activeKeys), String(m.revokedKeys), m.createdAt.slice(0, 19)])];
      if (merchants.length > 0) {
        const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
        for (const row of rows) io.out(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd());
      }
      return 0;
    }),
  );
}

type Options = NonNullable<Parameters<typeof parseArgs>[0]>['options'];

function parse(args: string[], options: Options): { id: string; values: Record<string, string | boolean | undefined> } {
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new CliUsageError(`${(error as Error).message}\n${USAGE}`);
  }
  if (parsed.positionals.length !== 1) throw new CliUsageError(`Give exactly one merchant ID.\n${USAGE}`);
  return { id: parsed.positionals[0]!, values: parsed.values as Record<string, string | boolean | undefined> };
}
