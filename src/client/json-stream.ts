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
  private seenArray = false;
  private completed: unknown[] = [];
  private readonly splitter: JsonArraySplitter<string>;

  constructor(private readonly arrayKey: string) {
    this.splitter = new JsonArraySplitter(
      STRING_TEXT,
      {
        splits: (key) => key === arrayKey,
        arrayValue: (_key, isArray) => {
          if (!isArray) throw new JsonStreamError(`"${arrayKey}" is not an array.`);
          if (this.seenArray) throw new JsonStreamError(`"${arrayKey}" occurs twice.`);
          this.seenArray = true;
        },
        elements: (_key, text, bounds) => {
          const values = parseValue(`[${text.slice(bounds[0], bounds[bounds.length - 1])}]`) as unknown[];
          if (this.completed.length === 0) this.completed = values;
          else for (let i = 0; i < values.length; i++) this.completed.push(values[i]);
        },
        member: (key, text, start, end) => {
          this.members[key] = parseValue(text.slice(start, end));
        },
      },
      MAX_VALUE_LENGTH,
    );
  }

  /** Feeds the next piece of text; returns the elements of the array it completed, in order. */
  push(text: string): unknown[] {
    this.completed = [];
    this.splitter.push(text);
    return this.handOut();
  }

  /** The text has ended: throws unless the document was complete. Returns any elements the end completed. */
  end(): unknown[] {
    this.completed = [];
    try {
      this.splitter.end();
    } catch (error) {
      if (!(error instanceof JsonStreamError && error.problem?.kind === 'truncated')) throw error;
      this.elements += this.completed.length;
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

function parseValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new JsonStreamError(`Invalid JSON value: ${(error as Error).message}`);
  }
}
