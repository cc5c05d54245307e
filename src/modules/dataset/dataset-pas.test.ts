/**
 * The dataset format carries the PAS tables (migration 0020): a document listing them children first is
 * imported in foreign-key order and exported back with the same values, on every dialect; a row that
 * breaks a reference is refused and nothing is imported.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { countRows } from '../../../test/factories.ts';
import { DATASET_FORMAT, exportDataset, importDataset } from './index.ts';

const PAS_TABLES = [
  'patient_merge_request',
  'pasapi_remap_value',
  'pasapi_xpath_remap',
  'pasapi_assignment',
  'contact_practice_associate',
  'address',
  'gp',
  'practice',
] as const;

function pasDocument(): { format: string; tables: Record<string, Record<string, unknown>[]> } {
  return {
    format: DATASET_FORMAT,
    tables: {
      patient_merge_request: [
        {
          id: 3,
          primary_id: 1000,
          secondary_id: 1001,
          primary_local_identifier_value: '1234567',
          secondary_local_identifier_value: '7654321',
          primary_dob: '1980-02-01',
          secondary_dob: '1980-02-01',
          status: 20,
          merge_json: '{"log":["Patients successfully merged"]}',
        },
      ],
      pasapi_remap_value: [{ id: 9, xpath_id: 8, input: 'AX', output: null }],
      pasapi_xpath_remap: [
        { id: 8, name: 'Ethnic group', xpath: '/Patient/EthnicGroup', institution_id: 70 },
      ],
      pasapi_assignment: [
        {
          id: 4,
          resource_type: 'Patient',
          resource_id: '1234567',
          internal_type: '\\Patient',
          internal_id: 1000,
        },
      ],
      contact_practice_associate: [{ id: 6, gp_id: 5, practice_id: 7 }],
      address: [
        {
          id: 2,
          contact_id: 500,
          address1: '1 High Street',
          postcode: 'LS1 1AA',
          country_id: 1,
          address_type_id: 2,
          date_start: '2024-01-02T03:04:05Z',
        },
      ],
      gp: [{ id: 5, obj_prof: 'G8123456', nat_id: 'G8123456', contact_id: 501 }],
      practice: [{ id: 7, code: 'B82001', phone: '0113 000 0000', contact_id: 502 }],
      patient: [
        { id: 1000, contact_id: 500, dob: '1980-02-01', gender: 'F' },
        { id: 1001, contact_id: 503, dob: '1980-02-01', gender: 'F', deleted: 1 },
      ],
      contact: [
        { id: 500, first_name: 'Ann', last_name: 'Example' },
        { id: 501, first_name: 'A', last_name: 'Doctor' },
        { id: 502, first_name: '', last_name: 'Surgery' },
        { id: 503, first_name: 'Ann', last_name: 'Example' },
      ],
      institution: [{ id: 70, name: 'Test Hospital', remote_id: 'TST' }],
    },
  };
}

forEachDialect((dialect) => {
  describe(`dataset import and export of the PAS tables (${dialect})`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await createTestDatabase(dialect);
    });
    after(async () => t?.drop());

    it('refuses a row whose reference is broken, importing nothing', async () => {
      const document = pasDocument();
      document.tables.address![0]!.country_id = 999;
      await assert.rejects(importDataset(t, document), /address/);
      for (const table of PAS_TABLES) assert.equal(await countRows(t.db, table), 0, table);
    });

    it('imports them in foreign-key order and exports the same values', async () => {
      const summary = await importDataset(t, pasDocument());
      for (const table of PAS_TABLES) assert.equal(summary.tables[table]?.inserted, 1, table);
      let text = '';
      await exportDataset(
        t,
        async (chunk) => {
          text += chunk;
        },
        { tables: [...PAS_TABLES] },
      );
      const exported = JSON.parse(text) as { tables: Record<string, Record<string, unknown>[]> };
      const [request] = exported.tables.patient_merge_request!;
      assert.equal(request!.status, 20);
      assert.equal(request!.primary_dob, '1980-02-01');
      assert.equal(request!.secondary_local_identifier_value, '7654321');
      const [address] = exported.tables.address!;
      assert.equal(address!.postcode, 'LS1 1AA');
      assert.equal(address!.date_start, '2024-01-02 03:04:05');
      assert.equal(exported.tables.pasapi_remap_value![0]!.output, null);
      assert.equal(exported.tables.pasapi_assignment![0]!.internal_type, '\\Patient');
      assert.equal(exported.tables.gp![0]!.nat_id, 'G8123456');
      assert.equal(exported.tables.contact_practice_associate![0]!.practice_id, 7);
    });
  });
});
