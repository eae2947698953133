/**
 * Seed documents in linear time (issue 34 §6): a value cut between chunks is held as its pieces,
 * scanned one piece at a time, and joined once (src/json/pending-scan.ts, array-splitter.ts).
 * Checked for all inputs (fast-check: any document cut anywhere splits into what `JSON.parse`
 * of the whole finds, and the cap on one value answers the same whatever the cuts), and by
 * structure, never by the clock: the units the splitter copies and examines for one 16 MB value
 * fed in 64 KiB chunks are counted (before the change: about 130 copied per input byte).
 */
import { Buffer } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { JsonArraySplitter, JsonStreamError, type JsonStreamProblem, type SplitterText } from '../../../src/json/array-splitter.js';
import { STRING_TEXT } from '../../../src/json/string-text.js';
import { readMemoryStorage } from '../../../src/storage/memory/load.js';
import { readSeedElements, SEED_BYTES, SeedSyntaxError } from '../../../src/storage/seed/seed-stream.js';

const MiB = 2 ** 20;
const CHUNK = 64 * 1024;

/** Strings rich in what the scan must carry across a cut: quotes, backslash runs, brackets, multi-byte characters. */
const tricky = fc.oneof(
  fc.string({ unit: fc.constantFrom('a', '"', '\\', ' ', '\n', '{', '}', '[', ']', ',', ':', 'é', '😀', '\u2028', '0'), maxLength: 24 }),
  fc.nat(12).map((n) => `${'\\'.repeat(n)}"`),
);
const { value } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    tricky,
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.constantFrom(true, false, null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(tricky, tie('value'), { maxKeys: 4 }),
  ),
}));
const seedDocument = fc.record(
  { merchants: fc.array(value, { maxLength: 5 }), users: fc.array(value, { maxLength: 5 }), other: value },
  { requiredKeys: ['merchants', 'users'] },
);
const indent = fc.constantFrom(undefined, 1, '\t', 10);

/** `bytes` cut at `cuts` (any of them inside a character, an escape or a number), or at every byte. */
function piecesOf(bytes: Buffer, cuts: number[], everyByte = false): Buffer[] {
  if (everyByte) return [...bytes].map((_, i) => bytes.subarray(i, i + 1));
  const pieces: Buffer[] = [];
  let at = 0;
  for (const cut of [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)) {
    pieces.push(bytes.subarray(at, cut));
    at = cut;
  }
  pieces.push(bytes.subarray(at));
  return pieces;
}

async function* streamOf(pieces: Iterable<Buffer>): AsyncGenerator<Buffer> {
  for (const piece of pieces) yield piece;
}

/** What the streamed seed reader hands out for `pieces`. */
async function readElements(pieces: Buffer[], maxRecordBytes?: number) {
  const merchants: unknown[] = [];
  const users: unknown[] = [];
  const others: string[] = [];
  await readSeedElements(streamOf(pieces), 'json', {
    merchant: (element) => void merchants.push(element),
    user: (element) => void users.push(element),
    notArray: () => undefined,
    unknownMember: (key) => void others.push(key),
    badLine: () => undefined,
    longLine: () => undefined,
  }, maxRecordBytes);
  return { merchants, users, others };
}

/**
 * `ops` counting the units it copies and examines: each `code` one, each scan the units from its
 * start to where it stopped (or the end of the text). Quadratic work shows here as it would in time.
 */
function counting<T>(ops: SplitterText<T>) {
  const count = { copied: 0, examined: 0 };
  const examined = (text: T, from: number, end: number) => (count.examined += (end < 0 ? ops.length(text) : end) - from, end);
  const counted: SplitterText<T> = {
    ...ops,
    code: (text, index) => (count.examined++, ops.code(text, index)),
    indexOf: (text, unit, from) => examined(text, from, ops.indexOf(text, unit, from)),
    structureIndex: (text, from) => examined(text, from, ops.structureIndex(text, from)),
    stringEnd: (text, start) => examined(text, start, ops.stringEnd(text, start)),
    valueEnd: (text, start, final) => examined(text, start, ops.valueEnd(text, start, final)),
    primitiveEnd: (text, from) => examined(text, from, ops.primitiveEnd(text, from)),
    concat: (pieces, length) => ((count.copied += length), ops.concat(pieces, length)),
  };
  // The code before the change joined the held text to each piece: counted as a copy too.
  const legacy = ops as unknown as { join?: (rest: T, piece: T) => T };
  if (legacy.join) Object.assign(counted, { join: (rest: T, piece: T) => ((count.copied += ops.length(rest) + ops.length(piece)), legacy.join!(rest, piece)) });
  return { ops: counted, count };
}

/** Splits `pieces` of a document with `ops`, handing out element lengths only (no parsing): the splitter's own work. */
function splitLengths<T>(ops: SplitterText<T>, pieces: T[]): number[] {
  const lengths: number[] = [];
  const splitter = new JsonArraySplitter(ops, {
    splits: (key) => key === 'users',
    arrayValue: () => undefined,
    elements: (_key, _text, bounds) => {
      for (let i = 0; i < bounds.length; i += 2) lengths.push(bounds[i + 1]! - bounds[i]!);
    },
    member: () => undefined,
  });
  for (const piece of pieces) splitter.push(piece);
  splitter.end();
  return lengths;
}

/** One element of about `bytes` bytes, of three shapes: a long string, an object of many members, a long run of whitespace. */
function longElement(shape: 'string' | 'object' | 'whitespace', bytes: number): string {
  if (shape === 'string') return `{"merchant_id":"m","note":"${'x\\"'.repeat(bytes / 3)}"}`;
  if (shape === 'whitespace') return `{"merchant_id":"m",${' '.repeat(bytes)}"a":[1, {"b": "]"}]}`;
  return `{"merchant_id":"m",${Array.from({ length: bytes / 16 }, (_, i) => `"k${String(i).padStart(7, '0')}":[1,"}"]`).join(',')}}`;
}

describe('seed documents: any cut gives what JSON.parse of the whole gives', () => {
  it('the streamed reader hands out the elements and members of any document, cut anywhere (bytes)', async () => {
    await fc.assert(
      fc.asyncProperty(seedDocument, indent, fc.array(fc.nat(), { maxLength: 40 }), fc.boolean(), async (document, spaces, cuts, everyByte) => {
        const bytes = Buffer.from(JSON.stringify(document, null, spaces));
        const whole = JSON.parse(bytes.toString('utf8')) as typeof document;
        const read = await readElements(piecesOf(bytes, cuts, everyByte && bytes.length < 2000));
        expect(read.merchants).toEqual(whole.merchants);
        expect(read.users).toEqual(whole.users);
        expect(read.others).toEqual('other' in whole ? ['other'] : []);
      }),
      { numRuns: 300 },
    );
  });

  it('the splitter over strings (the client\'s) does the same, cut anywhere', () => {
    fc.assert(
      fc.property(seedDocument, indent, fc.array(fc.nat(), { maxLength: 40 }), (document, spaces, cuts) => {
        const text = JSON.stringify(document, null, spaces);
        const whole = JSON.parse(text) as typeof document;
        const users: unknown[] = [];
        const splitter = new JsonArraySplitter(STRING_TEXT, {
          splits: (key) => key === 'users',
          arrayValue: () => undefined,
          elements: (_key, piece, bounds) => {
            for (let i = 0; i < bounds.length; i += 2) users.push(JSON.parse(piece.slice(bounds[i], bounds[i + 1])));
          },
          member: () => undefined,
        });
        let at = 0;
        for (const cut of [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b)) {
          splitter.push(text.slice(at, cut));
          at = cut;
        }
        splitter.push(text.slice(at));
        splitter.end();
        expect(users).toEqual(whole.users);
      }),
      { numRuns: 300 },
    );
  });

  it('the cap on one value answers the same, naming the first value over it, whatever the cuts', () => {
    fc.assert(
      fc.property(fc.array(value, { maxLength: 6 }), fc.array(value, { maxLength: 6 }), fc.integer({ min: 12, max: 80 }), fc.array(fc.nat(), { maxLength: 30 }), (merchants, users, cap, cuts) => {
        // Compact, so an element's text is its JSON.stringify; the names are shorter than any cap.
        const parts = ['{"merchants":['];
        let offset = Buffer.byteLength(parts[0]!);
        let expected: JsonStreamProblem | undefined;
        for (const [key, elements] of [['merchants', merchants], ['users', users]] as const) {
          elements.forEach((element, index) => {
            const text = (index > 0 ? ',' : '') + JSON.stringify(element);
            const start = offset + (index > 0 ? 1 : 0);
            if (!expected && Buffer.byteLength(text) - (index > 0 ? 1 : 0) > cap) expected = { kind: 'too-long', offset: start, key, element: true };
            parts.push(text);
            offset += Buffer.byteLength(text);
          });
          const between = key === 'merchants' ? '],"users":[' : ']}';
          parts.push(between);
          offset += between.length;
        }
        const bytes = Buffer.from(parts.join(''));
        let problem: JsonStreamProblem | undefined;
        const splitter = new JsonArraySplitter(SEED_BYTES, { splits: () => true, arrayValue: () => undefined, elements: () => undefined, member: () => undefined }, cap);
        try {
          for (const piece of piecesOf(bytes, cuts)) splitter.push(piece);
          splitter.end();
        } catch (error) {
          if (!(error instanceof JsonStreamError)) throw error;
          problem = error.problem;
        }
        expect(problem).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });
});

describe('seed documents: work in proportion to the input (counted, never timed)', () => {
  for (const shape of ['string', 'object', 'whitespace'] as const) {
    it(`one 16 MB element (${shape}) in 64 KiB chunks: each byte copied at most once, examined a few times`, () => {
      const element = longElement(shape, 16 * MiB);
      const bytes = Buffer.from(`{"merchants":[],"users":[${element}, 1]}`);
      for (const [name, ops, pieces] of [
        ['bytes', SEED_BYTES, piecesOf(bytes, Array.from({ length: bytes.length / CHUNK }, (_, i) => (i + 1) * CHUNK))],
        ['string', STRING_TEXT, Array.from({ length: Math.ceil(bytes.length / CHUNK) }, (_, i) => bytes.toString('latin1', i * CHUNK, (i + 1) * CHUNK))],
      ] as const) {
        const { ops: counted, count } = counting<Buffer | string>(ops as SplitterText<Buffer | string>);
        expect(splitLengths(counted, pieces as Array<Buffer | string>), name).toEqual([element.length, 1]);
        expect(count.copied, name).toBeLessThanOrEqual(bytes.length);
        expect(count.examined, name).toBeLessThanOrEqual(4 * bytes.length);
      }
    });
  }

  it('the seed reader copies a 16 MB element once (every Buffer.concat counted)', async () => {
    const bytes = Buffer.from(`{"merchants":[],"users":[${longElement('string', 16 * MiB)}]}`);
    let copied = 0;
    const concat = Buffer.concat;
    const spy = vi.spyOn(Buffer, 'concat').mockImplementation((list, length) => {
      const joined = concat(list, length);
      copied += joined.length;
      return joined;
    });
    try {
      const read = await readElements(piecesOf(bytes, Array.from({ length: bytes.length / CHUNK }, (_, i) => (i + 1) * CHUNK)), 32 * MiB);
      expect(read.users).toHaveLength(1);
    } finally {
      spy.mockRestore();
    }
    expect(copied).toBeGreaterThan(0);
    expect(copied).toBeLessThanOrEqual(bytes.length);
  });
});

describe('seed documents: the cap on one element', () => {
  const merchant = JSON.stringify({ id: 'm1', status: 'active', keys: ['k'] });
  const small = (id: string) => JSON.stringify({ merchant_id: 'm1', shared_user_id: id });

  it('names the element by its place and its byte offset, in one chunk or many, and holds no more than the cap', async () => {
    const long = JSON.stringify({ merchant_id: 'm1', shared_user_id: 'x'.repeat(5000) });
    const document = `{"merchants":[${merchant}],"users":[${small('a')}, ${small('b')},\n${long}]}`;
    const start = Buffer.byteLength(document.slice(0, document.indexOf(long)));
    for (const size of [document.length, 100, 7]) {
      const pieces = piecesOf(Buffer.from(document), Array.from({ length: document.length / size }, (_, i) => (i + 1) * size));
      const error = await readMemoryStorage(streamOf(pieces), 'json', {}, undefined, 1000).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SeedSyntaxError);
      expect((error as Error).message).toBe(`users[2]: the value starting at byte ${start} is longer than 1000 bytes, the most one seed record may be`);
    }
  });

  it('refuses a 2 MiB element by default (1 MiB), having copied no more than the cap', async () => {
    const document = `{"merchants":[${merchant}, ${JSON.stringify({ id: 'm2', status: 'active', keys: ['k'], note: 'y'.repeat(2 * MiB) })}],"users":[]}`;
    let copied = 0;
    const concat = Buffer.concat;
    const spy = vi.spyOn(Buffer, 'concat').mockImplementation((list, length) => {
      const joined = concat(list, length);
      copied += joined.length;
      return joined;
    });
    let error: unknown;
    try {
      error = await readMemoryStorage(streamOf(piecesOf(Buffer.from(document), Array.from({ length: document.length / CHUNK }, (_, i) => (i + 1) * CHUNK))), 'json').catch((e: unknown) => e);
    } finally {
      spy.mockRestore();
    }
    expect(error).toBeInstanceOf(SeedSyntaxError);
    expect((error as Error).message).toBe(`merchants[1]: the value starting at byte ${document.indexOf('{"id":"m2"')} is longer than ${MiB} bytes, the most one seed record may be`);
    expect(copied).toBeLessThanOrEqual(MiB);
  });
});
