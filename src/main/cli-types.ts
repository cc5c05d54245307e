/**
 * The shape of a CLI command. A module offers commands by exporting `CliCommand` values (for example
 * `datasetCommands` from `src/modules/dataset/index.ts`); `src/main/cli.ts` lists them in its command
 * table, one line per module. The CLI parses arguments from the definition, bootstraps the database
 * (migrated), runs the command and closes everything.
 */
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { FileStore } from '../files/file-store.ts';

export interface CliOption {
  readonly type: 'string' | 'boolean';
  /** May be given several times (`--role A --role B`); the value is then a string array. */
  readonly multiple?: boolean;
  /** Placeholder in the usage line, for example `N`. */
  readonly valueName?: string;
  /** The command refuses to run without it (usage error). */
  readonly isRequired?: boolean;
  readonly description: string;
}

export interface CliArgument {
  readonly name: string;
  readonly isOptional?: boolean;
}

export type CliOptionValue = string | boolean | readonly string[] | undefined;

export interface CliContext {
  /** Positional arguments after the command words, as declared in `arguments`. */
  readonly args: readonly string[];
  readonly options: Readonly<Record<string, CliOptionValue>>;
  readonly config: Config;
  readonly database: Database;
  readonly files: FileStore;
  /** Writes a line to stdout. */
  out(line: string): void;
  /** Writes a line to stderr (progress, warnings). */
  err(line: string): void;
  /** All of stdin as text; refuses (UsageError) when stdin is a terminal. */
  readStdin(what: string): Promise<string>;
}

export interface CliCommand {
  /** The words that select the command, for example `['queue', 'list']`. */
  readonly words: readonly string[];
  readonly arguments?: readonly CliArgument[];
  readonly options?: Readonly<Record<string, CliOption>>;
  /** One line for `help`. */
  readonly summary: string;
  /** Returns the exit status (0 when nothing is returned). Throw `UsageError` for bad arguments. */
  run(context: CliContext): Promise<number | void>;
}

/** Bad command-line input: the CLI prints the message and the command's usage, and exits with 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
