/**
 * The counters module: owner of `rate_limit_counter`, the counters server processes share through the
 * database (rate-limit windows, the credential-change count, the readiness probe). Other modules and
 * `src/http` reach the table only through this file.
 */
export type { CounterDelta, RateLimitCounterTable } from './counters.queries.ts';
export {
  addWindowHits,
  deleteEndedWindows,
  probeWrite,
  readCredentialChanges,
  readWindowTotals,
  recordCredentialChange,
} from './counters.queries.ts';
