import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createInstitution } from '../../../test/factories.ts';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { until } from '../../../test/until.ts';
import { createReferenceDataCache } from './reference-data.ts';

forEachDialect((dialect) => {
  describe(`createReferenceDataCache [${dialect}]`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(() => testDb.drop());

    it('keeps one load for the TTL: a new institution is not seen until then', async () => {
      const cache = createReferenceDataCache(testDb.db, 3_600_000);
      const first = await cache.get();
      const institutionId = await createInstitution(testDb.db);
      const second = await cache.get();
      assert.equal(second, first);
      assert.equal(second.institutionsById.get(institutionId), undefined);
    });

    it('loads again once the TTL has passed', async () => {
      const cache = createReferenceDataCache(testDb.db, 20);
      const first = await cache.get();
      const institutionId = await createInstitution(testDb.db);
      await until(async () => (await cache.get()).institutionsById.has(institutionId));
      assert.equal(first.institutionsById.has(institutionId), false);
    });

    it('with a TTL of 0 loads on every call, and concurrent callers share one load', async () => {
      const cache = createReferenceDataCache(testDb.db, 0);
      const first = await cache.get();
      const institutionId = await createInstitution(testDb.db);
      const [a, b, c] = await Promise.all([cache.get(), cache.get(), cache.get()]);
      assert.notEqual(a, first);
      assert.equal(a.institutionsById.get(institutionId)?.id, institutionId);
      assert.equal(b, a);
      assert.equal(c, a);
    });
  });
});
