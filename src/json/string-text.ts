/**
 * Text held as a string, for the shared splitter (./array-splitter.ts): a flat object (a user
 * record) is found in one step of a sticky regular expression, any other value by scanning for
 * quotes and brackets, strings skipped with `indexOf`. No JavaScript loop visits each character.
 */
import { OPEN_BRACE, type SplitterText } from './array-splitter.js';

/**
 * A complete object with no object or array inside (a user record): `{`, then any characters
 * but quotes and brackets, or whole strings (unrolled, so it never backtracks much), then `}`.
 */
const FLAT_OBJECT = /\{(?:[^"{}[\]]|"[^"\\]*(?:\\.[^"\\]*)*")*\}/y;
/** Quotes and brackets: what a scan of an object or array stops at. */
const STRUCTURE = /["{}[\]]/g;
/** Where a number, true, false or null ends. */
const PRIMITIVE_END = /[\s,\]}]/g;

export const STRING_TEXT: SplitterText<string> = {
  empty: '',
  length: (text) => text.length,
  code: (text, index) => text.charCodeAt(index),
  indexOf: (text, unit, from) => text.indexOf(String.fromCharCode(unit), from),
  structureIndex(text, from) {
    STRUCTURE.lastIndex = from;
    return STRUCTURE.exec(text)?.index ?? -1;
  },
  concat: (pieces) => pieces.join(''),
  slice: (text, start, end) => text.slice(start, end),
  stringEnd: scanString,
  valueEnd(text, start, final) {
    if (text.charCodeAt(start) === OPEN_BRACE) {
      FLAT_OBJECT.lastIndex = start;
      if (FLAT_OBJECT.test(text)) return FLAT_OBJECT.lastIndex;
    }
    return scanValue(text, start, final);
  },
  primitiveEnd,
  decode: (text, start, end) => text.slice(start, end),
};

function scanString(text: string, start: number): number {
  let from = start + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote < 0) return -1;
    // An odd run of backslashes before it escapes it.
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === 92) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

function scanValue(text: string, start: number, final: boolean): number {
  const first = text[start];
  if (first === '"') return scanString(text, start);
  if (first === '{' || first === '[') {
    let depth = 0;
    STRUCTURE.lastIndex = start;
    for (;;) {
      const match = STRUCTURE.exec(text);
      if (match === null) return -1;
      const at = match.index;
      const c = text[at];
      if (c === '"') {
        const end = scanString(text, at);
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
  const end = primitiveEnd(text, start);
  return end >= 0 || !final ? end : text.length;
}

function primitiveEnd(text: string, from: number): number {
  PRIMITIVE_END.lastIndex = from;
  const match = PRIMITIVE_END.exec(text);
  return match === null ? -1 : match.index;
}
