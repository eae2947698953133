/**
 * An incremental parser for one JSON object whose largest member is an
 * array, such as the streamed user list
 * `{"status":"ok","data":[{…},{…}],"errors":[]}` (docs/protocol.md#pagination-and-cursors):
 * each element of that array is handed out as soon as its text is complete,
 * so memory holds one piece of the body and the elements not yet consumed,
 * never the document.
 *
 * It is a small tokenizer for the object's own structure (keys, `:`, `,`,
 * the array's brackets) that only finds where each value ends: a flat
 * object (a user record) in one step of a sticky regular expression, any
 * other value by scanning for quotes and brackets with `indexOf`. The values
 * themselves go to `JSON.parse`, a whole run of complete elements in one
 * call, so the runtime's native parser does the decoding and the validation
 * and no JavaScript loop visits each character. It runs the same on Node,
 * Bun and Deno (strings only).
 */

/** The document is not JSON of the expected shape, or ended before it was complete. */
export class JsonStreamError extends Error {
  override name = 'JsonStreamError';
  /** True when the text was valid so far but stopped before the document's end. */
  readonly truncated: boolean;
  constructor(message: string, truncated = false) {
    super(message);
    this.truncated = truncated;
  }
}

const enum State {
  Start,
  FirstKey,
  Key,
  Colon,
  Value,
  FirstElement,
  Element,
  ElementSeparator,
  AfterValue,
  Done,
}

/**
 * A complete object with no object or array inside (a user record): `{`,
 * then any characters but quotes and brackets, or whole strings (unrolled,
 * so it never backtracks much), then `}`.
 */
const FLAT_OBJECT = /\{(?:[^"{}[\]]|"[^"\\]*(?:\\.[^"\\]*)*")*\}/y;

function isSpace(c: number): boolean {
  return c === 32 || c === 10 || c === 13 || c === 9;
}

/** Quotes and brackets: what a scan of an object or array stops at. */
const STRUCTURE = /["{}[\]]/g;
/** Where a number, true, false or null ends. */
const PRIMITIVE_END = /[\s,\]}]/g;

/** The longest single value accepted (characters): a guard against a body that never closes a value. */
export const MAX_VALUE_LENGTH = 16 * 1024 * 1024;

export class JsonEnvelopeParser {
  /** The object's other members, parsed, as they complete (`status` before `data` on the wire). */
  readonly members: Record<string, unknown> = {};
  /** Elements of the array handed out so far. */
  elements = 0;
  private buffer = '';
  private state = State.Start;
  private key = '';
  private seenArray = false;

  constructor(private readonly arrayKey: string) {}

  /** Feeds the next piece of text; returns the elements of the array it completed, in order. */
  push(text: string): unknown[] {
    const out: unknown[] = [];
    const buf = this.buffer.length === 0 ? text : this.buffer + text;
    const pos = this.run(buf, 0, out, false);
    this.buffer = pos >= buf.length ? '' : buf.slice(pos);
    if (this.buffer.length > MAX_VALUE_LENGTH) throw new JsonStreamError(`A value of the document is longer than ${MAX_VALUE_LENGTH} characters.`);
    this.elements += out.length;
    return out;
  }

  /** The text has ended: throws unless the document was complete. Returns any elements the end completed. */
  end(): unknown[] {
    const out: unknown[] = [];
    const pos = this.run(this.buffer, 0, out, true);
    this.buffer = this.buffer.slice(pos);
    this.elements += out.length;
    if (this.state !== State.Done) {
      throw new JsonStreamError(`The document ended early, after ${this.elements} element(s) of "${this.arrayKey}".`, true);
    }
    if (!this.seenArray) throw new JsonStreamError(`The document has no "${this.arrayKey}" array.`);
    return out;
  }

  /**
   * Every complete element from `pos` on, and the commas between them; stops
   * at the array's `]` (state AfterValue) or at an incomplete element (state
   * Element, returning where it starts). The run of elements is parsed with
   * one `JSON.parse` of `[` + the run + `]`: one call per piece of the body
   * rather than one per element.
   */
  private readElements(buf: string, pos: number, out: unknown[], final: boolean): number {
    const length = buf.length;
    const runStart = pos;
    let runEnd = -1;
    this.state = State.Element;
    for (;;) {
      // A flat object (strings, numbers, literals) in one step of the regular expression; anything else, or an
      // object not complete yet, by the general scan.
      FLAT_OBJECT.lastIndex = pos;
      const end = buf.charCodeAt(pos) === 123 && FLAT_OBJECT.test(buf) ? FLAT_OBJECT.lastIndex : scanValue(buf, pos, final);
      if (end < 0) break;
      if (end === pos) throw unexpected(buf[pos], pos, 'a value');
      runEnd = end;
      pos = end;
      while (pos < length && isSpace(buf.charCodeAt(pos))) pos++;
      if (pos >= length) {
        this.state = State.ElementSeparator;
        break;
      }
      const c = buf.charCodeAt(pos);
      if (c === 44 /* , */) {
        pos++;
        while (pos < length && isSpace(buf.charCodeAt(pos))) pos++;
        if (pos >= length) break;
        continue;
      }
      if (c === 93 /* ] */) {
        this.state = State.AfterValue;
        pos++;
        break;
      }
      throw unexpected(buf[pos], pos, '"," or "]"');
    }
    if (runEnd >= 0) {
      const parsed = parseText(`[${buf.slice(runStart, runEnd)}]`) as unknown[];
      for (let i = 0; i < parsed.length; i++) out.push(parsed[i]);
    }
    // State Element: stopped at an incomplete element (or after a comma), where the next piece resumes.
    return pos;
  }

  /** Runs the state machine over `buf` from `pos`; returns where it stopped (at an incomplete token). */
  private run(buf: string, pos: number, out: unknown[], final: boolean): number {
    const length = buf.length;
    for (;;) {
      // Whitespace between tokens.
      while (pos < length) {
        const c = buf.charCodeAt(pos);
        if (c === 32 || c === 10 || c === 13 || c === 9) pos++;
        else break;
      }
      if (pos >= length) return pos;
      const c = buf[pos];
      switch (this.state) {
        case State.Start:
          if (c !== '{') throw unexpected(c, pos, 'the start of an object');
          this.state = State.FirstKey;
          pos++;
          break;
        case State.FirstKey:
          if (c === '}') {
            this.state = State.Done;
            pos++;
            break;
          }
        // falls through: a key
        case State.Key: {
          if (c !== '"') throw unexpected(c, pos, 'a key');
          const end = scanString(buf, pos);
          if (end < 0) return pos;
          this.key = JSON.parse(buf.slice(pos, end)) as string;
          this.state = State.Colon;
          pos = end;
          break;
        }
        case State.Colon:
          if (c !== ':') throw unexpected(c, pos, '":"');
          this.state = State.Value;
          pos++;
          break;
        case State.Value: {
          if (this.key === this.arrayKey) {
            if (c !== '[') throw new JsonStreamError(`"${this.arrayKey}" is not an array.`);
            if (this.seenArray) throw new JsonStreamError(`"${this.arrayKey}" occurs twice.`);
            this.seenArray = true;
            this.state = State.FirstElement;
            pos++;
            break;
          }
          const end = scanValue(buf, pos, final);
          if (end < 0) return pos;
          this.members[this.key] = parse(buf, pos, end);
          this.state = State.AfterValue;
          pos = end;
          break;
        }
        case State.FirstElement:
          if (c === ']') {
            this.state = State.AfterValue;
            pos++;
            break;
          }
        // falls through: the first element
        case State.Element:
          pos = this.readElements(buf, pos, out, final);
          if (this.state === State.Element) return pos;
          break;
        case State.ElementSeparator:
          if (c === ',') this.state = State.Element;
          else if (c === ']') this.state = State.AfterValue;
          else throw unexpected(c, pos, '"," or "]"');
          pos++;
          break;
        case State.AfterValue:
          if (c === ',') this.state = State.Key;
          else if (c === '}') this.state = State.Done;
          else throw unexpected(c, pos, '"," or "}"');
          pos++;
          break;
        case State.Done:
          throw unexpected(c, pos, 'the end of the document');
      }
    }
  }
}

function unexpected(c: string | undefined, pos: number, wanted: string): JsonStreamError {
  return new JsonStreamError(`Unexpected ${JSON.stringify(c)} where ${wanted} should be (at character ${pos} of the current piece).`);
}

function parse(buf: string, start: number, end: number): unknown {
  return parseText(buf.slice(start, end));
}

function parseText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new JsonStreamError(`Invalid JSON value: ${(error as Error).message}`);
  }
}

/** The end (exclusive) of the string starting at `start` (a quote), or -1 when it is not complete yet. */
function scanString(buf: string, start: number): number {
  let from = start + 1;
  for (;;) {
    const quote = buf.indexOf('"', from);
    if (quote < 0) return -1;
    // An odd run of backslashes before it escapes it.
    let backslashes = 0;
    while (buf.charCodeAt(quote - 1 - backslashes) === 92) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

/** The end (exclusive) of the JSON value starting at `start`, or -1 when it is not complete yet. */
function scanValue(buf: string, start: number, final: boolean): number {
  const first = buf[start];
  if (first === '"') return scanString(buf, start);
  if (first === '{' || first === '[') {
    let depth = 0;
    STRUCTURE.lastIndex = start;
    for (;;) {
      const match = STRUCTURE.exec(buf);
      if (match === null) return -1;
      const at = match.index;
      const c = buf[at];
      if (c === '"') {
        const end = scanString(buf, at);
        if (end < 0) return -1;
        STRUCTURE.lastIndex = end;
      } else if (c === '{' || c === '[') {
        depth++;
      } else if (--depth === 0) {
        return at + 1;
      }
    }
  }
  // A number, true, false or null: it ends at a delimiter, or at the very end of the text.
  PRIMITIVE_END.lastIndex = start;
  const match = PRIMITIVE_END.exec(buf);
  if (match !== null) return match.index;
  return final ? buf.length : -1;
}
