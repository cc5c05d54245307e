/**
 * Counters of DICOM receiving, kept in memory by this process: associations by outcome, C-ECHOs, and
 * instances by path (`stow-rs`, `c-store`) and outcome (`stored` or the failure reason in hex), with the
 * bytes received. No label ever holds a UID, an AE title or an address. `dicomReceiveFamilies()` hands
 * them to the `/metrics` renderer as plain families (name, type, help, labelled samples), so that any
 * exposition library can register them as a collector.
 */
import type { FailureReason } from './instance.ts';

export type ReceivePath = 'stow-rs' | 'c-store';

export type AssociationOutcome =
  'accepted' | 'refused-calling-ae' | 'refused-called-ae' | 'refused-limit' | 'aborted';

export interface MetricFamily {
  readonly name: string;
  readonly type: 'counter' | 'gauge';
  readonly help: string;
  readonly samples: readonly (readonly [labels: Readonly<Record<string, string>>, value: number])[];
}

const associations = new Map<AssociationOutcome, number>();
const instances = new Map<string, { path: ReceivePath; outcome: string; count: number }>();
const bytes = new Map<ReceivePath, number>();
let echoes = 0;
let openAssociations = 0;

export function countAssociation(outcome: AssociationOutcome): void {
  associations.set(outcome, (associations.get(outcome) ?? 0) + 1);
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

export function dicomReceiveFamilies(): MetricFamily[] {
  return [
    {
      name: 'dicom_associations_total',
      type: 'counter',
      help: 'DICOM associations requested, by outcome.',
      samples: [...associations].map(([outcome, count]) => [{ outcome }, count]),
    },
    {
      name: 'dicom_associations_open',
      type: 'gauge',
      help: 'DICOM associations open now.',
      samples: [[{}, openAssociations]],
    },
    {
      name: 'dicom_echo_total',
      type: 'counter',
      help: 'C-ECHO requests answered.',
      samples: [[{}, echoes]],
    },
    {
      name: 'dicom_instances_total',
      type: 'counter',
      help: 'DICOM instances received, by path and outcome (stored, or the failure reason).',
      samples: [...instances.values()].map((e) => [{ path: e.path, outcome: e.outcome }, e.count]),
    },
    {
      name: 'dicom_received_bytes_total',
      type: 'counter',
      help: 'Bytes of DICOM instances received, by path.',
      samples: [...bytes].map(([path, count]) => [{ path }, count]),
    },
  ];
}
