/**
 * A slow client of the streamed full list, for the shutdown tests: it reads
 * the first bytes, stops reading (so the server is left mid-stream), and
 * reads the rest when told.
 */
import { Buffer } from 'node:buffer';
import { get, type IncomingMessage } from 'node:http';
import { basic } from './basic-auth.js';
import { MERCHANTS } from './seeds.js';

/** Starts the full list and resolves once its first bytes arrived, with the response paused. */
export function startSlowList(baseUrl: string): Promise<{ response: IncomingMessage; firstChunk: Buffer }> {
  const { main } = MERCHANTS;
  return new Promise((resolve, reject) => {
    const request = get(`${baseUrl}/merchant/users`, { headers: basic(main.id, main.keys[0]), agent: false }, (response) => {
      response.once('data', (firstChunk: Buffer) => {
        response.pause();
        resolve({ response, firstChunk });
      });
    });
    request.on('error', reject);
  });
}

export function readRest(response: IncomingMessage, firstChunk: Buffer): Promise<string> {
  const chunks = [firstChunk];
  return new Promise((resolve, reject) => {
    response.on('data', (chunk: Buffer) => chunks.push(chunk));
    response.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    response.on('error', reject);
    response.on('aborted', () => reject(new Error('the server cut the response')));
    response.resume();
  });
}
