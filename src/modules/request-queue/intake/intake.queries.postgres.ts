/**
 * PostgreSQL form of the intake write. Why a dialect file: PostgreSQL runs data-modifying CTEs, so the
 * request, its attachment rows and its first routine go to the server as ONE statement (one round trip,
 * its own implicit transaction) instead of BEGIN, three INSERTs and COMMIT. SQLite has no INSERT inside
 * WITH; it uses `insertQueuedRequest` inside a transaction (intake.queries.ts). Both write the same rows.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { runCompiled } from '../../../db/compiled-queries.ts';
import type { Database } from '../../../db/database.ts';
import type { DB } from '../../../db/schema.ts';
import type { QueuedRequestRows } from './intake.queries.ts';
import { attachmentRowsOf, firstRoutineRowOf, requestRowOf } from './intake.queries.ts';

/**
 * Writes one queued request atomically; resolves to its id once committed. `rows.attachments` must not
 * be empty (an INSERT needs at least one row). Building and compiling this statement costs more CPU than
 * the rest of intake together, and its text depends only on the number of attachment rows: its shape is
 * compiled once per count (`database.shapes`) and run prepared.
 */
export async function insertQueuedRequestInOneStatement(
  database: Database,
  rows: QueuedRequestRows,
): Promise<number> {
  const values: unknown[] = [rows.route.requestType, rows.route.queue, rows.route.routineName];
  values.push(rows.systemMessage, rows.userId, rows.now);
  for (const a of rows.attachments) {
    values.push(a.mnemonic, a.mimeType, a.blobData, a.textData, a.uploadFileName, a.hashCode);
  }
  const query = database.shapes.compile(`intake:cte:${rows.attachments.length}`, values, (slot) => {
    const at = (i: number) => slot[i] as never;
    return buildStatement(database.db, {
      route: { requestType: at(0), queue: at(1), routineName: at(2) },
      systemMessage: at(3),
      userId: at(4),
      now: at(5),
      attachments: rows.attachments.map((_, n) => {
        const base = 6 + n * 6;
        return {
          mnemonic: at(base),
          mimeType: at(base + 1),
          blobData: at(base + 2),
          textData: at(base + 3),
          uploadFileName: at(base + 4),
          hashCode: at(base + 5),
        };
      }),
    });
  });
  const [row] = await runCompiled(database, query);
  return row!.id;
}

function buildStatement(db: Kysely<DB>, rows: QueuedRequestRows) {
  const newRequestId = sql<number>`(select id from new_request)`;
  return db
    .with('new_request', (qc) => qc.insertInto('request').values(requestRowOf(rows)).returning('id'))
    .with('new_attachments', (qc) =>
      qc.insertInto('attachment_data').values(attachmentRowsOf(newRequestId, rows)),
    )
    .with('new_routine', (qc) =>
      qc.insertInto('request_routine').values(firstRoutineRowOf(newRequestId, rows)),
    )
    .selectFrom('new_request')
    .select('id');
}
