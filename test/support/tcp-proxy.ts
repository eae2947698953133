/**
 * A TCP proxy the fault test puts between the pool and MariaDB, to cut the
 * database off for real: `stop()` closes the port and resets every
 * connection (a crashed or restarting server); `hang()` keeps connections
 * open but passes no byte (a partition or a stuck server) until `resume()`;
 * `start()` brings a stopped proxy back on the same port. `delayMs` holds
 * every chunk back that long each way (a far server: a round trip of twice it).
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export class TcpProxy {
  #server: Server | undefined;
  #port = 0;
  #hanging = false;
  #dropped = 0;
  readonly #sockets = new Set<Socket>();

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
    private readonly delayMs = 0,
  ) {}

  get port(): number {
    return this.#port;
  }

  /** Listens (again) on the same port and forwards. */
  async start(): Promise<void> {
    this.#hanging = false;
    const server = createServer((client) => this.#accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#port, '127.0.0.1', () => resolve());
    });
    this.#port = (server.address() as { port: number }).port;
    this.#server = server;
  }

  /** Closes the port and resets every open connection. */
  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const socket of this.#sockets) socket.resetAndDestroy();
    this.#sockets.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Keeps accepting and holding connections, but forwards nothing either way. */
  hang(): void {
    this.#hanging = true;
  }

  /** Bytes dropped while hanging, so far: a test waits on it to know a statement is on the wire. */
  get droppedBytes(): number {
    return this.#dropped;
  }

  /** Forwards again on the same connections; bytes dropped meanwhile stay lost. */
  resume(): void {
    this.#hanging = false;
  }

  #accept(client: Socket): void {
    const upstream = createConnection({ host: this.targetHost, port: this.targetPort });
    for (const socket of [client, upstream]) {
      this.#sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        this.#sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    // Bytes are dropped, not buffered, while hanging: like a network that lost them.
    const forward = (to: Socket) => (chunk: Buffer) => {
      if (this.#hanging) return void (this.#dropped += chunk.length);
      if (this.delayMs === 0) to.write(chunk);
      else setTimeout(() => to.writable && to.write(chunk), this.delayMs);
    };
    client.on('data', forward(upstream));
    upstream.on('data', forward(client));
  }
}
