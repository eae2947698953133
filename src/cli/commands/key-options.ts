/**
 * The options that set what a key may do (docs/cli.md#keys), shared by `merchant add`, `add-key`,
 * `rotate-key` and `update-key`: `--name`, `--scopes`, `--expires-in`, `--allow-from`, and on
 * `update-key` `--no-expiry`. Problems are usage errors (exit 2) naming the option.
 */
import type { KeySettings } from '../../storage/mysql/index.js';
import { KEY_SCOPES, keyNameProblem, parseAllowFrom, parseScopes } from '../../cli-internal.js';
import { CliUsageError } from '../usage-error.js';
import { parseDuration } from './duration.js';

export const KEY_OPTIONS = {
  name: { type: 'string' },
  scopes: { type: 'string' },
  'expires-in': { type: 'string' },
  'allow-from': { type: 'string' },
} as const;

export const KEY_OPTIONS_USAGE = `key options: --name N  --scopes ${KEY_SCOPES.join(',')}  --expires-in DURATION (e.g. 90d)  --allow-from CIDR[,CIDR...]`;

/** The settings the options give (only those given); `clearing`: `update-key`, where an empty value clears. */
export function keySettingsOf(values: Record<string, string | boolean | undefined>, clearing = false): KeySettings {
  const settings: { -readonly [K in keyof KeySettings]: KeySettings[K] } = {};
  const name = values.name as string | undefined;
  if (name !== undefined) {
    if (clearing && name === '') settings.name = null;
    else {
      const problem = keyNameProblem(name);
      if (problem !== undefined) throw new CliUsageError(`--name ${problem}.`);
      settings.name = name;
    }
  }
  const scopes = values.scopes as string | undefined;
  if (scopes !== undefined) {
    const parsed = parseScopes(scopes.split(','));
    if (typeof parsed === 'string') throw new CliUsageError(`--scopes: ${parsed}.`);
    settings.scopes = parsed;
  }
  const allowFrom = values['allow-from'] as string | undefined;
  if (allowFrom !== undefined) {
    const parsed = parseAllowFrom(allowFrom.split(','));
    if ('problems' in parsed) throw new CliUsageError(`--allow-from: ${parsed.problems.join('; ')}.`);
    if (parsed.networks.length === 0 && !clearing) throw new CliUsageError('--allow-from needs at least one network (CIDR), such as 203.0.113.0/24.');
    settings.allowFrom = parsed.networks;
  }
  const expiresIn = values['expires-in'] as string | undefined;
  if (expiresIn !== undefined) settings.expiresInSeconds = parseDuration(expiresIn, '--expires-in');
  if (values['no-expiry'] === true) {
    if (expiresIn !== undefined) throw new CliUsageError('Give --expires-in or --no-expiry, not both.');
    settings.expiresAt = null;
  }
  return settings;
}
