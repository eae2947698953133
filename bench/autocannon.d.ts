/** The part of autocannon's programmatic API the bench uses (the package ships no types). */
declare module 'autocannon' {
  interface AutocannonRequest {
    setupRequest?: (request: { path: string; headers?: Record<string, string> }) => unknown;
  }
  interface AutocannonOptions {
    url: string;
    connections: number;
    duration: number;
    headers?: Record<string, string>;
    requests?: AutocannonRequest[];
  }
  interface AutocannonResult {
    duration: number;
    requests: { total: number };
    latency: { p50: number; p99: number; max: number };
    non2xx: number;
    errors: number;
    timeouts: number;
  }
  function autocannon(options: AutocannonOptions): Promise<AutocannonResult>;
  export default autocannon;
}
