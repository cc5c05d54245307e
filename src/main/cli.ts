/**
 * The command-line process (`npm run cli -- <command>`): loadConfig -> bootstrap (migrates) -> command ->
 * close. Exit status: 0 ok, 1 failure, 2 usage error. Commands come from a table; a module adds its
 * commands with one line below (see `src/main/cli-types.ts`). Passwords are never printed, except one
 * the user asked the CLI to generate.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { Config } from '../config.ts';
import { ConfigError, loadConfig } from '../config.ts';
import { AppError } from '../errors.ts';
import { auditCommands } from '../modules/audit/index.ts';
import { DatasetError, datasetCommands } from '../modules/dataset/index.ts';
import { queueCommands } from '../modules/request-queue/index.ts';
import {
  createAccount,
  grantRole,
  revokeRole,
  setAccountActive,
  setPassword,
} from '../modules/user/index.ts';
import { bootstrap } from './bootstrap.ts';
import type { CliCommand, CliContext, CliOption, CliOptionValue } from './cli-types.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError } from './cli-types.ts';

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
    const generated = randomBytes(18).toString('base64url');
    ctx.out(`Generated password: ${generated}`);
    return generated;
  }
  const text = (await ctx.readStdin('the password')).replace(/\r?\n$/, '');
  if (text === '') throw new UsageError('the password read from stdin is empty');
  return text;
}

const migrateCommand: CliCommand = {
  words: ['migrate'],
  summary: 'apply pending database migrations (every command does this first)',
  async run() {
    // bootstrap() has migrated already; runCli prints what it applied.
  },
};

const userCommands: readonly CliCommand[] = [
  {
    words: ['user', 'create'],
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
      const userId = await createAccount(ctx.database.db, { username, password, roles });
      ctx.out(
        `Created user ${username} (id ${userId})${roles.length > 0 ? ` with ${roles.join(', ')}` : ''}`,
      );
    },
  },
  {
    words: ['user', 'disable'],
    arguments: [{ name: 'username' }],
    summary: 'disable a user (logins refused)',
    async run(ctx) {
      await setAccountActive(ctx.database.db, ctx.args[0]!, false);
      ctx.out(`Disabled user ${ctx.args[0]!}`);
    },
  },
  {
    words: ['user', 'enable'],
    arguments: [{ name: 'username' }],
    summary: 'enable a disabled user',
    async run(ctx) {
      await setAccountActive(ctx.database.db, ctx.args[0]!, true);
      ctx.out(`Enabled user ${ctx.args[0]!}`);
    },
  },
  {
    words: ['user', 'password'],
    arguments: [{ name: 'username' }],
    options: { password: passwordOption, 'generate-password': generatePasswordOption },
    summary: "set a user's password from --password, stdin or --generate-password",
    async run(ctx) {
      const password = await readPassword(ctx);
      await setPassword(ctx.database.db, ctx.args[0]!, password);
      ctx.out(`Password of ${ctx.args[0]!} changed`);
    },
  },
  {
    words: ['role', 'grant'],
    arguments: [{ name: 'username' }, { name: 'item' }],
    summary: 'assign an RBAC item (role, task or operation) to a user',
    async run(ctx) {
      await grantRole(ctx.database.db, ctx.args[0]!, ctx.args[1]!);
      ctx.out(`Granted ${ctx.args[1]!} to ${ctx.args[0]!}`);
    },
  },
  {
    words: ['role', 'revoke'],
    arguments: [{ name: 'username' }, { name: 'item' }],
    summary: 'remove an RBAC item from a user',
    async run(ctx) {
      await revokeRole(ctx.database.db, ctx.args[0]!, ctx.args[1]!);
      ctx.out(`Revoked ${ctx.args[1]!} from ${ctx.args[0]!}`);
    },
  },
];

/** The command table. A module plugs in its commands with one line here. */
const COMMANDS: readonly CliCommand[] = [
  migrateCommand,
  ...userCommands,
  ...datasetCommands,
  ...queueCommands,
  ...auditCommands,
];

function usageOf(command: CliCommand): string {
  const parts = [...command.words];
  for (const a of command.arguments ?? [])
    parts.push(a.isOptional === true ? `[<${a.name}>]` : `<${a.name}>`);
  for (const [name, o] of Object.entries(command.options ?? {})) {
    const text =
      o.type === 'boolean'
        ? `--${name}`
        : `--${name} ${o.valueName ?? 'VALUE'}${o.multiple === true ? '...' : ''}`;
    parts.push(o.isRequired === true ? text : `[${text}]`);
  }
  return parts.join(' ');
}

function helpText(): string {
  const lines = ['Usage: npm run cli -- <command> [arguments]', '', 'Commands:'];
  for (const command of COMMANDS) {
    lines.push(`  ${usageOf(command)}`, `      ${command.summary}`);
    for (const [name, o] of Object.entries(command.options ?? {}))
      lines.push(`      --${name}: ${o.description}`);
  }
  lines.push('  help', '      this text', '', 'Exit status: 0 ok, 1 failure, 2 usage error.');
  return lines.join('\n');
}

/** The longest command whose words start the argument list. */
function findCommand(argv: readonly string[]): CliCommand | undefined {
  let best: CliCommand | undefined;
  for (const command of COMMANDS) {
    if (
      command.words.every((w, i) => argv[i] === w) &&
      (best === undefined || command.words.length > best.words.length)
    ) {
      best = command;
    }
  }
  return best;
}

function parseCommandLine(
  command: CliCommand,
  rest: string[],
): { args: string[]; options: Record<string, CliOptionValue> } {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = {};
  for (const [name, o] of Object.entries(command.options ?? {})) {
    options[name] = o.multiple === true ? { type: o.type, multiple: true } : { type: o.type };
  }
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const declared = command.arguments ?? [];
  const required = declared.filter((a) => a.isOptional !== true).length;
  if (parsed.positionals.length < required) {
    throw new UsageError(`missing <${declared[parsed.positionals.length]!.name}>`);
  }
  for (const [name, o] of Object.entries(command.options ?? {})) {
    if (o.isRequired === true && parsed.values[name] === undefined)
      throw new UsageError(`--${name} is required`);
  }
  if (parsed.positionals.length > declared.length) {
    throw new UsageError(`unexpected argument "${parsed.positionals[declared.length]!}"`);
  }
  return { args: parsed.positionals, options: parsed.values as Record<string, CliOptionValue> };
}

async function readAllStdin(what: string): Promise<string> {
  if (process.stdin.isTTY) {
    throw new UsageError(`expected ${what} on stdin (pipe it in), or see help for the options`);
  }
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Runs one command line; returns the exit status. */
async function runCli(argv: readonly string[]): Promise<number> {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const err = (line: string) => process.stderr.write(`${line}\n`);
  if (argv.length === 0 || argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h') {
    (argv.length === 0 ? err : out)(helpText());
    return argv.length === 0 ? EXIT_USAGE : EXIT_OK;
  }
  const command = findCommand(argv);
  if (command === undefined) {
    err(`Unknown command: ${argv.slice(0, 2).join(' ')}. Run "npm run cli -- help" for the list.`);
    return EXIT_USAGE;
  }
  let parsed;
  try {
    parsed = parseCommandLine(command, argv.slice(command.words.length));
  } catch (error) {
    err(`${(error as Error).message}\nUsage: npm run cli -- ${usageOf(command)}`);
    return EXIT_USAGE;
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      err(error.message);
      return EXIT_USAGE;
    }
    throw error;
  }
  let booted;
  try {
    booted = await bootstrap(config);
  } catch (error) {
    err(`Cannot open the database: ${(error as Error).message}`);
    return EXIT_FAILURE;
  }
  try {
    if (booted.migrations.applied.length > 0)
      err(`Applied migrations: ${booted.migrations.applied.join(', ')}`);
    else if (command === migrateCommand) out('Database is up to date');
    const status = await command.run({
      ...parsed,
      config,
      database: booted.database,
      files: booted.files,
      out,
      err,
      readStdin: readAllStdin,
    });
    return status ?? EXIT_OK;
  } catch (error) {
    if (error instanceof UsageError) {
      err(`${error.message}\nUsage: npm run cli -- ${usageOf(command)}`);
      return EXIT_USAGE;
    }
    if (error instanceof DatasetError || error instanceof AppError) {
      err(error.message);
      return EXIT_FAILURE;
    }
    err(`Failed: ${error instanceof Error ? error.message : String(error)}`);
    return EXIT_FAILURE;
  } finally {
    await booted.database.close();
  }
}

process.exitCode = await runCli(process.argv.slice(2));
