/**
 * The lens types held for review: those a device file made (`biometry_lens_review`) that are still
 * inactive. Activating a lens (and listing it for an institution) in OpenEyes's lens admin takes it off
 * the list.
 */
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { BiometryTables } from './biometry-tables.ts';

export interface HeldLens {
  readonly lensId: number;
  readonly name: string;
  readonly displayName: string;
  readonly acon: number;
  readonly requestId: number;
  readonly createdDate: string;
}

/** The held lens types, newest first, at most `limit`; `total` counts every one. */
export async function listHeldLenses(
  db: Kysely<DB>,
  options: { limit: number },
): Promise<{ lenses: HeldLens[]; total: number }> {
  const tables = db.withTables<BiometryTables>();
  const held = tables
    .selectFrom('biometry_lens_review as r')
    .innerJoin('ophinbiometry_lenstype_lens as l', 'l.id', 'r.lenstype_lens_id')
    .where('l.active', '=', 0)
    .where('l.deleted', '=', 0);
  const rows = await held
    .select(['l.id', 'l.name', 'l.display_name', 'l.acon', 'r.request_id', 'r.created_date'])
    .orderBy('r.id', 'desc')
    .limit(options.limit)
    .execute();
  const total = await held.select(({ fn }) => fn.countAll().as('n')).executeTakeFirstOrThrow();
  return {
    lenses: rows.map((row) => ({
      lensId: row.id,
      name: row.name,
      displayName: row.display_name,
      acon: Number(row.acon),
      requestId: row.request_id,
      createdDate: String(row.created_date),
    })),
    total: Number(total.n),
  };
}
