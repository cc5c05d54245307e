/**
 * What the console's request list shows beside each request so that a failure can be judged without
 * opening it: the failing routine's reason (the first line of its last attempt's error), where the
 * request came from (queue add, STOW-RS, C-STORE and its calling AE title, as intake recorded them in
 * `REQUEST_DATA`), the patient `PATIENT_MATCH` matched, and an attachment row with a small thumbnail.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { DB } from '../../../db/schema.ts';
import { maskSecrets } from '../status/status.ts';
import { PATIENT_MATCH_ROUTINE } from '../status/waiting.ts';

/** How a request arrived. STOW-RS and C-STORE intake write `source` into `REQUEST_DATA`; queue add does not. */
export type RequestSource =
  | { readonly kind: 'queue-add' }
  | { readonly kind: 'stow-rs' }
  | { readonly kind: 'c-store'; readonly callingAeTitle: string };

export interface RequestSummary {
  /** `ROUTINE: reason` of the failing routine (first FAILED one in id order), else null. */
  readonly failure: string | null;
  /** The reason of the last attempt of a patient match waiting for its next try (RETRY), else null. */
  readonly waitingReason: string | null;
  readonly source: RequestSource;
  /** `REQUEST_DATA.matched_patient_id` when set. */
  readonly matchedPatientId: number | null;
  /** An attachment row of the request with a small thumbnail (the first one), else null. */
  readonly thumbnailPartId: number | null;
}

/** The longest reason shown in a list row. */
const MAX_REASON_LENGTH = 200;

/**
 * The reason of a failed attempt from its execution log: the first line of the error the engine wrote
 * last (`FAILED: message` for a permanent error, `Error: message` and its stack otherwise, or an
 * unfinished attempt's sentence), without its prefix; undefined when the log has none.
 */
export function failureReasonOf(logText: string): string | undefined {
  const lines = logText.split('\n');
  // The error comes last; a stack's frames follow its first line, so the last error line is its start.
  for (let i = lines.length - 1; i > 0; i -= 1) {
    const line = lines[i]!;
    const match = /^(?:FAILED: |[A-Za-z]*Error(?:\s*\[[^\]]*\])?: )(.*)$/.exec(line);
    if (match !== null) return clip(maskSecrets(match[1]!));
    if (/^Attempt \d+ never finished/.test(line)) return clip(maskSecrets(line));
  }
  return undefined;
}

function clip(text: string): string {
  return text.length > MAX_REASON_LENGTH ? `${text.slice(0, MAX_REASON_LENGTH - 1)}…` : text;
}

function jsonObject(text: string | null | undefined): Record<string, unknown> {
  if (text === null || text === undefined) return {};
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

/** The source recorded in a request's `REQUEST_DATA`. */
export function sourceOf(requestData: Record<string, unknown>): RequestSource {
  if (requestData.source === 'STOW-RS') return { kind: 'stow-rs' };
  if (requestData.source === 'C-STORE')
    return {
      kind: 'c-store',
      callingAeTitle: typeof requestData.calling_ae_title === 'string' ? requestData.calling_ae_title : '',
    };
  return { kind: 'queue-add' };
}

function positiveId(value: unknown): number | null {
  const id = typeof value === 'string' && /^\d{1,10}$/.test(value) ? Number(value) : value;
  return typeof id === 'number' && Number.isInteger(id) && id > 0 ? id : null;
}

/** The summaries of requests `requestIds` (a few statements for the whole page). */
export async function readRequestSummaries(
  db: Kysely<DB>,
  requestIds: readonly number[],
): Promise<Map<number, RequestSummary>> {
  const ids = [...new Set(requestIds)];
  if (ids.length === 0) return new Map();
  const [failedRoutines, waitingRoutines, dataRows, thumbnails] = await Promise.all([
    db
      .selectFrom('request_routine')
      .select(['id', 'request_id', 'routine_name'])
      .where('request_id', 'in', ids)
      .where('status', '=', 'FAILED')
      .orderBy('id')
      .execute(),
    db
      .selectFrom('request_routine')
      .select(['id', 'request_id'])
      .where('request_id', 'in', ids)
      .where('status', '=', 'RETRY')
      .where('routine_name', '=', PATIENT_MATCH_ROUTINE)
      .orderBy('id')
      .execute(),
    db
      .selectFrom('attachment_data')
      .select(['request_id', 'text_data'])
      .where('request_id', 'in', ids)
      .where('attachment_mnemonic', '=', 'REQUEST_DATA')
      .where('body_site_snomed_type', 'is', null)
      .execute(),
    db
      .selectFrom('attachment_data')
      .select(['request_id', (eb) => eb.fn.min('id').as('id')])
      .where('request_id', 'in', ids)
      .where(sql<boolean>`thumbnail_small_blob is not null`)
      .groupBy('request_id')
      .execute(),
  ]);
  const failing = new Map<number, { id: number; name: string }>();
  for (const routine of failedRoutines)
    if (!failing.has(routine.request_id))
      failing.set(routine.request_id, { id: routine.id, name: routine.routine_name });
  const waiting = new Map<number, number>();
  for (const routine of waitingRoutines)
    if (!waiting.has(routine.request_id)) waiting.set(routine.request_id, routine.id);
  const routineIds = [...[...failing.values()].map((r) => r.id), ...waiting.values()];
  const lastLogs =
    routineIds.length === 0
      ? []
      : await db
          .selectFrom('request_routine_execution as e')
          .select(['e.request_routine_id', 'e.log_text'])
          .where('e.request_routine_id', 'in', routineIds)
          .where('e.id', 'in', (eb) =>
            eb
              .selectFrom('request_routine_execution')
              .select((inner) => inner.fn.max('id').as('id'))
              .where('request_routine_id', 'in', routineIds)
              .groupBy('request_routine_id'),
          )
          .execute();
  const reasonByRoutine = new Map(
    lastLogs.map((row) => [row.request_routine_id, failureReasonOf(row.log_text ?? '')]),
  );
  const dataByRequest = new Map(dataRows.map((row) => [row.request_id, jsonObject(row.text_data)]));
  const thumbnailByRequest = new Map(thumbnails.map((row) => [row.request_id, Number(row.id)]));
  return new Map(
    ids.map((id) => {
      const data = dataByRequest.get(id) ?? {};
      const failed = failing.get(id);
      const reason = failed === undefined ? undefined : reasonByRoutine.get(failed.id);
      const waitingId = waiting.get(id);
      return [
        id,
        {
          failure: failed === undefined ? null : `${failed.name}: ${reason ?? 'no reason recorded'}`,
          waitingReason: waitingId === undefined ? null : (reasonByRoutine.get(waitingId) ?? null),
          source: sourceOf(data),
          matchedPatientId: positiveId(data.matched_patient_id),
          thumbnailPartId: thumbnailByRequest.get(id) ?? null,
        },
      ];
    }),
  );
}

/** The attachment row of request `requestId` whose small thumbnail the list shows, if it is that one. */
export async function isRequestThumbnail(
  db: Kysely<DB>,
  requestId: number,
  partId: number,
): Promise<boolean> {
  const row = await db
    .selectFrom('attachment_data')
    .select('id')
    .where('id', '=', partId)
    .where('request_id', '=', requestId)
    .where(sql<boolean>`thumbnail_small_blob is not null`)
    .executeTakeFirst();
  return row !== undefined;
}
