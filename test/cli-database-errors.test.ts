/**
 * Every CLI command on a database that refuses the connection, the password or a privilege: one line on
 * stderr naming the cause, exit status 2, no stack trace (the promise `npm start` keeps too).
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { CliCommand } from '../src/cli/cli-types.ts';
import { CLI_COMMANDS } from '../src/main/cli-commands.ts';
import type { TestDatabase } from './harness.ts';
import { createTestDatabase, forEachDialect } from './harness.ts';
import type { CliResult } from './run-cli.ts';
import { runCli, spawnCli } from './run-cli.ts';

/**
 * A TCP port on 127.0.0.1 that nothing listens on, and that no other test can take meanwhile: a low port
 * (below the range the kernel hands out for port 0, which every test server uses) whose connection is
 * refused. A port taken from the kernel and released could be handed to another test file's server at
 * once, and its answer (a timeout) is not the refusal this file is about.
 */
async function closedPort(): Promise<number> {
  for (const port of [1, 3, 5, 7, 9, 11, 13, 17, 19]) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
    });
    if (refused) return port;
  }
  throw new Error('no closed low port on 127.0.0.1');
}

/** A command line of `command` with placeholder arguments and its required options. */
function commandLine(command: CliCommand): string[] {
  const line = [...command.words];
  for (const a of command.arguments ?? []) if (a.isOptional !== true) line.push(`'x'@'y'-${a.name}`);
  for (const [name, o] of Object.entries(command.options ?? {}))
    if (o.isRequired === true) line.push(`--${name}`, o.type === 'boolean' ? '' : '2026-01-01');
  return line.filter((word) => word !== '');
}

function assertOneLine(result: CliResult, cause: RegExp, what: string): void {
  assert.equal(result.status, 2, `${what}: ${result.stderr}`);
  assert.match(result.stderr, /^Cannot use the database: .+\n$/, what);
  assert.match(result.stderr, cause, what);
  assert.doesNotMatch(result.stderr, /\n\s+at /, `${what}: no stack trace`);
}

describe('CLI commands on a database server that refuses the connection', () => {
  let port: number;
  before(async () => {
    port = await closedPort();
  });

  for (const scheme of ['mysql', 'postgres'] as const) {
    it(`answers every command with one line and exit 2 (${scheme})`, async () => {
      const url = `${scheme}://cra:cra@127.0.0.1:${port}/cra_ci`;
      for (const command of CLI_COMMANDS) {
        const isOpenEyes = command.words[0] === 'openeyes';
        if (isOpenEyes && scheme !== 'mysql') continue;
        const env = {
          DATABASE_URL: url,
          LOG_LEVEL: 'silent',
          ...(isOpenEyes ? { DATABASE_SCHEMA: 'openeyes' } : {}),
        };
        const line = commandLine(command);
        assertOneLine(await runCli(env, line), /ECONNREFUSED/, line.join(' '));
      }
    });
  }

  it('keeps the promise in the real entry point too (npm run cli)', async () => {
    for (const args of [
      ['user', 'list'],
      ['openeyes', 'check'],
      ['openeyes', 'suggest-indexes'],
    ]) {
      const result = await spawnCli(
        { DATABASE_URL: `mysql://cra:cra@127.0.0.1:${port}/cra_ci`, DATABASE_SCHEMA: 'openeyes' },
        args,
      );
      assertOneLine(result, /ECONNREFUSED/, args.join(' '));
    }
  });
});

forEachDialect((dialect) => {
  if (dialect === 'sqlite') return;
  describe(`CLI commands on a ${dialect} server that refuses the password or a privilege`, () => {
    let t: TestDatabase;
    /** An account that may read the service's tables and write none. */
    let readOnlyUrl: string;
    let dropAccount: () => Promise<void>;
    before(async () => {
      t = await createTestDatabase(dialect);
      const name = `cra_ro_${Math.random().toString(36).slice(2, 10)}`;
      const target = new URL(t.url);
      const database = target.pathname.slice(1);
      if (dialect === 'mysql') {
        const admin = await mysql.createConnection(t.url);
        try {
          await admin.query(`create user '${name}'@'%' identified by 'read-only-password'`);
          await admin.query(`grant select on \`${database}\`.* to '${name}'@'%'`);
        } finally {
          await admin.end();
        }
        dropAccount = async () => {
          const c = await mysql.createConnection(t.url);
          await c.query(`drop user if exists '${name}'@'%'`).finally(() => c.end());
        };
      } else {
        const admin = new pg.Client({ connectionString: t.url });
        await admin.connect();
        try {
          await admin.query(`create role ${name} login password 'read-only-password'`);
          await admin.query(`grant select on all tables in schema public to ${name}`);
        } finally {
          await admin.end();
        }
        dropAccount = async () => {
          const c = new pg.Client({ connectionString: t.url });
          await c.connect();
          try {
            await c.query(`drop owned by ${name}`);
            await c.query(`drop role if exists ${name}`);
          } finally {
            await c.end();
          }
        };
      }
      target.username = name;
      target.password = 'read-only-password';
      readOnlyUrl = target.toString();
    });
    after(async () => {
      await dropAccount?.();
      await t?.drop();
    });

    it('answers a wrong password with one line and exit 2', async () => {
      const target = new URL(t.url);
      target.password = 'not-the-password';
      for (const args of [['migrate'], ['user', 'list'], ['queue', 'list']]) {
        const result = await runCli({ ...t.env, DATABASE_URL: target.toString() }, args);
        assertOneLine(result, /Access denied|password authentication failed/, args.join(' '));
      }
    });

    it('answers a privilege the command lacks with one line and exit 2, and writes nothing', async () => {
      const before = await t.db.selectFrom('user_authentication').select('id').execute();
      const env = { ...t.env, DATABASE_URL: readOnlyUrl };
      // Reading works with the privileges it has.
      const list = await runCli(env, ['user', 'list']);
      assert.equal(list.status, 0, list.stderr);
      const created = await runCli(env, ['user', 'create', 'newcomer', '--generate-password']);
      assertOneLine(created, /denied/, 'user create');
      assert.deepEqual(await t.db.selectFrom('user_authentication').select('id').execute(), before);
    });
  });
});
