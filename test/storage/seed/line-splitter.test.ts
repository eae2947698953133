/**
 * NDJSON lines in linear time, and the cap on one line or seed record (issue 34 §6): a line
 * spanning many chunks is joined once at its newline, never re-copied per chunk (a 64 MB line
 * took 44 s), counted in bytes copied by `Buffer.concat` (never timed); a line longer than the
 * cap is a problem naming its line number, and the lines after it are still read.
 */
import { Buffer } from 'node:buffer';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readMemoryStorage } from '../../../src/storage/memory/load.js';
import { SeedError } from '../../../src/storage/memory/index.js';
import { DEFAULT_MAX_LINE_BYTES, LineSplitter, SeedSyntaxError } from '../../../src/storage/seed/seed-stream.js';

/** Total bytes every `Buffer.concat` made while `run` ran: what the splitter copied. */
function bytesConcatenated(run: () => void): number {
  let bytes = 0;
  const concat = Buffer.concat;
  const spy = vi.spyOn(Buffer, 'concat').mockImplementation((list, length) => {
    const joined = concat(list, length);
    bytes += joined.length;
    return joined;
  });
  try {
    run();
  } finally {
    spy.mockRestore();
  }
  return bytes;
}

function chunksOf(text: string, size: number): Buffer[] {
  const bytes = Buffer.from(text);
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.subarray(at, at + size));
  return chunks;
}

async function* streamOf(chunks: Buffer[]): AsyncGenerator<Buffer> {
  yield* chunks;
}

afterEach(() => vi.restoreAllMocks());

describe('LineSplitter', () => {
  it('copies each byte of a long line at most once, however many chunks it spans (linear, not quadratic)', () => {
    const long = `{"a":"${'x'.repeat(4 << 20)}"}`;
    const lines: string[] = [];
    const splitter = new LineSplitter((text) => lines.push(text), 8 << 20);
    const copied = bytesConcatenated(() => {
      for (const chunk of chunksOf(`{"first":1}\n${long}\n{"last":2}\n`, 1024)) splitter.push(chunk);
      splitter.end();
    });
    expect(lines).toEqual(['{"first":1}', long, '{"last":2}']);
    // Re-copying the held text per chunk would be about 4 MiB * 4096 chunks / 2 = 8 GiB.
    expect(copied).toBeLessThanOrEqual(long.length + 1);
    expect(splitter.bytesCopied).toBeLessThanOrEqual(long.length + 1);
  });

  it('gives the same lines and numbers whatever the chunking (CRLF, blank lines, a byte-order mark)', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.constant(''), fc.constant(' '), fc.string({ minLength: 1, maxLength: 40 }).map((s) => JSON.stringify(s))), { maxLength: 20 }), fc.boolean(), fc.integer({ min: 1, max: 50 }), (texts, crlf, size) => {
        const input = `\ufeff${texts.join(crlf ? '\r\n' : '\n')}`;
        const expected: [string, number][] = [];
        texts.forEach((text, i) => {
          if (text.trim() !== '') expected.push([text, i + 1]);
        });
        const got: [string, number][] = [];
        const splitter = new LineSplitter((text, line) => got.push([text, line]));
        for (const chunk of chunksOf(input, size)) splitter.push(chunk);
        splitter.end();
        expect(got).toEqual(expected);
      }),
    );
  });

  it('tells a line longer than the cap by its number, never holds it, and reads on (in one chunk or many)', () => {
    for (const size of [7, 64, 1 << 16]) {
      const got: [string, number][] = [];
      const tooLong: number[] = [];
      const splitter = new LineSplitter((text, line) => got.push([text, line]), 20, (line) => tooLong.push(line));
      const input = ['"ok"', `"${'y'.repeat(50)}"`, `"${'z'.repeat(18)}"`, '', `"${'w'.repeat(30)}"`, '"last"'].join('\r\n');
      for (const chunk of chunksOf(input, size)) splitter.push(chunk);
      splitter.end();
      expect(tooLong, `chunks of ${size}`).toEqual([2, 5]);
      expect(got, `chunks of ${size}`).toEqual([['"ok"', 1], [`"${'z'.repeat(18)}"`, 3], ['"last"', 6]]);
    }
  });

  it('throws naming the line when no handler is given', () => {
    const splitter = new LineSplitter(() => undefined, 4);
    expect(() => splitter.push(Buffer.from('"a"\n"abcdef"\n'))).toThrow('line 2 is longer than 4 bytes');
  });
});

describe('the seed loader: the cap on one record', () => {
  const merchant = JSON.stringify({ id: 'm1', status: 'active', keys: ['k'] });
  it('an NDJSON line over the cap is a problem naming its line (default 1 MiB)', async () => {
    expect(DEFAULT_MAX_LINE_BYTES).toBe(1 << 20);
    const huge = JSON.stringify({ merchant_id: 'm1', shared_user_id: 'x'.repeat(2 << 20) });
    const error = await readMemoryStorage(streamOf(chunksOf(`${merchant}\n${huge}\n`, 1 << 16)), 'ndjson').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SeedError);
    expect((error as SeedError).message).toContain(`line 2: longer than ${1 << 20} bytes, the most one seed record may be`);
  });

  it('a record of a seed document over the cap is refused, naming where it starts, without copying it per chunk', async () => {
    const document = `{"merchants":[${merchant}],"users":[{"merchant_id":"m1","shared_user_id":"${'x'.repeat(5000)}"}]}`;
    const start = document.indexOf('{"merchant_id"');
    const error = await readMemoryStorage(streamOf(chunksOf(document, 100)), 'json', {}, undefined, 1000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SeedSyntaxError);
    expect((error as Error).message).toBe(`users[0]: the value starting at byte ${start} is longer than 1000 bytes, the most one seed record may be`);
  });
});
