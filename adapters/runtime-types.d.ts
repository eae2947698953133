/**
 * The few Bun and Deno APIs the adapters use, declared here instead of
 * depending on `@types/bun` or Deno's lib: the adapters read them from
 * `globalThis`, so nothing here becomes a global that `src/` could reach.
 */

/** `Bun.serve` options used by `adapters/bun.ts` (https://bun.sh/docs/api/http). */
export interface BunServeOptions {
  port: number;
  hostname: string;
  fetch(request: Request, server: BunServer): Response | Promise<Response>;
  /** Called when `fetch` throws; never expected, since the API never rejects. */
  error(error: Error): Response | Promise<Response>;
  tls?: { cert: string; key: string };
  /** `false` keeps Bun from answering errors with its HTML debug page. */
  development: boolean;
  /** Seconds a connection may stay silent; 0 disables the limit. */
  idleTimeout?: number;
  /** SO_REUSEPORT: other processes may listen on the same port (Linux spreads connections). */
  reusePort?: boolean;
}

/** The server `Bun.serve` returns. */
export interface BunServer {
  readonly port: number;
  /** The peer address of a request's connection. */
  requestIP(request: Request): { address: string; port: number } | null;
  /** Stops accepting; resolves when every connection is closed. `true` cuts in-flight requests. */
  stop(closeActiveConnections?: boolean): Promise<void>;
}

export interface BunGlobal {
  serve(options: BunServeOptions): BunServer;
}

/** `Deno.serve` options used by `adapters/deno.ts` (https://docs.deno.com/api/deno/~/Deno.serve). */
export interface DenoServeOptions {
  port: number;
  hostname: string;
  cert?: string;
  key?: string;
  /** Replaces Deno's own "Listening on ..." line. */
  onListen(address: { hostname: string; port: number }): void;
  /** Called when the handler throws; Deno's default answers a plain-text 500. */
  onError(error: unknown): Response | Promise<Response>;
  /** SO_REUSEPORT (Linux); Deno 2.9 accepts it only with --unstable-net. */
  reusePort?: boolean;
}

/** What `Deno.serve` tells a handler about the connection. */
export interface DenoServeHandlerInfo {
  remoteAddr: { hostname: string; port: number };
}

/** The server `Deno.serve` returns. */
export interface DenoHttpServer {
  /** Stops accepting; resolves when in-flight requests have finished. */
  shutdown(): Promise<void>;
}

export interface DenoGlobal {
  serve(options: DenoServeOptions, handler: (request: Request, info: DenoServeHandlerInfo) => Response | Promise<Response>): DenoHttpServer;
}
