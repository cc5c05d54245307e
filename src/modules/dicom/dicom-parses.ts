/**
 * How many times this process had a DICOM file parsed, by purpose: `receipt` (a received instance's
 * checks and header, which become its study record), `record` (a filing step reading the header of a
 * request that has no study record: queued by queue add's body, or before receipt stored one),
 * `extraction` (the pixels or encapsulated document), or the purpose a task names (`biometry`,
 * `dicomweb-metadata`). A received file is parsed at receipt, for its pixels and, for a biometry
 * device, for its measurements; the counter shows any other read. Counted in memory whether or not `/metrics` is on;
 * `registerDicomParseMetrics` exposes it as `dicom_parses_total{purpose}`, read at scrape time.
 */
import type { Registry } from 'prom-client';

const parses = new Map<string, number>();

/** One file handed to a parser for `purpose`. */
export function countDicomParse(purpose: string): void {
  parses.set(purpose, (parses.get(purpose) ?? 0) + 1);
}

/** The parses counted so far in this process, by purpose. */
export function readDicomParseCounts(): Readonly<Record<string, number>> {
  return Object.fromEntries(parses);
}

/** Registers `dicom_parses_total` on the app's `/metrics` registry; prom-client is loaded here. */
export async function registerDicomParseMetrics(registry: Registry): Promise<void> {
  const { Counter } = await import('prom-client');
  new Counter({
    name: 'dicom_parses_total',
    help: 'DICOM files handed to a parser, by purpose (receipt, seed, extraction, biometry, ...).',
    labelNames: ['purpose'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [purpose, count] of parses) this.inc({ purpose }, count);
    },
  });
}
