/**
 * Where a string or value cut at the end of a piece of text ends, found one piece at a time:
 * the scan's state (inside a string or not, a backslash waiting for the unit it escapes, the
 * depth of brackets) is carried from piece to piece, so each unit is looked at once however many
 * pieces a value takes. Scanning the held value again from its start at every piece was
 * quadratic (issue 34 §6: a 16 MB object fed in 64 KiB pieces took 37 s).
 *
 * It follows the same rules as the splitter's `valueEnd` (./array-splitter.ts): quotes and
 * backslashes in strings, brackets counted without matching them, a number or literal up to a
 * delimiter. `JSON.parse` judges the value once it is whole.
 */
import type { SplitterText } from './splitter-text.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

const enum Kind {
  String,
  Container,
  Primitive,
}

export class PendingScan<T> {
  private readonly kind: Kind;
  private inString = false;
  /** The last unit seen was a backslash that escapes the next one (in a string). */
  private escaped = false;
  private depth = 0;

  /** Starts at `start`, the first unit of a string or value, which `text` does not complete: scans the rest of `text`. */
  constructor(
    private readonly ops: SplitterText<T>,
    text: T,
    start: number,
  ) {
    const first = ops.code(text, start);
    this.kind = first === QUOTE ? Kind.String : first === 0x7b || first === 0x5b ? Kind.Container : Kind.Primitive;
    if (this.kind === Kind.String) this.inString = true;
    else if (this.kind === Kind.Container) this.depth = 1;
    this.scan(text, start + 1);
  }

  /** A number or literal, which the end of the text completes. */
  get primitive(): boolean {
    return this.kind === Kind.Primitive;
  }

  /** The end (exclusive) of the value in `text`, the next piece, scanned from `from`; -1 when the value goes on past it. */
  scan(text: T, from: number): number {
    const ops = this.ops;
    if (this.kind === Kind.Primitive) return ops.primitiveEnd(text, from);
    let i = from;
    for (;;) {
      if (this.inString) {
        const end = this.stringEnd(text, i);
        if (end < 0) return -1;
        this.inString = false;
        if (this.kind === Kind.String) return end;
        i = end;
      }
      // From quote or bracket to the next, found by the holder's own search (whitespace and other units skipped in bulk).
      for (;;) {
        const at = ops.structureIndex(text, i);
        if (at < 0) return -1;
        const c = ops.code(text, at);
        i = at + 1;
        if (c === QUOTE) {
          this.inString = true;
          break;
        }
        if (c === 0x7b || c === 0x5b) this.depth++;
        else if (--this.depth === 0) return i;
      }
    }
  }

  /** Inside a string from `from`: the end of its closing quote, or -1 (remembering a trailing backslash). */
  private stringEnd(text: T, from: number): number {
    const ops = this.ops;
    const length = ops.length(text);
    let i = from;
    if (this.escaped) {
      if (i >= length) return -1;
      this.escaped = false;
      i++;
    }
    for (;;) {
      const quote = ops.indexOf(text, QUOTE, i);
      // Backslashes are counted back to `i` only: the unit before it was a quote or an escaped unit.
      let run = 0;
      const last = quote < 0 ? length : quote;
      while (last - 1 - run >= i && ops.code(text, last - 1 - run) === BACKSLASH) run++;
      if (quote < 0) {
        // An odd run at the end escapes the first unit of the next piece.
        this.escaped = run % 2 === 1;
        return -1;
      }
      if (run % 2 === 0) return quote + 1;
      i = quote + 1;
    }
  }
}
