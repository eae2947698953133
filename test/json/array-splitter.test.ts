/**
 * The shared incremental splitter (src/json/array-splitter.ts) on its own: whatever the pieces,
 * it hands out exactly the elements and members JSON.parse finds, asks about each member once,
 * and reports problems in document order with their kind and offset. Its two users have their
 * own tests: test/client/unit.test.ts (the streamed list) and test/storage/seed/seed-stream.test.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JsonArraySplitter, JsonStreamError, type JsonStreamProblem } from '../../src/json/array-splitter.js';
import { STRING_TEXT } from '../../src/json/string-text.js';

/** Splits `text` cut at `cuts`, splitting the arrays of `keys`; what the handler heard, in order. */
function split(text: string, cuts: number[], keys: string[], maxPending?: number) {
  const heard: string[] = [];
  const elements: Record<string, unknown[]> = {};
  const members: Record<string, unknown> = {};
  const splitter = new JsonArraySplitter(
    STRING_TEXT,
    {
      splits: (key, offset) => (heard.push(`splits ${key} at ${offset}`), keys.includes(key)),
      arrayValue: (key, isArray) => void heard.push(`${key} ${isArray ? 'is' : 'is not'} an array`),
      elements: (key, piece, bounds) => {
        for (let i = 0; i < bounds.length; i += 2) (elements[key] ??= []).push(JSON.parse(piece.slice(bounds[i], bounds[i + 1])));
        heard.push(`${bounds.length / 2} element(s) of ${key}`);
      },
      member: (key, piece, start, end) => void (members[key] = JSON.parse(piece.slice(start, end))),
    },
    maxPending,
  );
  let from = 0;
  for (const cut of [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b)) {
    splitter.push(text.slice(from, cut));
    from = cut;
  }
  splitter.push(text.slice(from));
  splitter.end();
  return { heard, elements, members };
}

function problemOf(text: string, cuts: number[] = [], maxPending?: number): JsonStreamProblem | undefined {
  try {
    split(text, cuts, ['a'], maxPending);
  } catch (error) {
    if (error instanceof JsonStreamError) return error.problem;
    throw error;
  }
  return undefined;
}

describe('the incremental array splitter', () => {
  it('hands out the elements and members JSON.parse finds, whatever the pieces', () => {
    const document = fc.record({ before: fc.jsonValue({ maxDepth: 2 }), a: fc.array(fc.jsonValue({ maxDepth: 3 }), { maxLength: 8 }), b: fc.array(fc.jsonValue(), { maxLength: 3 }) });
    fc.assert(
      fc.property(document, fc.constantFrom(undefined, 1, '\t'), fc.array(fc.nat(), { maxLength: 12 }), (value, indent, cuts) => {
        const text = JSON.stringify(value, null, indent);
        const parsed = JSON.parse(text) as typeof value;
        const { elements, members, heard } = split(text, cuts, ['a']);
        expect(elements.a ?? []).toEqual(parsed.a);
        expect(members).toEqual({ before: parsed.before, b: parsed.b });
        // Asked once per member, however the value was cut.
        expect(heard.filter((line) => line.startsWith('splits')).map((line) => line.split(' ')[1])).toEqual(['before', 'a', 'b']);
      }),
      { numRuns: 500 },
    );
  });

  it('gives offsets from the start of the whole text, not of the piece', () => {
    const { heard } = split('{"x": 1, "a": [1, 2]}', [3, 9, 16], ['a']);
    expect(heard[0]).toBe('splits x at 6');
    expect(heard[1]).toBe('splits a at 14');
    expect(heard[2]).toBe('a is an array');
  });

  it('reads the value of a chosen key that is not an array as a member', () => {
    const { heard, members } = split('{"a": {"b": [1]}}', [7], ['a']);
    expect(heard).toEqual(['splits a at 6', 'a is not an array']);
    expect(members).toEqual({ a: { b: [1] } });
  });

  it('names each problem with its kind and offset', () => {
    expect(problemOf('{"a": [1,]}')).toEqual({ kind: 'no-value', offset: 9, code: 0x5d });
    expect(problemOf('{"a": [1 2]}')).toEqual({ kind: 'unexpected', offset: 9, code: 0x32 });
    expect(problemOf('[1]')).toEqual({ kind: 'unexpected', offset: 0, code: 0x5b });
    expect(problemOf('{"a": 1} x')).toEqual({ kind: 'unexpected', offset: 9, code: 0x78 });
    expect(problemOf('{"\u0001": 1}')).toEqual({ kind: 'invalid-key', offset: 1 });
    expect(problemOf('{"a": [1, 2], "bc', [4])).toEqual({ kind: 'truncated', offset: 14, inKey: true });
    expect(problemOf('{"a": [1, {"b"', [8])).toEqual({ kind: 'truncated', offset: 10, inKey: false });
    expect(problemOf('{"a": ["0123456789"]}', [13], 5)).toEqual({ kind: 'too-long', offset: 7, key: 'a', element: true });
    // The cap holds for a value that came in one piece too, and for a member's value and name.
    expect(problemOf('{"a": ["0123456789"]}', [], 5)).toEqual({ kind: 'too-long', offset: 7, key: 'a', element: true });
    expect(problemOf('{"a": [], "b": "0123456789"}', [17], 5)).toEqual({ kind: 'too-long', offset: 15, key: 'b', element: false });
    expect(problemOf('{"a": [], "0123456789": 1}', [], 5)).toEqual({ kind: 'too-long', offset: 10, key: undefined, element: false });
    expect(problemOf('{"a": [1, 2]}')).toBeUndefined();
  });

  it('hands out a run of elements before a problem after it (document order)', () => {
    const heard: string[] = [];
    const splitter = new JsonArraySplitter(STRING_TEXT, {
      splits: () => true,
      arrayValue: () => undefined,
      elements: (_key, _text, bounds) => void heard.push(`elements ${bounds.join(',')}`),
      member: () => undefined,
    });
    expect(() => splitter.push('{"a":[1,{"b":2} 3]}')).toThrow(JsonStreamError);
    expect(heard).toEqual(['elements 6,7,8,15']);
  });
});
