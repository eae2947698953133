/**
 * An incremental splitter of one JSON object whose arrays may be too long to hold as one text:
 * the streamed user list `{"status":"ok","data":[{…},{…}],"errors":[]}` (the client) and the
 * seed document `{"merchants":[…],"users":[…]}` (the seed loader). Text goes in piece by piece;
 * the handler hears of each element of the arrays it chose as soon as the element's text is
 * complete, so memory holds one piece and an unfinished value, never the document.
 *
 * It is a small tokenizer for the object's own structure (keys, `:`, `,`, the arrays'
 * brackets): it parses member names only, and hands values out as places in the text, for the
 * runtime's native `JSON.parse` to decode and validate, so no JavaScript loop decodes a value.
 * Where a value ends is the one thing that depends on how the text is held (`SplitterText`):
 * a string (the client: `STRING_TEXT` of ./string-text.ts, after `TextDecoder`) or bytes (the
 * seed loader, which decodes each element from its bytes). Only quotes, backslashes, brackets, `,`, `:` and
 * JSON's whitespace matter, all ASCII, so UTF-8 bytes split the same as the decoded string.
 *
 * A string or value cut at the end of a piece is held as a list of pieces and scanned one piece
 * at a time (./pending-scan.ts), then joined once when it completes: the work per unit is
 * constant however long a value is (joining the held text to every piece and scanning it again
 * was quadratic: issue 34 §6). A value (an element, a member's value, a member name) longer than
 * `maxPending` units is refused, whether it came in one piece or many.
 *
 * Problems are reported in document order (a run of elements is handed out before what follows
 * it is judged) as a `JsonStreamError` whose `problem` says what and where, in units of the
 * text (characters or bytes) from its start, so that each user words them its own way.
 */
import { PendingScan } from './pending-scan.js';
import type { SplitterText } from './splitter-text.js';

export type { SplitterText };

/**
 * What went wrong, and where: `offset` counts units of the text from its start; `code` is the
 * unit found there. `no-value`: a unit that cannot start a value where an element should be
 * (`[1,]`, `[}`). `too-long`: the value starting at `offset` is longer than `maxPending`; it is
 * an element of the array `key` (`element`), the value of the member `key`, or a member name
 * (`key` undefined).
 */
export type JsonStreamProblem =
  | { kind: 'unexpected' | 'no-value'; offset: number; code: number }
  | { kind: 'invalid-key'; offset: number }
  | { kind: 'too-long'; offset: number; key: string | undefined; element: boolean }
  | { kind: 'truncated'; offset: number; inKey: boolean };

/** The text is not JSON of the expected shape, or ended before it was complete. */
export class JsonStreamError extends Error {
  override name = 'JsonStreamError';
  /** True when the text was valid so far but stopped before the document's end. */
  readonly truncated: boolean;
  /** Set when the splitter found the problem (a handler's own errors have none). */
  readonly problem: JsonStreamProblem | undefined;
  constructor(message: string, truncated = false, problem?: JsonStreamProblem, options?: { cause?: unknown }) {
    super(message, options);
    this.truncated = truncated;
    this.problem = problem;
  }
}

/**
 * What the splitter asks and tells as it reads. Places are indexes in `text`, the text being
 * read (what was left of the previous pieces, then the new one), which starts at the offset
 * `consumed` of the whole text; `offset` is as in `JsonStreamProblem`. A handler may throw.
 */
export interface ArraySplitterHandler<T> {
  /** Whether the value of the member `key`, starting at `offset`, is to be split if it is an array. */
  splits(key: string, offset: number): boolean;
  /** The value of a member `splits` chose is an array (its elements follow) or not (read as a member). */
  arrayValue(key: string, isArray: boolean): void;
  /**
   * The next complete elements of the array `key`: `bounds` holds the start and end of each in
   * `text`, in order (`[start, end, start, end, …]`), with only commas and whitespace between.
   */
  elements(key: string, text: T, bounds: readonly number[]): void;
  /** The value of a member not split, from `start` to `end` in `text`, not parsed yet. */
  member(key: string, text: T, start: number, end: number): void;
}

const enum State {
  Start,
  FirstKey,
  Key,
  Colon,
  Value,
  MemberValue,
  FirstElement,
  Element,
  ElementSeparator,
  AfterValue,
  Done,
}

const QUOTE = 0x22;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
export const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/** JSON's whitespace. */
export function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
}

export class JsonArraySplitter<T> {
  /** Units before the text being read (or before the pending value), for offsets from the start of the whole text. */
  private consumedLength = 0;
  private state = State.Start;
  private key = '';
  /** The bounds of the run of elements being read, reused from run to run. */
  private readonly bounds: number[] = [];
  /** A member name or value cut at the end of a piece: its pieces so far, their length, and its scan. */
  private pending: T[] = [];
  private pendingLength = 0;
  private scan: PendingScan<T> | undefined;
  private copiedUnits = 0;

  /** `maxPending`: the longest value (element, member value or name) read, in units; longer throws `too-long`. */
  constructor(
    private readonly ops: SplitterText<T>,
    private readonly handler: ArraySplitterHandler<T>,
    private readonly maxPending = Number.POSITIVE_INFINITY,
  ) {}

  /** Where the text being read starts in the whole text: what the handler's places are counted from. */
  get consumed(): number {
    return this.consumedLength;
  }

  /** Units copied to join values cut between pieces (tests: each unit at most once). */
  get copied(): number {
    return this.copiedUnits;
  }

  /** Feeds the next piece of text; the handler hears of every value it completes. */
  push(piece: T): void {
    const ops = this.ops;
    let text = piece;
    if (this.scan) {
      // Only the new piece is scanned, from the state the previous ones left.
      const end = this.scan.scan(piece, 0);
      const taken = end < 0 ? ops.length(piece) : end;
      if (this.pendingLength + taken > this.maxPending) throw this.tooLong(0);
      this.pending.push(end < 0 ? piece : ops.slice(piece, 0, end));
      this.pendingLength += taken;
      if (end < 0) return;
      this.completePending();
      text = ops.slice(piece, end);
    }
    this.keepFrom(text, this.run(text, 0, false));
  }

  /** The text has ended: throws a `truncated` problem unless the document was complete. */
  end(): void {
    // A number or literal ends with the text; a string or container cut short is truncated.
    if (this.scan?.primitive) this.completePending();
    if (!this.scan) this.run(this.ops.empty, 0, true);
    if (this.state !== State.Done) {
      const inKey = (this.state === State.FirstKey || this.state === State.Key) && this.scan !== undefined;
      throw new JsonStreamError('The document ended early.', true, { kind: 'truncated', offset: this.consumedLength, inKey });
    }
  }

  /** `run` stopped at `pos` in `text`: what is left (a value cut at the end of the piece) is held. */
  private keepFrom(text: T, pos: number): void {
    this.consumedLength += pos;
    const length = this.ops.length(text);
    if (pos >= length) return;
    if (length - pos > this.maxPending) throw this.tooLong(0);
    this.scan = new PendingScan(this.ops, text, pos);
    this.pending.push(this.ops.slice(text, pos));
    this.pendingLength = length - pos;
  }

  /** The held value is complete: joined once, and read as the state that stopped at it. */
  private completePending(): void {
    const whole = this.pending.length === 1 ? this.pending[0]! : this.ops.concat(this.pending, this.pendingLength);
    if (this.pending.length > 1) this.copiedUnits += this.pendingLength;
    const length = this.pendingLength;
    this.pending = [];
    this.pendingLength = 0;
    this.scan = undefined;
    switch (this.state) {
      case State.FirstKey:
      case State.Key:
        this.key = this.parseKey(whole, 0, length);
        this.state = State.Colon;
        break;
      case State.MemberValue:
        this.handler.member(this.key, whole, 0, length);
        this.state = State.AfterValue;
        break;
      default:
        // State Element: one element, then a separator.
        this.handler.elements(this.key, whole, [0, length]);
        this.state = State.ElementSeparator;
    }
    this.consumedLength += length;
  }

  /** The value starting at `pos` (of the text being read, or the pending value) is longer than `maxPending`. */
  private tooLong(pos: number): JsonStreamError {
    const inKey = this.state === State.FirstKey || this.state === State.Key;
    return new JsonStreamError(`A value of the document is longer than ${this.maxPending} characters.`, false, {
      kind: 'too-long',
      offset: this.consumedLength + pos,
      key: inKey ? undefined : this.key,
      element: this.state === State.Element,
    });
  }

  private unexpected(text: T, pos: number, wanted: string, kind: 'unexpected' | 'no-value' = 'unexpected'): JsonStreamError {
    const code = this.ops.code(text, pos);
    return new JsonStreamError(`Unexpected ${JSON.stringify(String.fromCharCode(code))} where ${wanted} should be (at character ${pos} of the current piece).`, false, { kind, offset: this.consumedLength + pos, code });
  }

  private parseKey(text: T, start: number, end: number): string {
    try {
      return JSON.parse(this.ops.decode(text, start, end)) as string;
    } catch (error) {
      // JSON.parse's own message, as the runtime words it.
      throw new JsonStreamError((error as Error).message, false, { kind: 'invalid-key', offset: this.consumedLength + start }, { cause: error });
    }
  }

  /** Runs the state machine over `text` from `pos`; returns where it stopped (at an incomplete token). */
  private run(text: T, pos: number, final: boolean): number {
    const ops = this.ops;
    const length = ops.length(text);
    for (;;) {
      while (pos < length && isSpace(ops.code(text, pos))) pos++;
      if (pos >= length) return pos;
      const c = ops.code(text, pos);
      switch (this.state) {
        case State.Start:
          if (c !== OPEN_BRACE) throw this.unexpected(text, pos, 'the start of an object');
          this.state = State.FirstKey;
          pos++;
          break;
        case State.FirstKey:
          if (c === CLOSE_BRACE) {
            this.state = State.Done;
            pos++;
            break;
          }
        // falls through: a key
        case State.Key: {
          if (c !== QUOTE) throw this.unexpected(text, pos, 'a key');
          const end = ops.stringEnd(text, pos);
          if (end < 0) return pos;
          if (end - pos > this.maxPending) throw this.tooLong(pos);
          this.key = this.parseKey(text, pos, end);
          this.state = State.Colon;
          pos = end;
          break;
        }
        case State.Colon:
          if (c !== COLON) throw this.unexpected(text, pos, '":"');
          this.state = State.Value;
          pos++;
          break;
        case State.Value:
          // Asked once per member: a value cut between pieces resumes in MemberValue.
          if (this.handler.splits(this.key, this.consumedLength + pos)) {
            const isArray = c === OPEN_BRACKET;
            this.handler.arrayValue(this.key, isArray);
            if (isArray) {
              this.state = State.FirstElement;
              pos++;
              break;
            }
          }
          this.state = State.MemberValue;
        // falls through: a value read whole
        case State.MemberValue: {
          const end = ops.valueEnd(text, pos, final);
          if (end < 0) return pos;
          if (end - pos > this.maxPending) throw this.tooLong(pos);
          this.handler.member(this.key, text, pos, end);
          this.state = State.AfterValue;
          pos = end;
          break;
        }
        case State.FirstElement:
          if (c === CLOSE_BRACKET) {
            this.state = State.AfterValue;
            pos++;
            break;
          }
        // falls through: the first element
        case State.Element:
          pos = this.readElements(text, pos, final);
          if (this.state === State.Element) return pos;
          break;
        case State.ElementSeparator:
          if (c === COMMA) this.state = State.Element;
          else if (c === CLOSE_BRACKET) this.state = State.AfterValue;
          else throw this.unexpected(text, pos, '"," or "]"');
          pos++;
          break;
        case State.AfterValue:
          if (c === COMMA) this.state = State.Key;
          else if (c === CLOSE_BRACE) this.state = State.Done;
          else throw this.unexpected(text, pos, '"," or "}"');
          pos++;
          break;
        case State.Done:
          throw this.unexpected(text, pos, 'the end of the document');
      }
    }
  }

  /**
   * Every complete element from `pos` on, and the commas between them; stops at the array's
   * `]` (state AfterValue) or at an incomplete element (state Element, returning where it
   * starts). The run is handed out before a problem after it is thrown: document order.
   */
  private readElements(text: T, pos: number, final: boolean): number {
    const ops = this.ops;
    const length = ops.length(text);
    const bounds = this.bounds;
    bounds.length = 0;
    let problem: JsonStreamError | undefined;
    this.state = State.Element;
    for (;;) {
      const end = ops.valueEnd(text, pos, final);
      if (end < 0) break;
      if (end === pos) {
        problem = this.unexpected(text, pos, 'a value', 'no-value');
        break;
      }
      if (end - pos > this.maxPending) {
        problem = this.tooLong(pos);
        break;
      }
      bounds.push(pos, end);
      pos = end;
      while (pos < length && isSpace(ops.code(text, pos))) pos++;
      if (pos >= length) {
        this.state = State.ElementSeparator;
        break;
      }
      const c = ops.code(text, pos);
      if (c === COMMA) {
        pos++;
        while (pos < length && isSpace(ops.code(text, pos))) pos++;
        if (pos >= length) break;
        continue;
      }
      if (c === CLOSE_BRACKET) {
        this.state = State.AfterValue;
        pos++;
        break;
      }
      problem = this.unexpected(text, pos, '"," or "]"');
      break;
    }
    if (bounds.length > 0) this.handler.elements(this.key, text, bounds);
    if (problem) throw problem;
    // State Element: stopped at an incomplete element (or after a comma), where the next piece resumes.
    return pos;
  }
}
