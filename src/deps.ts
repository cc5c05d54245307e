/**
 * What the HTTP app and the worker are built from. Created once per process by a composition root in
 * `src/main/`, and by the test harness.
 */
import type { Config } from './config.ts';
import type { Database } from './db/database.ts';
import type { FileStore } from './files/file-store.ts';
import type { Authenticator } from './authenticator.ts';

export interface AppDeps {
  readonly config: Config;
  readonly database: Database;
  readonly files: FileStore;
  readonly authenticator: Authenticator;
}
