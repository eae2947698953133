/**
 * The streamed user list `{"status":"ok","data":[{…},{…}],"errors":[]}`
 * (docs/protocol.md#pagination-and-cursors) read as it arrives: the shared
 * splitter (src/json/array-splitter.ts) finds where each element of the one
 * array is; this file parses each run of complete elements with one
 * `JSON.parse` (one call per piece of the body rather than one per element)
 * and keeps the envelope's rules: one array, which must be there once, the
 * other members parsed and kept, and a bound on a value's length.
 */
import { JsonArraySplitter, JsonStreamError } from '../json/array-splitter.js';
import { STRING_TEXT } from '../json/string-text.js';

export { JsonStreamError };

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
    return this.handOut();
  }

  private handOut(): unknown[] {
    const out = this.completed;
    this.completed = [];
    this.elements += out.length;
    return out;
  }
}

function parseValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new JsonStreamError(`Invalid JSON value: ${(error as Error).message}`);
  }
}
