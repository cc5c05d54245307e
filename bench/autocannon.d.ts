// autocannon ships no types; the harness uses only what is declared here (bench/lib.ts).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  interface AutocannonOptions {
    url: string;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    connections?: number;
    duration?: number;
    requests?: readonly Record<string, unknown>[];
    excludeErrorStats?: boolean;
  }

  function autocannon(
    options: AutocannonOptions,
    callback: (error: Error | null, result: never) => void,
  ): EventEmitter;
  export default autocannon;
}
