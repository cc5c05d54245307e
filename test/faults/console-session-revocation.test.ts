/**
 * Console sessions against credential changes: a password changed or a role revoked with the CLI (its
 * own connection, as another process would) ends the user's console sessions at their next request, as
 * disabling the account does; other users' sessions go on.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ConsoleClient, createOperator } from '../factories-console.ts';
import type { TestApp } from '../harness.ts';
import { forEachDialect, startTestApp } from '../harness.ts';
import { runCli } from '../run-cli.ts';

const NEW_PASSWORD = 'Changed-passw0rd-for-the-test';

forEachDialect((dialect) => {
  describe(`console sessions after a credential change [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
    });
    after(() => app.close());

    /** A signed-in console client of a new operator, its session checked once. */
    async function signedIn() {
      const user = await createOperator(app.db);
      const client = new ConsoleClient(app);
      assert.equal((await client.signIn(user)).status, 303);
      assert.equal((await client.get('/console/')).status, 200);
      return { user, client };
    }

    /** The session has ended: a page sends the browser to sign in again, and the row is gone. */
    async function assertEnded(client: ConsoleClient) {
      const page = await client.get('/console/requests');
      assert.equal(page.status, 303);
      assert.match(page.headers.get('location') ?? '', /^\/console\/login\?.*expired=1/);
      assert.equal((await client.get('/console/')).status, 303, 'the session does not come back');
    }

    const cli = async (args: string[]) => {
      const result = await runCli(app.env, args);
      assert.equal(result.status, 0, result.stderr);
    };

    it('ends the sessions of a user whose password is changed with the CLI, and signs in with the new one', async () => {
      const { user, client } = await signedIn();
      const second = new ConsoleClient(app);
      assert.equal((await second.signIn(user)).status, 303);
      const bystander = await signedIn();
      await cli(['user', 'password', user.username, '--password', NEW_PASSWORD]);
      await assertEnded(client);
      await assertEnded(second);
      assert.equal((await bystander.client.get('/console/')).status, 200, "another user's session goes on");
      assert.equal((await client.signIn(user)).status, 401, 'the old password');
      assert.equal((await client.signIn(user, NEW_PASSWORD)).status, 303);
      assert.equal((await client.get('/console/')).status, 200);
    });

    it('ends the sessions of a user whose role is revoked with the CLI', async () => {
      const { user, client } = await signedIn();
      await cli(['role', 'revoke', user.username, 'View Audit Log']);
      await assertEnded(client);
      assert.equal((await client.signIn(user)).status, 303, 'the password still signs in');
      assert.equal((await client.get('/console/audit')).status, 403, 'without the revoked operation');
    });

    it('keeps the session of a user granted a role with the CLI, which then opens that screen', async () => {
      const { user, client } = await signedIn();
      await cli(['role', 'revoke', user.username, 'View Audit Log']);
      await assertEnded(client);
      assert.equal((await client.signIn(user)).status, 303);
      assert.equal((await client.get('/console/audit')).status, 403);
      await cli(['role', 'grant', user.username, 'View Audit Log']);
      assert.equal((await client.get('/console/audit')).status, 200, 'the same session, with the new role');
    });

    it('ends the sessions of a user disabled with the CLI', async () => {
      const { user, client } = await signedIn();
      await cli(['user', 'disable', user.username]);
      await assertEnded(client);
    });
  });
});
