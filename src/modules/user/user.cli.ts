/**
 * CLI commands of the user module: accounts (`user create/disable/enable/password/list`) and RBAC
 * assignments (`role grant/revoke/list`). Passwords set here must pass the password policy
 * (`password-policy.ts`, configured by `PASSWORD_*`); they are never printed, except one the operator
 * asked the CLI to generate. Every change is written to the audit trail, refusals included. On an OpenEyes
 * database only the two listings run (read-only): OpenEyes manages its users and roles.
 */
import { randomBytes } from 'node:crypto';
import type { CliCommand, CliContext, CliOption } from '../../cli/cli-types.ts';
import { UsageError } from '../../cli/cli-types.ts';
import { findLastActivity, runAuditedCliAction } from '../audit/index.ts';
import { listAccounts, listItemHolders } from './account-list.ts';
import { createAccount, grantRole, revokeRole, setAccountActive, setPassword } from './accounts.ts';

/**
 * Why the account commands that change something refuse on an OpenEyes database; `user list` and
 * `role list` only read, so they run there too (who holds the console's roles).
 */
const OPENEYES_MANAGES_ACCOUNTS =
  'OpenEyes manages its users and roles (DATABASE_SCHEMA=openeyes): create, change and grant them in OpenEyes (`user list` and `role list` show them).';

const generatePasswordOption: CliOption = {
  type: 'boolean',
  description: 'generate a random password and print it (the only password the CLI ever prints)',
};
const passwordOption: CliOption = {
  type: 'string',
  valueName: 'P',
  description: 'the password (visible to other local users in the process list: prefer stdin)',
};

/** The password from --password, --generate-password or stdin; prints it only when generated. */
async function readPassword(ctx: CliContext): Promise<string> {
  const given = ctx.options.password;
  if (typeof given === 'string' && ctx.options['generate-password'] === true) {
    throw new UsageError('give --password or --generate-password, not both');
  }
  if (typeof given === 'string') {
    if (given === '') throw new UsageError('--password must not be empty');
    return given;
  }
  if (ctx.options['generate-password'] === true) {
    // At least 24 base64url characters (144 random bits), and never shorter than the policy's minimum.
    const length = Math.max(24, ctx.config.passwordPolicy.minLength);
    const generated = randomBytes(Math.ceil((length * 3) / 4))
      .toString('base64url')
      .slice(0, length);
    ctx.out(`Generated password: ${generated}`);
    return generated;
  }
  const text = (await ctx.readStdin('the password')).replace(/\r?\n$/, '');
  if (text === '') throw new UsageError('the password read from stdin is empty');
  return text;
}

/** The user id of `username` (for the audit row), or undefined when there is none. */
async function userIdOf(ctx: CliContext, username: string): Promise<number | undefined> {
  const row = await ctx.database.db
    .selectFrom('user_authentication')
    .select('user_id')
    .where((eb) => eb(eb.fn('lower', ['username']), '=', username.toLowerCase()))
    .executeTakeFirst();
  return row?.user_id;
}

async function noteUser(
  ctx: CliContext,
  note: (n: { targetType: 'user'; targetIds: number[]; detail?: string }) => void,
  username: string,
  detail?: string,
): Promise<void> {
  const id = await userIdOf(ctx, username);
  note({
    targetType: 'user',
    targetIds: id === undefined ? [] : [id],
    ...(detail === undefined ? {} : { detail }),
  });
}

const yesNo = (value: boolean): string => (value ? 'yes' : 'no');

/** The later of two stored date-times (`YYYY-MM-DD HH:MM:SS` sorts as text), or `-`. */
function latest(a: string | null | undefined, b: string | null | undefined): string {
  const values = [a, b].filter((v): v is string => typeof v === 'string' && v !== '');
  return values.length === 0 ? '-' : values.sort().at(-1)!;
}

export const userCommands: readonly CliCommand[] = [
  {
    words: ['user', 'create'],
    ownSchemaOnly: OPENEYES_MANAGES_ACCOUNTS,
    arguments: [{ name: 'username' }],
    options: {
      password: passwordOption,
      'generate-password': generatePasswordOption,
      role: {
        type: 'string',
        multiple: true,
        valueName: 'R',
        description: 'RBAC item to assign (repeatable)',
      },
    },
    summary: 'create a user with a local login; password from --password, stdin or --generate-password',
    async run(ctx) {
      const username = ctx.args[0]!;
      const roles = (ctx.options.role as readonly string[] | undefined) ?? [];
      const password = await readPassword(ctx);
      const userId = await runAuditedCliAction(ctx, 'user.create', async (note) => {
        if (roles.length > 0) note({ detail: `roles: ${roles.join(', ')}` });
        const id = await createAccount(ctx.database.db, {
          username,
          password,
          roles,
          passwordPolicy: ctx.config.passwordPolicy,
        });
        note({ targetType: 'user', targetIds: [id] });
        return id;
      });
      ctx.out(
        `Created user ${username} (id ${userId})${roles.length > 0 ? ` with ${roles.join(', ')}` : ''}`,
      );
    },
  },
  {
    words: ['user', 'disable'],
    ownSchemaOnly: OPENEYES_MANAGES_ACCOUNTS,
    arguments: [{ name: 'username' }],
    summary: 'disable a user (logins refused)',
    async run(ctx) {
      const username = ctx.args[0]!;
      await runAuditedCliAction(ctx, 'user.disable', async (note) => {
        await noteUser(ctx, note, username);
        await setAccountActive(ctx.database.db, username, false);
      });
      ctx.out(`Disabled user ${username}`);
    },
  },
  {
    words: ['user', 'enable'],
    ownSchemaOnly: OPENEYES_MANAGES_ACCOUNTS,
    arguments: [{ name: 'username' }],
    summary: 'enable a disabled user',
    async run(ctx) {
      const username = ctx.args[0]!;
      await runAuditedCliAction(ctx, 'user.enable', async (note) => {
        await noteUser(ctx, note, username);
        await setAccountActive(ctx.database.db, username, true);
      });
      ctx.out(`Enabled user ${username}`);
    },
  },
  {
    words: ['user', 'password'],
    ownSchemaOnly: OPENEYES_MANAGES_ACCOUNTS,
    arguments: [{ name: 'username' }],
    options: { password: passwordOption, 'generate-password': generatePasswordOption },
    summary: "set a user's password from --password, stdin or --generate-password",
    async run(ctx) {
      const username = ctx.args[0]!;
      const password = await readPassword(ctx);
      await runAuditedCliAction(ctx, 'user.password', async (note) => {
        await noteUser(ctx, note, username);
        await setPassword(ctx.database.db, username, password, {
          passwordPolicy: ctx.config.passwordPolicy,
        });
      });
      ctx.out(`Password of ${username} changed`);
    },
  },
  {
    words: ['user', 'list'],
    summary:
      'list every login: username, user id, active, RBAC items, last activity (audit trail or imported last login), password changed',
    async run(ctx) {
      const accounts = await listAccounts(ctx.database.db, {
        hasUserActiveColumn: ctx.database.schema.hasUserActiveColumn,
      });
      const lastActivity = await findLastActivity(ctx.database.db, [
        ...new Set(accounts.map((a) => a.userId)),
      ]);
      ctx.out(['username', 'user_id', 'active', 'items', 'last_activity', 'password_changed'].join('\t'));
      for (const a of accounts) {
        ctx.out(
          [
            a.username,
            a.userId,
            yesNo(a.isActive),
            a.items.length === 0 ? '-' : a.items.join(','),
            latest(lastActivity.get(a.userId), a.lastSuccessfulLoginDate),
            a.passwordLastChangedDate ?? '-',
          ].join('\t'),
        );
      }
    },
  },
  {
    words: ['role', 'grant'],
    ownSchemaOnly: OPENEYES_MANAGES_ACCOUNTS,
    arguments: [{ name: 'username' }, { name: 'item' }],
    summary: 'assign an RBAC item (role, task or operation) to a user',
    async run(ctx) {
      const [username, item] = [ctx.args[0]!, ctx.args[1]!];
      await runAuditedCliAction(ctx, 'role.grant', async (note) => {
        await noteUser(ctx, note, username, item);
        await grantRole(ctx.database.db, username, item);
      });
      ctx.out(`Granted ${item} to ${username}`);
    },
  },
  {
    words: ['role', 'revoke'],
    ownSchemaOnly: OPENEYES_MANAGES_ACCOUNTS,
    arguments: [{ name: 'username' }, { name: 'item' }],
    summary: 'remove an RBAC item from a user',
    async run(ctx) {
      const [username, item] = [ctx.args[0]!, ctx.args[1]!];
      await runAuditedCliAction(ctx, 'role.revoke', async (note) => {
        await noteUser(ctx, note, username, item);
        await revokeRole(ctx.database.db, username, item);
      });
      ctx.out(`Revoked ${item} from ${username}`);
    },
  },
  {
    words: ['role', 'list'],
    arguments: [{ name: 'item', isOptional: true }],
    summary:
      'list every RBAC item (or one) with the users who hold it, directly or through a role: item, kind, username, user id, active, through',
    async run(ctx) {
      const item = ctx.args[0];
      const items = await listItemHolders(ctx.database.db, item);
      if (item !== undefined && items.length === 0) throw new UsageError(`no RBAC item named "${item}"`);
      const accounts = await listAccounts(ctx.database.db, {
        hasUserActiveColumn: ctx.database.schema.hasUserActiveColumn,
      });
      const loginOf = new Map<number, { username: string; isActive: boolean }>();
      for (const a of accounts) if (!loginOf.has(a.userId)) loginOf.set(a.userId, a);
      ctx.out(['item', 'kind', 'username', 'user_id', 'active', 'through'].join('\t'));
      for (const i of items) {
        if (i.holders.length === 0) ctx.out([i.item, i.kind, '-', '-', '-', '-'].join('\t'));
        for (const h of i.holders) {
          const login = loginOf.get(h.userId);
          ctx.out(
            [
              i.item,
              i.kind,
              login?.username ?? '-',
              h.userId,
              login === undefined ? 'no login' : yesNo(login.isActive),
              h.through === h.item ? 'direct' : h.through,
            ].join('\t'),
          );
        }
      }
    },
  },
];
