/**
 * A webhook receiver on a real port (a node:http server) for the webhook suites: it keeps every
 * delivery and verifies each with the `standardwebhooks` package, the independent verifier, against
 * the secrets it is told (`secrets`); `answer` picks each response (default 204).
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';

export interface ReceivedWebhook {
  headers: IncomingHttpHeaders;
  body: string;
  /** The parsed body, once verified by `standardwebhooks` with one of the secrets. */
  event: { type: string; timestamp: string; data: Record<string, unknown> };
  /** Which of `secrets` verified it (indexes). */
  verifiedBy: number[];
}

export interface WebhookReceiver {
  url: string;
  port: number;
  received: ReceivedWebhook[];
  /** Deliveries whose signature no secret verified: a test expects none. */
  unverified: Array<{ headers: IncomingHttpHeaders; body: string }>;
  secrets: string[];
  /** Answers request number `n` (0-based); default 204. */
  answer: (n: number, res: ServerResponse) => void;
  close(): Promise<void>;
}

export async function startWebhookReceiver(path = '/hook'): Promise<WebhookReceiver> {
  let count = 0;
  const receiver: WebhookReceiver = {
    url: '',
    port: 0,
    received: [],
    unverified: [],
    secrets: [],
    answer: (_n, res) => void res.writeHead(204).end(),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const verifiedBy: number[] = [];
      let event: ReceivedWebhook['event'] | undefined;
      receiver.secrets.forEach((secret, index) => {
        try {
          event = new Webhook(secret).verify(body, req.headers as Record<string, string>) as ReceivedWebhook['event'];
          verifiedBy.push(index);
        } catch {
          // Not this secret.
        }
      });
      if (event === undefined) receiver.unverified.push({ headers: req.headers, body });
      else receiver.received.push({ headers: req.headers, body, event, verifiedBy });
      receiver.answer(count++, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.port = (server.address() as { port: number }).port;
  receiver.url = `http://127.0.0.1:${receiver.port}${path}`;
  return receiver;
}
