/** What the suites record instead of printing: a logger's lines, and a CLI command's output. */
import type { CliIo } from '../../src/cli/io.js';
import type { Logger } from '../../src/observe/logger.js';

/** One logged line: its level, its fields, and its message when it has one. */
export type LoggedLine = Record<string, unknown> & { level: string; msg?: string };

/** A logger that keeps every line; `access()` is the access log's lines (event `request`). */
export function recordingLogger(): { logger: Logger; lines: LoggedLine[]; access(): LoggedLine[] } {
  const lines: LoggedLine[] = [];
  const record = (level: string) => (fields: object, msg?: string) => void lines.push({ level, ...fields, ...(msg === undefined ? {} : { msg }) });
  const logger: Logger = { debug: record('debug'), info: record('info'), warn: record('warn'), error: record('error') };
  return { logger, lines, access: () => lines.filter((line) => line.event === 'request') };
}

/** A CliIo on `env` that keeps what a command writes: `out` lines in `lines`, `err` lines in `errors`; `more` adds or replaces members. */
export function captureIo(env: Record<string, string | undefined>, more: Partial<CliIo> = {}): CliIo & { lines: string[]; errors: string[] } {
  const lines: string[] = [];
  const errors: string[] = [];
  return { env, lines, errors, out: (line) => lines.push(line), err: (line) => errors.push(line), ...more };
}
