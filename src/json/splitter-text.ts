/**
 * How the shared splitter (./array-splitter.ts) reads a text: a string (./string-text.ts) or
 * bytes (the seed loader). A file of its own so that the splitter and its pending scan
 * (./pending-scan.ts) both use it without importing each other.
 */
/** How a text `T` is held: the few operations the splitter needs, and where a value ends. */
export interface SplitterText<T> {
  readonly empty: T;
  length(text: T): number;
  /** The unit at `index`: a UTF-16 code unit, or a byte. */
  code(text: T, index: number): number;
  /** Where the unit `unit` is first found in `text` from `from` on, or -1. */
  indexOf(text: T, unit: number, from: number): number;
  /** Where the next quote or bracket (`"`, `{`, `}`, `[`, `]`) is in `text` from `from` on, or -1. */
  structureIndex(text: T, from: number): number;
  /** The pieces joined, `length` units in all: the one copy of a value cut between pieces. */
  concat(pieces: T[], length: number): T;
  /** The text from `start` to `end` (`end` by default: its end), without a copy where the holder allows. */
  slice(text: T, start: number, end?: number): T;
  /** The end (exclusive) of the string starting at `start` (a quote), or -1 when it is not complete yet. */
  stringEnd(text: T, start: number): number;
  /** The end (exclusive) of the value starting at `start`, or -1 when it is not complete yet (`final`: the text has ended). */
  valueEnd(text: T, start: number, final: boolean): number;
  /** Where a number or literal going on at `from` ends (its delimiter), or -1 when it goes on past the text. */
  primitiveEnd(text: T, from: number): number;
  /** The characters of `text` from `start` to `end`. */
  decode(text: T, start: number, end: number): string;
}
