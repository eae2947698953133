/**
 * `LOAD DATA LOCAL INFILE` from memory, for the bulk writes of imports (`new-users.ts`).
 * The pool of `createMysqlKysely` answers the server's request for a "local file" from this
 * registry only: a name registered here by this process, read once. Any other name (a server
 * asking for a file of its own choosing) gets an error, never a file from disk.
 */
import { Buffer } from 'node:buffer';
import { Readable } from 'node:stream';

const PREFIX = `merchant-api-infile-${crypto.randomUUID()}-`;
const registered = new Map<string, Buffer[]>();
let counter = 0;

/** Registers `chunks` (each at most a few hundred KiB) under a new name for one LOAD DATA. */
export function registerInfile(chunks: Buffer[]): string {
  const name = `${PREFIX}${++counter}`;
  registered.set(name, chunks);
  return name;
}

/** Forgets a registered name (the statement ran, or failed before asking for it). */
export function releaseInfile(name: string): void {
  registered.delete(name);
}

/** mysql2's `infileStreamFactory`: the registered data, once; an error stream for anything else. */
export function openInfile(name: string): Readable {
  const chunks = registered.get(name);
  registered.delete(name);
  if (chunks === undefined) {
    return new Readable({
      read() {
        this.destroy(new Error('LOCAL INFILE refused: merchant-api sends only the data of its own imports.'));
      },
    });
  }
  return Readable.from(chunks, { objectMode: false });
}

/**
 * Builds the text of a LOAD DATA file (tab-separated, `\N` for NULL, default escaping) in
 * chunks of about 256 KiB, so no chunk comes near the protocol's packet limit.
 */
export class InfileWriter {
  readonly chunks: Buffer[] = [];
  #text = '';

  /** Appends one row. */
  row(values: readonly (string | number | null)[]): void {
    let line = '';
    for (let i = 0; i < values.length; i++) {
      const value = values[i]!;
      if (i > 0) line += '\t';
      line += value === null ? '\\N' : typeof value === 'number' ? String(value) : escapeField(value);
    }
    this.#text += `${line}\n`;
    if (this.#text.length >= 1 << 18) this.#flush();
  }

  /** The chunks, complete. */
  finish(): Buffer[] {
    this.#flush();
    return this.chunks;
  }

  #flush(): void {
    if (this.#text.length > 0) this.chunks.push(Buffer.from(this.#text, 'utf8'));
    this.#text = '';
  }
}

const SPECIAL = /[\\\t\n\r\0]/;
const SPECIALS = /[\\\t\n\r\0]/g;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r', '\0': '\\0' };

function escapeField(value: string): string {
  return SPECIAL.test(value) ? value.replace(SPECIALS, (c) => ESCAPES[c]!) : value;
}
