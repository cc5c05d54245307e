/** `NOOP`: does nothing and completes. The `noop` request type uses it as a pipeline health check and
 * the benchmark uses it to measure the engine's own cost. */
import { defineRoutine } from './catalog.ts';

export const noopRoutine = defineRoutine({
  name: 'NOOP',
  timeoutMs: 10_000,
  retry: 'backoff',
  run: async () => {},
});
