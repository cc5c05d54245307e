/**
 * OpenEyes's Did Not Attend event (module OphCiDidNotAttend) in the own schema, for PASAPI's
 * `DidNotAttend`: its event type, its comments element (`et_ophcididnotattend_comments`, v6.8 shape) and
 * the metadata of the settings that switch the automated events on (`DNA_autogen_enabled`, default off)
 * and name their source (`DNA_autogen_message`), as migration `m210319_135357` adds them.
 */
import type { AnyDb, DialectAdapter } from './helpers.ts';
import { auditColumns, idColumn } from './helpers.ts';

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  const t = dialect.columnTypes;
  const eventType = await db
    .selectFrom('event_type')
    .select('id')
    .where('class_name', '=', 'OphCiDidNotAttend')
    .executeTakeFirst();
  if (eventType === undefined)
    await db
      .insertInto('event_type')
      .values({
        name: 'Did Not Attend',
        class_name: 'OphCiDidNotAttend',
        event_group_id: null,
        parent_id: null,
        rbac_operation_suffix: null,
        show_attachments: 0,
        can_be_created_manually: 1,
      })
      .execute();

  await idColumn(db.schema.createTable('et_ophcididnotattend_comments'), t)
    .addColumn('event_id', 'integer', (c) => c.notNull().references('event.id'))
    .addColumn('comment', t.text)
    .$call((b) => auditColumns(b, t))
    .execute();
  await db.schema
    .createIndex('et_ophcididnotattend_comments_event_id')
    .on('et_ophcididnotattend_comments')
    .column('event_id')
    .execute();

  await db
    .insertInto('setting_metadata')
    .values([
      {
        key: 'DNA_autogen_enabled',
        name: 'Create Did Not Attend events from the PAS',
        default_value: 'off',
        lowest_setting_level: 'INSTALLATION',
      },
      {
        key: 'DNA_autogen_message',
        name: 'Source text of automated Did Not Attend events',
        default_value: '',
        lowest_setting_level: 'INSTALLATION',
      },
    ])
    .execute();
}
