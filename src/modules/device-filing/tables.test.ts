import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { OPENEYES_TABLE_NEEDS } from '../../db/openeyes/schema-needs.ts';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { deviceInformationOf } from './device-header.ts';
import { DEVICE_INFORMATION_COLUMNS } from './tables.ts';

/** The columns of `et_ophgeneric_device_information` that are not Device Information text. */
const OTHER_COLUMNS = new Set([
  'id',
  'event_id',
  'last_request_id',
  'created_user_id',
  'created_date',
  'last_modified_user_id',
  'last_modified_date',
]);

const declared = Object.keys(DEVICE_INFORMATION_COLUMNS).sort();

describe('DEVICE_INFORMATION_COLUMNS', () => {
  it('are the text columns the OpenEyes schema check requires of et_ophgeneric_device_information', () => {
    const need = OPENEYES_TABLE_NEEDS.et_ophgeneric_device_information;
    assert.ok(need !== undefined);
    const columns = Object.entries(need.columns).filter(([name]) => !OTHER_COLUMNS.has(name));
    assert.deepEqual(columns.map(([name]) => name).sort(), declared);
    for (const [name, column] of columns) assert.equal(column.kind, 'text', name);
  });

  it('are the columns deviceInformationOf fills, NULL where no header attribute is read', () => {
    const header = Object.fromEntries(
      Object.values(DEVICE_INFORMATION_COLUMNS)
        .filter((keyword) => keyword !== null)
        .map((keyword) => [keyword, ` ${keyword} value `]),
    );
    const values = deviceInformationOf(header);
    assert.deepEqual(Object.keys(values).sort(), declared);
    for (const [column, keyword] of Object.entries(DEVICE_INFORMATION_COLUMNS)) {
      assert.equal(
        values[column as keyof typeof values],
        keyword === null ? null : `${keyword} value`,
        column,
      );
    }
  });
});

forEachDialect((dialect) => {
  describe(`et_ophgeneric_device_information as migration 0015 creates it (${dialect})`, () => {
    let database: TestDatabase;
    before(async () => {
      database = await createTestDatabase(dialect);
    });
    after(async () => {
      await database.drop();
    });

    it('has exactly the declared Device Information columns besides its id, event, request and audit columns', async () => {
      const tables = await database.db.introspection.getTables();
      const table = tables.find((t) => t.name === 'et_ophgeneric_device_information');
      assert.ok(table !== undefined);
      const names = table.columns.map((c) => c.name);
      assert.deepEqual(names.filter((name) => OTHER_COLUMNS.has(name)).sort(), [...OTHER_COLUMNS].sort());
      assert.deepEqual(names.filter((name) => !OTHER_COLUMNS.has(name)).sort(), declared);
    });
  });
});
