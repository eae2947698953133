/**
 * Where the handler reports what an operator must see: one access line per
 * request and named events (docs/observability.md). The shape is pino's,
 * `logger.info(fields, message)`, so an embedder passes its own pino (or any
 * logger with that shape). Fields are codes, names and ids only: never a
 * key, a salt, an hmac, a credential or a user field.
 */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** Any logger with pino's method shape. */
export interface Logger {
  debug(fields: object, message?: string): void;
  info(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  error(fields: object, message?: string): void;
}

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;

export interface JsonLoggerOptions {
  /** Lowest level written; `silent` writes nothing. Default `info`. */
  level?: (typeof LOG_LEVELS)[number];
  /**
   * Where lines go, several joined with newlines (each ends with one).
   * Default: standard output, written once per event-loop turn.
   */
  write?: (lines: string) => void;
}

/** A logger that writes nothing. */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

const RANK: Record<(typeof LOG_LEVELS)[number], number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/**
 * The built-in logger: one JSON object per line,
 * `{"time":"2026-11-23T06:27:00.000Z","level":"info",...fields,"msg":message}`.
 * Lines are gathered and written together, at most `FLUSH_DELAY_MS` after
 * the first of them (or at once past `FLUSH_BYTES`): with a write per line,
 * the writes were most of the cost of an access log under load
 * (docs/benchmarks.md#figures-behind-choices-in-the-code). What is still
 * gathered when the process exits is written then.
 *
 * @example
 * const logger = createJsonLogger({ level: 'warn' });
 */
export function createJsonLogger(options: JsonLoggerOptions = {}): Logger & { flush(): void } {
  const threshold = RANK[options.level ?? 'info'];
  if (threshold === undefined) throw new TypeError(`level must be one of ${LOG_LEVELS.join(', ')}`);
  const sink = options.write ? bufferedWriter(options.write) : stdoutWriter();
  const enabled = (level: LogLevel) => RANK[level] >= threshold;
  const at = (level: LogLevel) => {
    if (!enabled(level)) return () => {};
    const prefix = `,"level":"${level}"`;
    return (fields: object, message?: string) => {
      const body = JSON.stringify(fields);
      const rest = body.length > 2 ? `,${body.slice(1, -1)}` : '';
      sink.push(`{"time":"${isoNow()}"${prefix}${rest}${message === undefined ? '' : `,"msg":${JSON.stringify(message)}`}}\n`);
    };
  };
  const info = at('info');
  return {
    debug: at('debug'),
    info,
    warn: at('warn'),
    error: at('error'),
    flush: () => sink.flush(),
    // The access log's fast path: it writes its line as text.
    [WRITE_INFO_LINE]: enabled('info') ? ({ head: infoHead, push: (line: string) => sink.push(line) } satisfies InfoLineWriter) : undefined,
  } as Logger & { flush(): void };
}

/**
 * Marks the built-in logger's way to write an info line as text, which saves
 * the access log a JSON.stringify of an object built only to be stringified,
 * and the pieces a line is made of, on every request
 * (docs/benchmarks.md#the-node-direct-path-28-november-2026).
 */
export const WRITE_INFO_LINE = Symbol('merchant-api.writeInfoLine');

/** What `WRITE_INFO_LINE` holds: the start of every info line, and how to write one. */
export interface InfoLineWriter {
  /** `{"time":"<now>","level":"info",`: the same string for every line of one millisecond. */
  head(): string;
  /** Writes a whole line, which starts with `head()` and ends with `}` and a newline. */
  push(line: string): void;
}

let headMs = Number.NaN;
let head = '';

/** The start of an info line, made once per millisecond. */
function infoHead(): string {
  const now = Date.now();
  if (now !== headMs) {
    headMs = now;
    head = `{"time":"${isoAt(now)}","level":"info",`;
  }
  return head;
}

let lastMs = Number.NaN;
let lastIso = '';
/** The second `secondIso` is of, in ms, and its `toISOString()` up to the milliseconds (`2026-11-23T06:27:00.`). */
let secondMs = Number.NaN;
let secondIso = '';

/** `new Date().toISOString()`, made once per millisecond however many lines share it. */
function isoNow(): string {
  return isoAt(Date.now());
}

/**
 * `new Date(now).toISOString()`, made once per millisecond, and within a
 * second from the second's own text and the milliseconds' three digits: a
 * `Date` and its formatting once a second rather than on nearly every line
 * of a server that answers a few requests per millisecond.
 */
export function isoAt(now: number): string {
  if (now === lastMs) return lastIso;
  lastMs = now;
  const ms = now - secondMs;
  if (ms >= 0 && ms < 1000) {
    lastIso = `${secondIso}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z`;
  } else {
    lastIso = new Date(now).toISOString();
    // Whole milliseconds: the second starts `now % 1000` ms earlier (the text before the dot stays the same within it).
    secondMs = now - (((now % 1000) + 1000) % 1000);
    secondIso = lastIso.slice(0, -4);
  }
  return lastIso;
}

interface Sink {
  push(line: string): void;
  flush(): void;
}

/** The longest a line waits to be written, ms: a few per second of writes instead of one per turn of a busy loop. */
const FLUSH_DELAY_MS = 5;
/** What may wait in memory under a burst, in UTF-16 units: past it the lines are written at once. */
const FLUSH_BYTES = 65_536;

/** Sinks with lines waiting, written when the process exits (a timer does not run then). */
const waiting = new Set<Sink>();
let exitHooked = false;

function bufferedWriter(write: (lines: string) => void): Sink {
  let pending = '';
  let timer: ReturnType<typeof setTimeout> | undefined;
  const sink: Sink = {
    push(line) {
      pending += line;
      if (pending.length > FLUSH_BYTES) sink.flush();
      else if (timer === undefined) {
        timer = setTimeout(sink.flush, FLUSH_DELAY_MS);
        waiting.add(sink);
        onExit();
      }
    },
    flush() {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      waiting.delete(sink);
      if (pending === '') return;
      const lines = pending;
      pending = '';
      write(lines);
    },
  };
  return sink;
}

/** One exit listener for every logger of the process. */
function onExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  (globalThis as { process?: { on?(event: 'exit', listener: () => void): void } }).process?.on?.('exit', () => {
    for (const sink of waiting) sink.flush();
  });
}

function stdoutWriter(): Sink {
  const stdout = (globalThis as { process?: { stdout?: { write(text: string): unknown } } }).process?.stdout;
  return bufferedWriter(stdout ? (lines) => void stdout.write(lines) : (lines) => console.log(lines.slice(0, -1)));
}

/**
 * What may be logged of an error: its name and code (`ECONNREFUSED`,
 * `ER_ACCESS_DENIED_ERROR`), never its message, which for a database error
 * can quote the values of the statement.
 */
export function describeError(error: unknown): { error: string; code?: string } {
  if (!(error instanceof Error)) return { error: typeof error };
  let code = (error as { code?: unknown }).code;
  // A storage failure wraps the driver error: its code is the useful one.
  if (code === 'storage_unavailable') code = (error.cause as { code?: unknown } | undefined)?.code ?? code;
  return typeof code === 'string' ? { error: error.name, code } : { error: error.name };
}
