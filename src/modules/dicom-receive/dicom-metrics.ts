/**
 * Counters of DICOM receiving, kept in memory by this process: associations by outcome, C-ECHOs, and
 * instances by path (`stow-rs`, `c-store`) and outcome (`stored` or the failure reason in hex), with the
 * bytes received. No label ever holds a UID, an AE title or an address. They are counted whether or not
 * `/metrics` is on (a few map updates per instance); `registerDicomReceiveMetrics` exposes them as
 * prom-client collectors read at scrape time.
 */
import type { Registry } from 'prom-client';
import type { FailureReason } from './instance.ts';

export type ReceivePath = 'stow-rs' | 'c-store';

export type AssociationOutcome =
  | 'accepted'
  | 'refused-calling-ae'
  | 'refused-called-ae'
  | 'refused-limit'
  | 'aborted'
  /** Closed without a whole A-ASSOCIATE-RQ within the association timeout. */
  | 'timed-out'
  /** Closed or aborted by the PDU gate for a PDU or command it does not allow. */
  | 'aborted-protocol';

const associations = new Map<AssociationOutcome, number>();
const instances = new Map<string, { path: ReceivePath; outcome: string; count: number }>();
const bytes = new Map<ReceivePath, number>();
const connectionsRefused = new Map<string, number>();
let echoes = 0;
let openAssociations = 0;

export function countAssociation(outcome: AssociationOutcome): void {
  associations.set(outcome, (associations.get(outcome) ?? 0) + 1);
}

/** A connection closed at once at a connection limit (`total`, `address`, `unassociated`). */
export function countConnectionRefused(limit: string): void {
  connectionsRefused.set(limit, (connectionsRefused.get(limit) ?? 0) + 1);
}

export function countEcho(): void {
  echoes += 1;
}

/** Tracks the associations open now (+1 when one is accepted, -1 when it ends). */
export function trackOpenAssociations(delta: 1 | -1): void {
  openAssociations += delta;
}

/** One instance received through `path`: stored, or refused for `reason`. */
export function countInstance(path: ReceivePath, sizeBytes: number, reason?: FailureReason): void {
  const outcome = reason === undefined ? 'stored' : `0x${reason.toString(16).toUpperCase().padStart(4, '0')}`;
  const key = `${path} ${outcome}`;
  const entry = instances.get(key) ?? { path, outcome, count: 0 };
  entry.count += 1;
  instances.set(key, entry);
  bytes.set(path, (bytes.get(path) ?? 0) + sizeBytes);
}

/**
 * Registers the counters on the app's `/metrics` registry (a module collector of http/metrics.ts, read at
 * scrape time). prom-client is loaded here, when metrics are on, rather than with the module.
 */
export async function registerDicomReceiveMetrics(registry: Registry): Promise<void> {
  const { Counter, Gauge } = await import('prom-client');
  new Counter({
    name: 'dicom_associations_total',
    help: 'DICOM associations requested, by outcome.',
    labelNames: ['outcome'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [outcome, count] of associations) this.inc({ outcome }, count);
    },
  });
  new Counter({
    name: 'dicom_connections_refused_total',
    help: 'DICOM connections closed at once at a connection limit, by limit.',
    labelNames: ['limit'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [limit, count] of connectionsRefused) this.inc({ limit }, count);
    },
  });
  new Gauge({
    name: 'dicom_associations_open',
    help: 'DICOM associations open now.',
    registers: [registry],
    collect() {
      this.set(openAssociations);
    },
  });
  new Counter({
    name: 'dicom_echo_total',
    help: 'C-ECHO requests answered.',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(echoes);
    },
  });
  new Counter({
    name: 'dicom_instances_total',
    help: 'DICOM instances received, by path and outcome (stored, or the failure reason).',
    labelNames: ['path', 'outcome'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const e of instances.values()) this.inc({ path: e.path, outcome: e.outcome }, e.count);
    },
  });
  new Counter({
    name: 'dicom_received_bytes_total',
    help: 'Bytes of DICOM instances received, by path.',
    labelNames: ['path'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [path, count] of bytes) this.inc({ path }, count);
    },
  });
}
