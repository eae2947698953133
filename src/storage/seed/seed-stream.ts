/**
 * Seed files read as a stream (docs/protocol.md#the-seed-document), so a seed of millions of users
 * never becomes one string (V8 caps a string near 512 MiB) nor one parsed tree next to the
 * records made from it.
 *
 * A seed document (`{"merchants": [...], "users": [...]}`, another member is a problem) is split by
 * the shared incremental splitter (src/json/array-splitter.ts) over its bytes: every element of
 * the two arrays, as soon as it is complete, is decoded from its bytes and goes to `JSON.parse`
 * on its own. Most records then make one-byte strings (a chunk decoded whole is a two-byte
 * string as soon as one name in it is not Latin-1, and slower to decode and parse), the
 * per-character work is V8's (a string is skipped with `Buffer#indexOf` of its closing quote),
 * and no dependency has to work on Node, Bun and Deno alike. Problems are named by byte offset,
 * never quoting the file.
 *
 * NDJSON (`.ndjson`, `.jsonl`): one JSON object a line; a line with `merchant_id` is a user,
 * any other is a merchant. Blank lines are skipped.
 */
import { Buffer } from 'node:buffer';
import { isSpace, JsonArraySplitter, JsonStreamError, type SplitterText } from '../../json/array-splitter.js';
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
  /** A member of the document other than `merchants` and `users`. */
  unknownMember(key: string): void;
  /** An NDJSON line that is not valid JSON. */
  badLine(line: number): void;
  /** An NDJSON line longer than `maxRecordBytes`: not read, the lines after it are. */
  longLine(line: number, maxRecordBytes: number): void;
}

/** An element's place: its index in the document's array, or its NDJSON line. */
export type SeedPlace = { index: number; line?: undefined } | { line: number; index?: undefined };

/**
 * Reads a seed from `chunks` (bytes, e.g. a file's read stream) and hands every merchant and
 * user to `sink` as it is parsed. Resolves to which top-level arrays the document had.
 * Throws `SeedSyntaxError` when the document is not JSON, and `SeedError` when it is JSON but
 * not an object.
 */
export async function readSeedElements(
  chunks: AsyncIterable<Uint8Array>,
  format: SeedFormat,
  sink: SeedElementSink,
  maxRecordBytes = DEFAULT_MAX_LINE_BYTES,
): Promise<{ merchants: boolean; users: boolean }> {
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
    }, maxRecordBytes, (line) => sink.longLine(line, maxRecordBytes));
    for await (const chunk of chunks) lines.push(toBuffer(chunk));
    lines.end();
    return { merchants: true, users: true };
  }
  const reader = new SeedDocumentReader(sink, maxRecordBytes);
  for await (const chunk of chunks) reader.push(toBuffer(chunk));
  return reader.end();
}

function toBuffer(chunk: Uint8Array): Buffer {
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/** The longest NDJSON line (and seed record) read by default: 1 MiB, far above any real record (about 1 KB). */
export const DEFAULT_MAX_LINE_BYTES = 1 << 20;

/**
 * Splits bytes into lines (LF or CRLF), calling `onLine` with each non-blank line and its number.
 * The pieces of a line that spans chunks are kept in a list and joined once, at its newline: each
 * byte is copied at most once, however many chunks a long line takes (joining the held text to
 * every chunk was quadratic: a 64 MB line took 44 s). A line longer than `maxLineBytes` is not
 * held: `onTooLong` hears its number, and its bytes are skipped up to the next newline.
 */
export class LineSplitter {
  /** The pieces of the line not ended yet, and their total length. */
  #pieces: Buffer[] = [];
  #held = 0;
  /** The current line passed `maxLineBytes`: its bytes are dropped until its newline. */
  #skipping = false;
  #line = 0;
  #copied = 0;

  constructor(
    private readonly onLine: (text: string, line: number) => void,
    private readonly maxLineBytes = DEFAULT_MAX_LINE_BYTES,
    private readonly onTooLong: (line: number) => void = (line) => {
      throw new RangeError(`line ${line} is longer than ${maxLineBytes} bytes`);
    },
  ) {}

  /** Bytes copied to join the pieces of lines that spanned chunks (tests: linear, at most each byte once). */
  get bytesCopied(): number {
    return this.#copied;
  }

  push(chunk: Buffer): void {
    let start = 0;
    for (let end = chunk.indexOf(10); end !== -1; end = chunk.indexOf(10, start)) {
      if (this.#held > 0) this.#take(chunk.subarray(start, end));
      if (this.#skipping) {
        // The end of a line too long to hold, told already.
        this.#skipping = false;
        this.#line++;
      } else if (this.#held > 0) {
        const line = this.#join();
        this.#emit(line, 0, line.length);
      } else {
        this.#emit(chunk, start, end);
      }
      start = end + 1;
    }
    if (start < chunk.length && !this.#skipping) this.#take(chunk.subarray(start));
  }

  end(): void {
    if (this.#skipping) this.#line++;
    else if (this.#held > 0) {
      const line = this.#join();
      this.#emit(line, 0, line.length);
    }
    this.#pieces = [];
    this.#held = 0;
  }

  /** Holds a piece of the current line, unless the line grows past the cap. */
  #take(piece: Buffer): void {
    if (this.#held + piece.length > this.maxLineBytes + 1) {
      // One byte of slack: a CR before the newline is not part of the line.
      this.#pieces = [];
      this.#held = 0;
      this.#tooLong();
      return;
    }
    this.#pieces.push(piece);
    this.#held += piece.length;
  }

  #join(): Buffer {
    const line = this.#pieces.length === 1 ? this.#pieces[0]! : Buffer.concat(this.#pieces, this.#held);
    if (this.#pieces.length > 1) this.#copied += this.#held;
    this.#pieces = [];
    this.#held = 0;
    return line;
  }

  /** The line being read is too long: counted, told, and its bytes dropped up to its newline. */
  #tooLong(): void {
    this.#skipping = true;
    this.onTooLong(this.#line + 1);
  }

  #emit(data: Buffer, start: number, end: number): void {
    this.#line++;
    if (end > start && data[end - 1] === 13) end--;
    if (end - start > this.maxLineBytes) {
      this.onTooLong(this.#line);
      return;
    }
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

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const BYTE_ORDER_MARK = Buffer.from([0xef, 0xbb, 0xbf]);

/**
 * A seed document held as bytes: UTF-8 needs no care, since every byte of a multi-byte
 * character is >= 0x80, never a quote, backslash or bracket. Exported for tests.
 */
export const SEED_BYTES: SplitterText<Buffer> = {
  empty: Buffer.alloc(0),
  length: (data) => data.length,
  code: (data, index) => data[index]!,
  indexOf: (data, unit, from) => data.indexOf(unit, from),
  structureIndex,
  concat: (pieces, length) => Buffer.concat(pieces, length),
  slice: (data, start, end) => data.subarray(start, end),
  stringEnd,
  valueEnd,
  primitiveEnd,
  decode: (data, start, end) => data.toString('utf8', start, end),
};

function stringEnd(data: Buffer, start: number): number {
  for (let quote = data.indexOf(QUOTE, start + 1); quote !== -1; quote = data.indexOf(QUOTE, quote + 1)) {
    let backslashes = 0;
    while (data[quote - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
  }
  return -1;
}

/** Only brackets and strings are followed here; `JSON.parse` judges the rest. */
function valueEnd(data: Buffer, start: number, final: boolean): number {
  const n = data.length;
  const first = data[start];
  if (first === QUOTE) return stringEnd(data, start);
  if (first === 0x7b || first === 0x5b) {
    let depth = 0;
    for (let i = start; i < n; i++) {
      const c = data[i]!;
      if (c === QUOTE) {
        const end = stringEnd(data, i);
        if (end === -1) return -1;
        i = end - 1;
      } else if (c === 0x7b || c === 0x5b) {
        depth++;
      } else if ((c === 0x7d || c === 0x5d) && --depth === 0) {
        return i + 1;
      }
    }
    return -1;
  }
  // A number or a literal: up to the next delimiter.
  const end = primitiveEnd(data, start);
  return end >= 0 || !final ? end : n;
}

function structureIndex(data: Buffer, from: number): number {
  for (let i = from; i < data.length; i++) {
    const c = data[i]!;
    if (c === QUOTE || c === 0x7b || c === 0x7d || c === 0x5b || c === 0x5d) return i;
  }
  return -1;
}

function primitiveEnd(data: Buffer, from: number): number {
  for (let i = from; i < data.length; i++) {
    const c = data[i]!;
    if (c === 0x2c || c === 0x5d || c === 0x7d || isSpace(c)) return i;
  }
  return -1;
}

/** A seed document's bytes, split (see the file comment). */
class SeedDocumentReader {
  readonly #splitter: JsonArraySplitter<Buffer>;
  /** Bytes given to the splitter. */
  #bytes = 0;
  /** Bytes of a byte-order mark skipped before the splitter's first character. */
  #skipped = 0;
  /** The first bytes, while they may still be the start of a byte-order mark. */
  #head: Buffer | undefined = Buffer.alloc(0);
  /** Set once the first byte that is not whitespace is seen. */
  #begun = false;
  /** A document that does not start with `{`, from its first byte: judged at the end. */
  #notObject: Buffer[] | undefined;
  #notObjectAt = 0;
  #index = 0;
  #seen = { merchants: false, users: false };

  constructor(
    private readonly sink: SeedElementSink,
    private readonly maxRecordBytes: number,
  ) {
    // A value cut between chunks is held as its pieces and joined once, when it completes (see the splitter).
    this.#splitter = new JsonArraySplitter(SEED_BYTES, {
      splits: (key, offset) => {
        if (key !== 'merchants' && key !== 'users') return false;
        if (this.#seen[key]) throw this.#error(`"${key}" appears twice in the document`, offset);
        this.#seen[key] = true;
        return true;
      },
      arrayValue: (key, isArray) => {
        if (isArray) this.#index = 0;
        else this.sink.notArray(key as 'merchants' | 'users');
      },
      elements: (key, data, bounds) => {
        const sink = this.sink;
        if (key === 'users') for (let i = 0; i < bounds.length; i += 2) sink.user(this.#parse(data, bounds[i]!, bounds[i + 1]!), { index: this.#index++ });
        else for (let i = 0; i < bounds.length; i += 2) sink.merchant(this.#parse(data, bounds[i]!, bounds[i + 1]!), { index: this.#index++ });
      },
      // Other members are parsed (so a document that is not JSON is refused), reported and let go.
      member: (key, data, start, end) => {
        this.#parse(data, start, end);
        this.sink.unknownMember(key);
      },
    }, maxRecordBytes);
  }

  push(chunk: Buffer): void {
    if (this.#head) {
      // A byte-order mark at the very start is not part of the JSON.
      const head = this.#head.length > 0 ? Buffer.concat([this.#head, chunk]) : chunk;
      if (head.length < 3 && BYTE_ORDER_MARK.subarray(0, head.length).equals(head)) {
        this.#head = head;
        return;
      }
      this.#head = undefined;
      this.#skipped = head.subarray(0, 3).equals(BYTE_ORDER_MARK) ? 3 : 0;
      chunk = head.subarray(this.#skipped);
    }
    if (!this.#begun && !this.#begin(chunk)) return;
    if (this.#notObject) {
      this.#notObject.push(chunk);
      return;
    }
    this.#bytes += chunk.length;
    try {
      this.#splitter.push(chunk);
    } catch (error) {
      throw this.#translate(error);
    }
  }

  end(): { merchants: boolean; users: boolean } {
    if (this.#head && this.#head.length > 0) {
      const head = this.#head;
      this.#head = undefined;
      this.push(head);
    }
    if (this.#notObject) {
      try {
        JSON.parse(Buffer.concat(this.#notObject).toString('utf8'));
      } catch {
        throw this.#invalidValue(this.#notObjectAt);
      }
      throw new SeedError(['the seed must be a JSON object with "merchants" and "users"']);
    }
    try {
      this.#splitter.end();
    } catch (error) {
      throw this.#translate(error);
    }
    return this.#seen;
  }

  /** Looks for the document's first byte that is not whitespace; false while there is none. */
  #begin(chunk: Buffer): boolean {
    let first = 0;
    while (first < chunk.length && isSpace(chunk[first]!)) first++;
    if (first === chunk.length) return true;
    this.#begun = true;
    if (chunk[first] !== 0x7b /* { */) {
      this.#notObjectAt = this.#bytes + first;
      this.#notObject = [chunk.subarray(first)];
      return false;
    }
    return true;
  }

  /** The value from `start` to `end` in the splitter's `data`, decoded and parsed. */
  #parse(data: Buffer, start: number, end: number): unknown {
    try {
      return JSON.parse(data.toString('utf8', start, end));
    } catch {
      throw this.#invalidValue(this.#splitter.consumed + start);
    }
  }

  #translate(error: unknown): unknown {
    const problem = error instanceof JsonStreamError ? error.problem : undefined;
    if (!problem) return error;
    switch (problem.kind) {
      case 'unexpected':
        return this.#error(`unexpected ${shown(problem.code)}`, problem.offset);
      case 'no-value':
        // A comma before "]" is a character out of place; anything else is a value that is not JSON.
        return problem.code === 0x5d ? this.#error('unexpected "]"', problem.offset) : this.#invalidValue(problem.offset);
      case 'invalid-key':
        return this.#error('a member name that is not a valid JSON string', problem.offset);
      case 'truncated':
        return this.#error(problem.inKey ? 'unexpected end of the file in a string' : 'unexpected end of the file', problem.offset);
      case 'too-long': {
        // An element is named by its place too (`users[12]`), as the seed's other problems are.
        const place = problem.element ? `${problem.key}[${this.#index}]: ` : '';
        return new SeedSyntaxError(`${place}the value starting at byte ${this.#skipped + problem.offset} is longer than ${this.maxRecordBytes} bytes, the most one seed record may be`);
      }
    }
  }

  // JSON.parse's own message quotes the text, which may be a user's data: never passed on.
  #invalidValue(offset: number): SeedSyntaxError {
    return new SeedSyntaxError(`the value starting at byte ${this.#skipped + offset} is not valid JSON`);
  }

  #error(message: string, offset: number): SeedSyntaxError {
    return new SeedSyntaxError(`${message} at byte ${this.#skipped + offset}`);
  }
}

/** A byte as a message shows it: its character when printable ASCII. */
function shown(byte: number): string {
  return byte >= 0x21 && byte <= 0x7e ? `"${String.fromCharCode(byte)}"` : `byte 0x${byte.toString(16)}`;
}
