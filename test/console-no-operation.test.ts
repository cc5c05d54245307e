/**
 * The console's overview for a signed-in user with no screen yet: it names each screen's role and the
 * CLI command that grants it to that user (a screen's 403 page names its own), and the command, run as
 * shown, opens the screen.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createUser } from './factories.ts';
import { ConsoleClient } from './factories-console.ts';
import type { TestApp } from './harness.ts';
import { forEachDialect, startTestApp } from './harness.ts';
import { runCli } from './run-cli.ts';

/** The words of a shell command line made of plain words and single-quoted ones. */
function shellWords(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}

function textOf(html: string): string {
  return html
    .replace(/<[^>]+>/g, '')
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, '&');
}

forEachDialect((dialect) => {
  describe(`the console for a user without any screen (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, { env: { AUTH_CACHE_TTL_MS: '0' } });
    });
    after(() => app.close());

    it('names the role of each screen and the command that grants it, which opens the screen', async () => {
      const user = await createUser(app.db, { username: 'desk.user', roles: ['API access'] });
      const browser = new ConsoleClient(app);
      assert.equal((await browser.signIn(user)).status, 303);
      const refused = await browser.get('/console/audit');
      assert.equal(refused.status, 403);
      const refusal = textOf(await refused.text());
      assert.match(refusal, /does not have the operation OprnViewAuditLog/);
      assert.match(refusal, /The role that grants it: View Audit Log\./);
      assert.ok(refusal.includes("npm run cli -- role grant desk.user 'View Audit Log'"), refusal);
      const home = textOf(await (await browser.get('/console/')).text());
      assert.match(home, /Your account has no console operation yet/);
      const commands = [...home.matchAll(/npm run cli -- (role grant [^\n]+)/g)].map((m) => m[1]!.trim());
      assert.deepEqual(commands, [
        "role grant desk.user 'Edit Payload Processor'",
        'role grant desk.user TaskViewClinical',
        "role grant desk.user 'View Audit Log'",
      ]);
      for (const command of commands) {
        const granted = await runCli(app.env, shellWords(command));
        assert.equal(granted.status, 0, granted.stderr);
      }
      for (const url of ['/console/requests', '/console/signatures', '/console/audit'])
        assert.equal((await browser.get(url)).status, 200, url);
    });
  });
});
