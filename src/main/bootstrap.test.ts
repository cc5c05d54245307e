import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../config.ts';
import { StartupError } from '../errors.ts';
import type { TestDatabase } from '../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../test/harness.ts';
import { bootstrap } from './bootstrap.ts';

forEachDialect((dialect) => {
  describe(`bootstrap: the largest upload against the server's statement limit (${dialect})`, () => {
    let testDb: TestDatabase | undefined;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(() => testDb?.drop());

    const boot = (rawBodyBytes: number) =>
      bootstrap(loadConfig({ ...testDb!.env, RAW_BODY_LIMIT_BYTES: String(rawBodyBytes) }));

    it('starts when the server takes the largest upload in one statement', async () => {
      const limit = await testDb!.database.dialect.statementLimit();
      const booted = await boot(limit === undefined ? 4096 * 1024 * 1024 : limit.bytes - 1024 * 1024);
      await booted.database.close();
    });

    if (dialect === 'mysql') {
      it('refuses to start, naming the setting, when an upload the limits accept would not fit', async () => {
        const limit = (await testDb!.database.dialect.statementLimit())!;
        assert.equal(limit.setting, 'max_allowed_packet');
        await assert.rejects(boot(limit.bytes), (error: unknown) => {
          assert.ok(error instanceof StartupError);
          assert.match(
            error.message,
            new RegExp(
              `max_allowed_packet is ${limit.bytes} bytes, too small for the ${limit.bytes}-byte uploads`,
            ),
          );
          return true;
        });
      });
    }
  });
});
