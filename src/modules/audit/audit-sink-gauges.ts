/**
 * The read audit sink's families of `/metrics`, read from its stats at scrape time: backlog, lag, whether
 * it refuses reads, and its counts of rows written and retried, failed commits, refused reads, and commits
 * with the time they took. prom-client is loaded here, when metrics are on, rather than with the module.
 */
import type { Registry } from 'prom-client';
import type { AuditSink, AuditSinkStats } from './audit-sink.ts';

/** A collector registration for `installMetrics`; registers nothing without a sink (durable reads). */
export function auditSinkGauges(sink: AuditSink | undefined): (registry: Registry) => Promise<void> {
  return async (registry) => {
    if (sink === undefined) return;
    const { Counter, Gauge } = await import('prom-client');
    const gauge = (name: string, help: string, read: (stats: AuditSinkStats) => number) =>
      new Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          this.set(read(sink.stats()));
        },
      });
    const counter = (name: string, help: string, read: (stats: AuditSinkStats) => number) =>
      new Counter({
        name,
        help,
        registers: [registry],
        collect() {
          this.reset();
          this.inc(read(sink.stats()));
        },
      });
    gauge('audit_sink_backlog_rows', 'Read audit rows not yet committed.', (s) => s.backlogRows);
    gauge(
      'audit_sink_lag_seconds',
      'Age of the oldest read audit row not yet committed.',
      (s) => s.lagSeconds,
    );
    gauge('audit_sink_refusing', 'Whether reads answer 503 (read audit sink behind).', (s) =>
      s.isRefusing ? 1 : 0,
    );
    counter('audit_sink_rows_written_total', 'Read audit rows committed.', (s) => s.rowsWritten);
    counter(
      'audit_sink_rows_retried_total',
      'Read audit rows of failed commits, retried.',
      (s) => s.rowsRetried,
    );
    counter('audit_sink_flush_failures_total', 'Failed read audit commits.', (s) => s.flushFailures);
    counter(
      'audit_sink_reads_refused_total',
      'Reads answered 503 by the read audit sink.',
      (s) => s.readsRefused,
    );
    counter('audit_sink_flushes_total', 'Committed read audit batches.', (s) => s.flushes);
    counter('audit_sink_flush_seconds_total', 'Time the read audit commits took.', (s) => s.flushSecondsSum);
  };
}
