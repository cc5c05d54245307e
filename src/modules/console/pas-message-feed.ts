/**
 * The list of what the PAS sent, newest first: the HL7 messages the listener answered (`hl7_message`,
 * through the hl7 module) and the PASAPI calls the audit trail recorded (one `searchAuditEvents` stream
 * per PASAPI action, each on the audit's action index), merged into one keyset-paged list.
 *
 * Each stream is read from the page's position for at most a page; a stream that stops early (a full
 * page, or an audit scan that spent its time budget) is known only down to its `next` key, so the merged
 * page takes only rows above every such frontier. Its next position is the last row taken, or, when
 * fewer rows than a page were safe to take, the frontier that stopped it; every stream resumes below it.
 * Order: received time, then HL7 before PASAPI within a second, then id, all descending.
 */
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { AuditEventRow, AuditSearchFilter } from '../audit/index.ts';
import { searchAuditEvents } from '../audit/index.ts';
import type { AckCode, LoggedMessageRow } from '../hl7/index.ts';
import { listLoggedMessages } from '../hl7/index.ts';

/** A position in the merged list (exclusive): a row's time, its source's rank and its id. */
export interface FeedKey {
  readonly time: string;
  /** 0 HL7, 1 PASAPI. */
  readonly rank: 0 | 1;
  readonly id: number;
}

export type FeedRow =
  | { readonly source: 'HL7'; readonly key: FeedKey; readonly message: LoggedMessageRow }
  | { readonly source: 'PASAPI'; readonly key: FeedKey; readonly call: AuditEventRow };

export interface FeedFilter {
  readonly source?: 'HL7' | 'PASAPI';
  /** AA: HL7 AA and PASAPI 2xx; AE: HL7 AE and PASAPI 4xx-5xx; AR: HL7 AR only. */
  readonly outcome?: AckCode;
  /** The PASAPI actions (the audited routes' `pasapi.*`). */
  readonly pasapiActions: readonly string[];
}

export interface FeedPage {
  readonly rows: readonly FeedRow[];
  readonly next: FeedKey | undefined;
  /** A PASAPI scan spent its time budget: the page ends at its frontier, older calls may follow. */
  readonly isPartial: boolean;
}

/** Whether `a` comes before `b` in the list (newer first), or is the same position. */
function isAtOrBefore(a: FeedKey, b: FeedKey): boolean {
  if (a.time !== b.time) return a.time > b.time;
  if (a.rank !== b.rank) return a.rank < b.rank;
  return a.id >= b.id;
}

/** A stream's own (time, id) position strictly after `key` in the merged order. */
function streamBefore(key: FeedKey, rank: 0 | 1): { time: string; id: number } {
  if (key.rank === rank) return { time: key.time, id: key.id };
  // Rows of a source ranked before `key`'s in the same second are above it (all taken); those ranked
  // after it are all still to come.
  return { time: key.time, id: rank < key.rank ? 0 : Number.MAX_SAFE_INTEGER };
}

const AUDIT_OUTCOME: Partial<Record<AckCode, AuditSearchFilter['outcome']>> = {
  AA: { min: 200, max: 299 },
  AE: { min: 400, max: 599 },
};

interface Stream {
  readonly rows: readonly FeedRow[];
  /** Rows down to this key are all in `rows`; undefined when the stream ended. */
  readonly frontier: FeedKey | undefined;
  readonly isPartial: boolean;
}

/** One page of the merged list below `before`. */
export async function listPasFeed(
  db: Kysely<DB>,
  filter: FeedFilter,
  options: { readonly before?: FeedKey; readonly pageSize: number },
): Promise<FeedPage> {
  const { before, pageSize } = options;
  const streams: Promise<Stream>[] = [];
  if (filter.source !== 'PASAPI') {
    const position = before === undefined ? undefined : streamBefore(before, 0);
    streams.push(
      listLoggedMessages(db, {
        pageSize,
        ...(filter.outcome === undefined ? {} : { ackCode: filter.outcome }),
        ...(position === undefined ? {} : { before: { receivedDate: position.time, id: position.id } }),
      }).then((page) => ({
        rows: page.rows.map((message) => ({
          source: 'HL7' as const,
          key: { time: message.receivedDate, rank: 0 as const, id: message.id },
          message,
        })),
        frontier:
          page.next === undefined ? undefined : { time: page.next.receivedDate, rank: 0, id: page.next.id },
        isPartial: false,
      })),
    );
  }
  const outcome = filter.outcome === undefined ? undefined : AUDIT_OUTCOME[filter.outcome];
  if (filter.source !== 'HL7' && (filter.outcome === undefined || outcome !== undefined)) {
    const position = before === undefined ? undefined : streamBefore(before, 1);
    for (const action of filter.pasapiActions) {
      streams.push(
        searchAuditEvents(
          db,
          { action, ...(outcome === undefined ? {} : { outcome }) },
          {
            pageSize,
            ...(position === undefined ? {} : { before: { eventTime: position.time, id: position.id } }),
          },
        ).then((page) => ({
          rows: page.rows.map((call) => ({
            source: 'PASAPI' as const,
            key: { time: call.event_time, rank: 1 as const, id: call.id },
            call,
          })),
          frontier:
            page.next === undefined ? undefined : { time: page.next.eventTime, rank: 1, id: page.next.id },
          isPartial: page.isPartial,
        })),
      );
    }
  }
  const read = await Promise.all(streams);
  // The most restrictive frontier: rows below it may be missing from some stream.
  let cutoff: Stream | undefined;
  for (const stream of read) {
    if (stream.frontier === undefined) continue;
    if (cutoff === undefined || !isAtOrBefore(cutoff.frontier!, stream.frontier)) cutoff = stream;
  }
  const safe = read
    .flatMap((stream) => stream.rows)
    .filter((row) => cutoff === undefined || isAtOrBefore(row.key, cutoff.frontier!))
    .sort((a, b) => (isAtOrBefore(a.key, b.key) ? -1 : 1));
  const rows = safe.slice(0, pageSize);
  if (safe.length > pageSize || (rows.length === pageSize && cutoff !== undefined))
    return { rows, next: rows.at(-1)!.key, isPartial: false };
  return {
    rows,
    next: cutoff?.frontier,
    isPartial: cutoff?.isPartial === true,
  };
}
