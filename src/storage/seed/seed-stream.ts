/**
 * Seed files read as a stream (docs/protocol.md#the-seed-document), so a seed of millions of users
 * never becomes one string (V8 caps a string near 512 MiB) nor one parsed tree next to the
 * records made from it.
 *
 * The parser is written for this one shape rather than taken from a library: the document's top
 * level (`{"merchants": [...], "users": [...]}`, other members ignored) is followed byte by byte
 * with a small state machine, and each element of the two arrays, found by counting brackets
 * outside strings (a string is skipped with a native `indexOf` of its closing quote), goes to
 * `JSON.parse` on its own. So the per-character work on the records is V8's, the same as a plain
 * `JSON.parse`, and no dependency has to work on Node, Bun and Deno alike. UTF-8 needs no care:
 * every byte of a multi-byte character is >= 0x80, never a quote, backslash or bracket.
 *
 * NDJSON (`.ndjson`, `.jsonl`): one JSON object a line; a line with `merchant_id` is a user,
 * any other is a merchant. Blank lines are skipped.
 */
import { Buffer } from 'node:buffer';
import { SeedError } from './seed.js';

/** The document is not JSON; `message` says where (byte offset from the start of the file). */
export class SeedSyntaxError extends SyntaxError {
  constructor(message: string) {
    super(message);
    this.name = 'SeedSyntaxError';
  }
}

/** The format of a seed file: by its name, as `merchant-api import` decides. */
export type SeedFormat = 'json' | 'ndjson';

/** `ndjson` for names ending in `.ndjson` or `.jsonl`, else `json`. */
export function seedFormatOf(file: string): SeedFormat {
  return /\.(ndjson|jsonl)$/i.test(file) ? 'ndjson' : 'json';
}

/** Where the elements of a streamed seed go; each is JSON-parsed, not yet validated. */
export interface SeedElementSink {
  /** An element of `merchants` (`index` from 0), or a merchant line of NDJSON (`line` from 1). */
  merchant(value: unknown, place: SeedPlace): void;
  /** An element of `users`, or a user line of NDJSON. */
  user(value: unknown, place: SeedPlace): void;
  /** `merchants` or `users` is present but not an array. */
  notArray(key: 'merchants' | 'users'): void;
  /** An NDJSON line that is not valid JSON. */
  badLine(line: number): void;
}

/** An element's place: its index in the document's array, or its NDJSON line. */
export type SeedPlace = { index: number; line?: undefined } | { line: number; index?: undefined };

/**
 * Reads a seed from `chunks` (bytes, e.g. a file's read stream) and hands every merchant and
 * user to `sink` as it is parsed. Resolves to which top-level arrays the document had.
 * Throws `SeedSyntaxError` when the document is not JSON, and `SeedError` when it is JSON but
 * not an object.
 */
export async function readSeedElements(chunks: AsyncIterable<Uint8Array>, format: SeedFormat, sink: SeedElementSink): Promise<{ merchants: boolean; users: boolean }> {
  if (format === 'ndjson') {
    const lines = new LineSplitter((text, line) => {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        sink.badLine(line);
        return;
      }
      const isUser = typeof value === 'object' && value !== null && !Array.isArray(value) && 'merchant_id' in value;
      if (isUser) sink.user(value, { line });
      else sink.merchant(value, { line });
    });
    for await (const chunk of chunks) lines.push(toBuffer(chunk));
    lines.end();
    return { merchants: true, users: true };
  }
  const scanner = new SeedDocumentScanner(sink);
  for await (const chunk of chunks) scanner.push(toBuffer(chunk));
  return scanner.end();
}

function toBuffer(chunk: Uint8Array): Buffer {
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/** Splits bytes into lines (LF or CRLF), calling `onLine` with each non-blank line and its number. */
export class LineSplitter {
  #rest: Buffer | undefined;
  #line = 0;

  constructor(private readonly onLine: (text: string, line: number) => void) {}

  push(chunk: Buffer): void {
    let data = this.#rest ? Buffer.concat([this.#rest, chunk]) : chunk;
    let start = 0;
    for (let end = data.indexOf(10); end !== -1; end = data.indexOf(10, start)) {
      this.#emit(data, start, end);
      start = end + 1;
    }
    this.#rest = start < data.length ? data.subarray(start) : undefined;
    data = undefined as never;
  }

  end(): void {
    if (this.#rest) this.#emit(this.#rest, 0, this.#rest.length);
    this.#rest = undefined;
  }

  #emit(data: Buffer, start: number, end: number): void {
    this.#line++;
    if (end > start && data[end - 1] === 13) end--;
    // A byte-order mark on the first line is not part of the JSON.
    if (this.#line === 1 && end - start >= 3 && data[start] === 0xef && data[start + 1] === 0xbb && data[start + 2] === 0xbf) start += 3;
    for (let i = start; i < end; i++) {
      const c = data[i]!;
      if (c !== 32 && c !== 9 && c !== 13) {
        this.onLine(data.toString('utf8', start, end), this.#line);
        return;
      }
    }
  }
}

const enum State {
  Begin,
  ObjectFirst,
  ObjectNext,
  ObjectKey,
  Key,
  Colon,
  Value,
  ArrayFirst,
  ArrayNext,
  ArrayElement,
  Element,
  Done,
  NotObject,
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** The state machine over the seed document's bytes (see the file comment). */
class SeedDocumentScanner {
  #data: Buffer = Buffer.alloc(0);
  /** Bytes before `#data[0]`, for error offsets. */
  #offset = 0;
  #pos = 0;
  #state = State.Begin;
  #key = '';
  /** The array being read (`merchants`, `users`) or undefined for a plain member value. */
  #array: 'merchants' | 'users' | undefined;
  #index = 0;
  #seen = { merchants: false, users: false };
  /** The token being read: where it starts, how far it was scanned, its bracket depth, in a string. */
  #start = 0;
  #scan = 0;
  #depth = 0;
  #inString = false;

  constructor(private readonly sink: SeedElementSink) {}

  push(chunk: Buffer): void {
    // Keep only the unfinished token (or nothing) of the previous data.
    const keep = this.#state === State.Element || this.#state === State.Key || this.#state === State.NotObject ? this.#start : this.#pos;
    const rest = this.#data.subarray(keep);
    this.#offset += keep;
    this.#start -= keep;
    this.#scan -= keep;
    this.#data = rest.length > 0 ? Buffer.concat([rest, chunk]) : chunk;
    this.#pos -= keep;
    this.#run(false);
  }

  end(): { merchants: boolean; users: boolean } {
    this.#run(true);
    if (this.#state === State.NotObject) {
      try {
        JSON.parse(this.#data.toString('utf8', this.#start));
      } catch {
        throw this.#invalidValue();
      }
      throw new SeedError(['the seed must be a JSON object with "merchants" and "users"']);
    }
    if (this.#state !== State.Done) throw this.#error('unexpected end of the file');
    return this.#seen;
  }

  #run(final: boolean): void {
    const data = this.#data;
    const n = data.length;
    while (true) {
      switch (this.#state) {
        case State.Begin: {
          if (this.#offset === 0 && this.#pos === 0 && n >= 3 && data[0] === 0xef && data[1] === 0xbb && data[2] === 0xbf) this.#pos = 3;
          if (!this.#skipSpace()) return;
          if (data[this.#pos] === 0x7b) {
            this.#pos++;
            this.#state = State.ObjectFirst;
          } else {
            this.#start = this.#pos;
            this.#state = State.NotObject;
          }
          break;
        }
        case State.NotObject:
          return; // read to the end, judged in end()
        case State.ObjectFirst:
        case State.ObjectKey: {
          if (!this.#skipSpace()) return;
          const c = data[this.#pos];
          if (c === 0x7d && this.#state === State.ObjectFirst) {
            this.#pos++;
            this.#state = State.Done;
          } else if (c === QUOTE) {
            this.#start = this.#pos;
            this.#scan = this.#pos + 1;
            this.#state = State.Key;
          } else {
            throw this.#unexpected();
          }
          break;
        }
        case State.Key: {
          const end = this.#stringEnd(this.#scan);
          if (end === -1) {
            this.#scan = n;
            if (final) throw this.#error('unexpected end of the file in a string');
            return;
          }
          try {
            this.#key = JSON.parse(data.toString('utf8', this.#start, end + 1)) as string;
          } catch {
            this.#pos = this.#start;
            throw this.#error('a member name that is not a valid JSON string');
          }
          this.#pos = end + 1;
          this.#state = State.Colon;
          break;
        }
        case State.Colon: {
          if (!this.#skipSpace()) return;
          if (data[this.#pos] !== 0x3a) throw this.#unexpected();
          this.#pos++;
          this.#state = State.Value;
          break;
        }
        case State.Value: {
          if (!this.#skipSpace()) return;
          const key = this.#key === 'merchants' || this.#key === 'users' ? this.#key : undefined;
          if (key !== undefined) {
            if (this.#seen[key]) throw this.#error(`"${key}" appears twice in the document`);
            this.#seen[key] = true;
          }
          if (key !== undefined && data[this.#pos] === 0x5b) {
            this.#pos++;
            this.#array = key;
            this.#index = 0;
            this.#state = State.ArrayFirst;
          } else {
            if (key !== undefined) this.sink.notArray(key);
            this.#array = undefined;
            this.#beginElement();
          }
          break;
        }
        case State.ArrayFirst:
        case State.ArrayElement: {
          if (!this.#skipSpace()) return;
          if (data[this.#pos] === 0x5d) {
            if (this.#state === State.ArrayElement) throw this.#unexpected(); // a comma before "]"
            this.#pos++;
            this.#state = State.ObjectNext;
          } else {
            this.#beginElement();
          }
          break;
        }
        case State.Element: {
          const end = this.#elementEnd(final);
          if (end === -1) return;
          const text = data.toString('utf8', this.#start, end);
          let value: unknown;
          try {
            value = JSON.parse(text);
          } catch {
            throw this.#invalidValue();
          }
          this.#pos = end;
          if (this.#array === 'users') this.sink.user(value, { index: this.#index++ });
          else if (this.#array === 'merchants') this.sink.merchant(value, { index: this.#index++ });
          this.#state = this.#array === undefined ? State.ObjectNext : State.ArrayNext;
          break;
        }
        case State.ArrayNext: {
          if (!this.#skipSpace()) return;
          const c = data[this.#pos];
          this.#pos++;
          if (c === 0x2c) this.#state = State.ArrayElement;
          else if (c === 0x5d) this.#state = State.ObjectNext;
          else {
            this.#pos--;
            throw this.#unexpected();
          }
          break;
        }
        case State.ObjectNext: {
          if (!this.#skipSpace()) return;
          const c = data[this.#pos];
          this.#pos++;
          if (c === 0x2c) this.#state = State.ObjectKey;
          else if (c === 0x7d) this.#state = State.Done;
          else {
            this.#pos--;
            throw this.#unexpected();
          }
          break;
        }
        case State.Done: {
          if (!this.#skipSpace()) return;
          throw this.#unexpected();
        }
      }
    }
  }

  #beginElement(): void {
    this.#start = this.#pos;
    this.#scan = this.#pos;
    this.#depth = 0;
    this.#inString = false;
    this.#state = State.Element;
  }

  /** Skips whitespace; false when the data ran out. */
  #skipSpace(): boolean {
    const data = this.#data;
    while (this.#pos < data.length) {
      const c = data[this.#pos]!;
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return true;
      this.#pos++;
    }
    return false;
  }

  /** The index of the quote closing the string whose content starts at `from`, or -1. */
  #stringEnd(from: number): number {
    const data = this.#data;
    for (let q = data.indexOf(QUOTE, from); q !== -1; q = data.indexOf(QUOTE, q + 1)) {
      let backslashes = 0;
      while (data[q - 1 - backslashes] === BACKSLASH) backslashes++;
      if (backslashes % 2 === 0) return q;
    }
    return -1;
  }

  /**
   * Scans the value starting at `#start` from `#scan`; its end (exclusive), or -1 when the data
   * ran out first (the scan resumes there). Only brackets and strings are followed here;
   * `JSON.parse` judges the rest.
   */
  #elementEnd(final: boolean): number {
    const data = this.#data;
    const n = data.length;
    let i = this.#scan;
    let depth = this.#depth;
    if (this.#inString) {
      const end = this.#stringEnd(i);
      if (end === -1) return this.#suspend(n, depth, true, final);
      i = end + 1;
      if (depth === 0) return i;
    }
    const first = data[this.#start];
    if (first !== 0x7b && first !== 0x5b && first !== QUOTE) {
      // A number or a literal: up to the next delimiter.
      for (; i < n; i++) {
        const c = data[i]!;
        if (c === 0x2c || c === 0x5d || c === 0x7d || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) return i;
      }
      return final ? n : this.#suspend(n, 0, false, final);
    }
    for (; i < n; i++) {
      const c = data[i]!;
      if (c === QUOTE) {
        const end = this.#stringEnd(i + 1);
        if (end === -1) return this.#suspend(n, depth, true, final);
        i = end;
        if (depth === 0) return i + 1;
      } else if (c === 0x7b || c === 0x5b) {
        depth++;
      } else if (c === 0x7d || c === 0x5d) {
        if (--depth === 0) return i + 1;
        if (depth < 0) {
          this.#pos = i;
          throw this.#unexpected();
        }
      }
    }
    return this.#suspend(n, depth, false, final);
  }

  #suspend(at: number, depth: number, inString: boolean, final: boolean): -1 {
    if (final) throw this.#error('unexpected end of the file');
    this.#scan = at;
    this.#depth = depth;
    this.#inString = inString;
    return -1;
  }

  #unexpected(): SeedSyntaxError {
    const c = this.#data[this.#pos];
    const shown = c !== undefined && c >= 0x21 && c <= 0x7e ? `"${String.fromCharCode(c)}"` : c === undefined ? 'the end' : `byte 0x${c.toString(16)}`;
    return this.#error(`unexpected ${shown}`);
  }

  // JSON.parse's own message quotes the text, which may be a user's data: never passed on.
  #invalidValue(): SeedSyntaxError {
    return new SeedSyntaxError(`the value starting at byte ${this.#offset + this.#start} is not valid JSON`);
  }

  #error(message: string): SeedSyntaxError {
    return new SeedSyntaxError(`${message} at byte ${this.#offset + this.#pos}`);
  }
}
