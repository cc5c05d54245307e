/**
 * The shape of a CLI command. A module offers commands by exporting `CliCommand` values from its `*.cli.ts`
 * file (for example `datasetCommands` from `src/modules/dataset/dataset.cli.ts`, not from the module's
 * index); `src/main/cli-commands.ts` lists them in the command table, one line per module. The runner
 * (`src/main/cli-runner.ts`) parses arguments from the definition, bootstraps the database (migrated),
 * runs the command and closes everything. This folder sits below the modules: it imports nothing from
 * them or from `src/main/`.
 */
import type { Writable } from 'node:stream';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { FileStore } from '../files/file-store.ts';
import type { ProgressOptions, ProgressReporter } from './progress.ts';

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

/** Who runs the CLI, for the audit trail: the operating-system account (the one behind sudo if any). */
export interface CliActor {
  readonly username: string;
  /** One id per command line, shared by the audit rows it writes. */
  readonly invocationId: string;
}

export interface CliContext {
  /** Positional arguments after the command words, as declared in `arguments`. */
  readonly args: readonly string[];
  readonly options: Readonly<Record<string, CliOptionValue>>;
  readonly config: Config;
  readonly database: Database;
  readonly files: FileStore;
  readonly actor: CliActor;
  /** Standard output as a stream, for commands that write data (JSON lines) rather than lines of text. */
  readonly stdout: Writable;
  /** Writes a line to stdout. */
  out(line: string): void;
  /** Writes a line to stderr (progress, warnings). */
  err(line: string): void;
  /** All of stdin as text; refuses (UsageError) when stdin is a terminal. */
  readStdin(what: string): Promise<string>;
  /** Stdin as a byte stream; refuses (UsageError) when stdin is a terminal. */
  stdinStream(what: string): AsyncIterable<Buffer>;
  /**
   * Progress of long work on stderr: a bar with rate and ETA on a terminal, a short line every few
   * seconds otherwise. The command prints its own summary line when done.
   */
  progress(options: ProgressOptions): ProgressReporter;
}

export interface CliCommand {
  /** The words that select the command, for example `['queue', 'list']`. */
  readonly words: readonly string[];
  readonly arguments?: readonly CliArgument[];
  readonly options?: Readonly<Record<string, CliOption>>;
  /** One line for `help`. */
  readonly summary: string;
  /**
   * The command works on the service's own schema only: on an OpenEyes database it refuses, printing
   * this reason (for example: OpenEyes manages its users), with exit status 2.
   */
  readonly ownSchemaOnly?: string;
  /**
   * The command reports on the database itself: the database is opened as it is (not migrated, not
   * checked), and an OpenEyes database's problems do not stop the command.
   */
  readonly isDatabaseReport?: boolean;
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
