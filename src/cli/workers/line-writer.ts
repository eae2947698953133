/**
 * The log writer of a worker (docs/runtimes.md#workers): its lines share one pipe with every
 * other worker's, and must come out whole. Apart from the supervisor because it runs in the
 * workers, and knows nothing of them but the pipe.
 */

/** The largest write a pipe keeps whole when several processes write to it (POSIX PIPE_BUF on Linux). */
const PIPE_BUF = 4096;

/**
 * A worker's log writer: the logger hands over every line of an event-loop
 * turn at once, and a write of more than PIPE_BUF bytes to the pipe the
 * workers share may be interleaved with another worker's, cutting JSON
 * lines in two. So the lines go out in writes of at most PIPE_BUF bytes,
 * each ending at a line's end (a single longer line is written alone).
 * `out` appends the newline, as `CliIo.out` does.
 */
export function wholeLineWriter(out: (text: string) => void): (lines: string) => void {
  return (lines) => {
    const text = lines.endsWith('\n') ? lines.slice(0, -1) : lines;
    if (utf8Length(text, PIPE_BUF) < PIPE_BUF) return out(text);
    let chunk = '';
    let size = 0;
    for (const line of text.split('\n')) {
      const length = utf8Length(line, Infinity) + 1;
      if (chunk !== '' && size + length > PIPE_BUF) {
        out(chunk);
        chunk = '';
        size = 0;
      }
      chunk = chunk === '' ? line : `${chunk}\n${line}`;
      size += length;
    }
    if (chunk !== '') out(chunk);
  };
}

/** UTF-8 bytes of `text`, counting stops once `limit` is reached. */
function utf8Length(text: string, limit: number): number {
  let bytes = 0;
  for (let i = 0; i < text.length && bytes < limit; i++) {
    const code = text.charCodeAt(i);
    // A surrogate pair is 4 bytes: 2 for each half.
    bytes += code < 0x80 ? 1 : code < 0x800 ? 2 : code >= 0xd800 && code <= 0xdfff ? 2 : 3;
  }
  return bytes;
}

/**
 * With WORKERS above 1 every process writes to the same standard output:
 * each JSON line gets the writer's `pid` after its `time`, so a line tells
 * which process wrote it. Works on the text the logger hands over, so the
 * logger keeps its own fast path.
 */
export function stampPid(pid: number, write: (lines: string) => void): (lines: string) => void {
  const member = `,"pid":${pid}`;
  return (lines) => write(lines.replace(/^(\{"time":"[^"]*")/gm, `$1${member}`));
}
