/**
 * A `CliIo` over the current process: environment, stdout/stderr, and a
 * promise for the first SIGTERM/SIGINT. A second signal exits at once.
 */
import process from 'node:process';
import type { CliIo } from './io.js';

export function processIo(): CliIo {
  const stopSignal = new Promise<string>((resolve) => {
    let received = false;
    const onSignal = (signal: string) => {
      if (received) process.exit(130);
      received = true;
      resolve(signal);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
  const tty = Boolean(process.stderr.isTTY);
  return {
    env: process.env,
    out: (line) => process.stdout.write(`${line}\n`),
    write: (text) => process.stdout.write(text),
    err: (line) => process.stderr.write(`${line}\n`),
    // A terminal is read by a person; a pipe or file on stdout is the JSON log's.
    banner: (text) => (process.stdout.isTTY ? process.stdout : process.stderr).write(`${text}\n`),
    progress: tty ? (line) => process.stderr.write(`\r\x1b[K${line}`) : undefined,
    stopSignal,
  };
}
