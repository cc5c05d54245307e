/**
 * Runs one CLI command line against a command table: finds the command, parses its arguments from the
 * definition, loads the configuration from the given environment, bootstraps the database (migrated),
 * runs the command and closes everything. Exit status: 0 ok, 1 failure, 2 usage error.
 *
 * Everything the command touches comes in through `CliIo` (environment, standard streams), so that the
 * tests run commands in this process through the same table as `npm run cli`.
 */
import { randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import type { CliActor, CliCommand, CliContext, CliOption, CliOptionValue } from '../cli/cli-types.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError } from '../cli/cli-types.ts';
import { DEFAULT_PLAIN_INTERVAL_MS, createProgressFactory } from '../cli/progress.ts';
import type { Config } from '../config.ts';
import { ConfigError, loadConfig } from '../config.ts';
import { AppError, StartupError } from '../errors.ts';
import { DatasetError } from '../modules/dataset/index.ts';
import { asStartupError, bootstrap } from './bootstrap.ts';

export interface CliIo {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdin: Readable & { isTTY?: boolean };
  readonly stdout: Writable;
  readonly stderr: Writable & { isTTY?: boolean };
  /** Interval of the plain progress lines when stderr is not a terminal (default 5 s). */
  readonly progressIntervalMs?: number;
}

/** The `migrate` command: bootstrap has migrated already, the runner prints what it applied. */
export const migrateCommand: CliCommand = {
  words: ['migrate'],
  summary: 'apply pending database migrations (every command does this first)',
  async run() {},
};

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

function helpText(commands: readonly CliCommand[]): string {
  const lines = ['Usage: npm run cli -- <command> [arguments]', '', 'Commands:'];
  for (const command of commands) {
    lines.push(`  ${usageOf(command)}`, `      ${command.summary}`);
    for (const [name, o] of Object.entries(command.options ?? {}))
      lines.push(`      --${name}: ${o.description}`);
  }
  lines.push('  help', '      this text', '', 'Exit status: 0 ok, 1 failure, 2 usage error.');
  return lines.join('\n');
}

/** The longest command whose words start the argument list. */
function findCommand(commands: readonly CliCommand[], argv: readonly string[]): CliCommand | undefined {
  let best: CliCommand | undefined;
  for (const command of commands) {
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
  const options: Record<string, { type: CliOption['type']; multiple?: boolean }> = {};
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

function stdinReader(stdin: CliIo['stdin']) {
  const refuseTerminal = (what: string): void => {
    if (stdin.isTTY === true) {
      throw new UsageError(`expected ${what} on stdin (pipe it in), or see help for the options`);
    }
  };
  return {
    async readStdin(what: string): Promise<string> {
      refuseTerminal(what);
      const chunks: Buffer[] = [];
      for await (const chunk of stdin) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    },
    stdinStream(what: string): AsyncIterable<Buffer> {
      refuseTerminal(what);
      return stdin as AsyncIterable<Buffer>;
    },
  };
}

/** The operating-system account behind the command (the sudo caller when run through sudo). */
function actorOf(env: CliIo['env']): CliActor {
  let username = env.SUDO_USER;
  if (username === undefined || username === '') {
    try {
      username = userInfo().username;
    } catch {
      username = env.USER ?? 'unknown';
    }
  }
  return { username: username.slice(0, 64), invocationId: `cli-${randomUUID()}` };
}

/** Runs one command line from `commands`; returns the exit status. */
export async function runCommandLine(
  commands: readonly CliCommand[],
  argv: readonly string[],
  io: CliIo,
): Promise<number> {
  const out = (line: string) => void io.stdout.write(`${line}\n`);
  const err = (line: string) => void io.stderr.write(`${line}\n`);
  if (argv.length === 0 || argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h') {
    (argv.length === 0 ? err : out)(helpText(commands));
    return argv.length === 0 ? EXIT_USAGE : EXIT_OK;
  }
  const command = findCommand(commands, argv);
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
    config = loadConfig(io.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      err(error.message);
      return EXIT_USAGE;
    }
    throw error;
  }
  let booted;
  try {
    booted = await bootstrap(config, { isReportOnly: command.isDatabaseReport === true });
  } catch (error) {
    if (error instanceof StartupError) {
      err(error.message);
      return EXIT_USAGE;
    }
    err(`Cannot open the database: ${oneLine(error)}`);
    return EXIT_FAILURE;
  }
  if (command.ownSchemaOnly !== undefined && booted.database.schema.name !== 'own') {
    err(command.ownSchemaOnly);
    await booted.database.close().catch(() => {});
    return EXIT_USAGE;
  }
  try {
    if (booted.migrations.applied.length > 0)
      err(`Applied migrations: ${booted.migrations.applied.join(', ')}`);
    else if (command === migrateCommand) out('Database is up to date');
    const context: CliContext = {
      ...parsed,
      config,
      database: booted.database,
      files: booted.files,
      actor: actorOf(io.env),
      stdout: io.stdout,
      out,
      err,
      ...stdinReader(io.stdin),
      progress: createProgressFactory(io.stderr, {
        plainIntervalMs: io.progressIntervalMs ?? DEFAULT_PLAIN_INTERVAL_MS,
      }),
    };
    const status = await command.run(context);
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
    // The database went away, or refuses a privilege the command needs: the set-up's one line, exit 2.
    const setupError = asStartupError(error);
    if (setupError instanceof StartupError) {
      err(setupError.message);
      return EXIT_USAGE;
    }
    err(`Failed: ${oneLine(error)}`);
    return EXIT_FAILURE;
  } finally {
    // A pool whose server is gone may fail to close as well: the command's own outcome is what counts.
    await booted.database.close().catch(() => {});
  }
}

/** The first line of an error's message (driver errors can carry the SQL or a trace after it). */
function oneLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!;
}
