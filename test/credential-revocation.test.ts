// test-needs: processes
/**
 * Revocation across processes: two real server processes on one database cache a user's credentials;
 * the CLI (a third process) disables the user, or this test's process changes the password or revokes
 * the role with the functions the CLI runs. Every server
 * must stop accepting the old credentials within 2 s, while still answering from its cache otherwise
 * (AUTH_CACHE_TTL_MS stays at its 60 s default).
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { basicHeader, createUser } from './factories.ts';
import type { TestUser } from './factories.ts';
import type { TestDatabase } from './harness.ts';
import { createTestDatabase, forEachDialect } from './harness.ts';
import { runCli } from './run-cli.ts';
import { until } from './until.ts';
import { revokeRole, setPassword } from '../src/modules/user/index.ts';

const SERVER = new URL('../src/main/server.ts', import.meta.url).pathname;
const REVOCATION_BOUND_MS = 2000;

interface Server {
  readonly child: ChildProcess;
  readonly baseUrl: string;
}

async function startServer(env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, [SERVER], {
    env: { ...process.env, ...env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const match = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(output);
    if (match !== null && output.includes('clinical-records-api ready'))
      return { child, baseUrl: `http://127.0.0.1:${match[1]}` };
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill('SIGKILL');
  throw new Error(`server did not start:\n${output}`);
}

forEachDialect((dialect) => {
  describe(`credential revocation across server processes [${dialect}]`, () => {
    let testDb: TestDatabase;
    const servers: Server[] = [];
    before(async () => {
      testDb = await createTestDatabase(dialect);
      const env = { ...testDb.env, AUTH_CACHE_TTL_MS: '60000' };
      servers.push(await startServer(env), await startServer(env));
    });
    after(async () => {
      for (const server of servers) server.child.kill('SIGKILL');
      await testDb.drop();
    });

    /** The status each server answers for a search with `authorization`. */
    const statuses = (authorization: string) =>
      Promise.all(
        servers.map(async (server) => {
          const response = await fetch(`${server.baseUrl}/api/v1/patient/search?term=smith`, {
            headers: { authorization },
          });
          await response.body?.cancel();
          return response.status;
        }),
      );

    /** Resolves once every server answers `status`; fails after the revocation bound. */
    const untilEvery = (authorization: string, status: number) =>
      until(async () => (await statuses(authorization)).every((s) => s === status), {
        what: `every server answering ${status}`,
        timeoutMs: REVOCATION_BOUND_MS,
        intervalMs: 50,
      });

    /** A user whose credentials both servers have verified and cached. */
    async function cachedUser(): Promise<TestUser> {
      const user = await createUser(testDb.db);
      assert.deepEqual(await statuses(user.authorization), [200, 200]);
      return user;
    }

    it('keeps answering from the cache while nothing is revoked', async () => {
      const user = await cachedUser();
      // A change made behind the service's back (no credential change recorded) is not seen: the
      // servers answer from their caches, without reading the login again.
      await testDb.db
        .updateTable('user_authentication')
        .set({ password_hash: null })
        .where('user_id', '=', user.userId)
        .execute();
      await new Promise((resolve) => setTimeout(resolve, 1000));
      assert.deepEqual(await statuses(user.authorization), [200, 200]);
    });

    it('refuses a user disabled with the CLI on every server within 2 s', async () => {
      const user = await cachedUser();
      const disabled = await runCli(testDb.env, ['user', 'disable', user.username]);
      assert.equal(disabled.status, 0, disabled.stderr);
      await untilEvery(user.authorization, 401);
    });

    // The commands below are what the CLI runs (shown above end to end), from this test's process.
    it('refuses the old password after a change on every server within 2 s, and takes the new one', async () => {
      const user = await cachedUser();
      await setPassword(testDb.db, user.username, 'a-new-password-7');
      await untilEvery(user.authorization, 401);
      assert.deepEqual(await statuses(basicHeader(user.username, 'a-new-password-7')), [200, 200]);
    });

    it('answers 403 on every server within 2 s once the role is revoked', async () => {
      const user = await cachedUser();
      await revokeRole(testDb.db, user.username, 'API access');
      await untilEvery(user.authorization, 403);
    });
  });
});
