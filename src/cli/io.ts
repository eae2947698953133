import type { MysqlConfig } from './config.js';

/**
 * What a CLI command gets from the process: its environment and where to
 * write. Commands never touch `process` themselves, so tests run them in
 * process with a captured output, and the same commands serve every runtime.
 */
export interface CliIo {
  env: Record<string, string | undefined>;
  /** A line for the user (results, the URL, a summary). */
  out(line: string): void;
  /**
   * Text as it is, where `out` writes (it ends with its own newline): the
   * JSON log's gathered lines, written without the copy a line for `out`
   * would take. Undefined: `out`, a line at a time.
   */
  write?: (text: string) => void;
  /** A line about a problem. Never a key or a user field. */
  err(line: string): void;
  /**
   * Text for a person, kept out of the JSON log on `out`: standard error, or
   * standard output when that is a terminal. Undefined: `err`.
   */
  banner?: (text: string) => void;
  /** Rewrites the current terminal line (progress); undefined when not a terminal. */
  progress?: (line: string) => void;
  /** Resolves when the process is asked to stop (SIGTERM/SIGINT). */
  stopSignal?: Promise<string>;
}

/** A CLI command: its arguments after the command name; resolves to the exit code. */
export type CliCommand = (args: string[], io: CliIo, config: MysqlConfig) => Promise<number>;
