/** Sends raw bytes to a server and parses the one response, for requests no client library would send. */
import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export function rawRequest(port: number, request: string | Buffer, timeoutMs = 5000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('no response in time'));
    }, timeoutMs);
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      const parsed = parse(Buffer.concat(chunks));
      if (parsed) {
        clearTimeout(timer);
        socket.destroy();
        resolve(parsed);
      }
    });
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('end', () => {
      clearTimeout(timer);
      const parsed = parse(Buffer.concat(chunks));
      parsed ? resolve(parsed) : reject(new Error(`connection closed without a full response: ${Buffer.concat(chunks).toString('latin1').slice(0, 200)}`));
    });
    socket.write(request);
  });
}

function parse(data: Buffer): RawResponse | undefined {
  const end = data.indexOf('\r\n\r\n');
  if (end === -1) return undefined;
  const [statusLine, ...lines] = data.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = data.subarray(end + 4);
  let body: Buffer;
  if (headers['content-length'] !== undefined) {
    const length = Number(headers['content-length']);
    if (rest.length < length) return undefined;
    body = rest.subarray(0, length);
  } else if (headers['transfer-encoding'] === 'chunked') {
    const decoded: Buffer[] = [];
    let offset = 0;
    for (;;) {
      const lineEnd = rest.indexOf('\r\n', offset);
      if (lineEnd === -1) return undefined;
      const size = parseInt(rest.subarray(offset, lineEnd).toString('latin1'), 16);
      if (size === 0) break;
      if (rest.length < lineEnd + 2 + size + 2) return undefined;
      decoded.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      offset = lineEnd + 2 + size + 2;
    }
    body = Buffer.concat(decoded);
  } else {
    return undefined;
  }
  return { status: Number(statusLine!.split(' ')[1]), headers, body: body.toString('utf8') };
}
