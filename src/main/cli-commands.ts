/**
 * The CLI's command table. A module plugs in its commands with one line here; `npm run cli` and the tests
 * run command lines against this table (`cli-runner.ts`).
 */
import type { CliCommand } from '../cli/cli-types.ts';
import { auditCommands } from '../modules/audit/index.ts';
import { datasetCommands } from '../modules/dataset/index.ts';
import { queueCommands } from '../modules/request-queue/index.ts';
import { userCommands } from '../modules/user/index.ts';
import { migrateCommand } from './cli-runner.ts';
import { openEyesCommands } from './openeyes-commands.ts';

export const CLI_COMMANDS: readonly CliCommand[] = [
  migrateCommand,
  ...userCommands,
  ...datasetCommands,
  ...queueCommands,
  ...auditCommands,
  ...openEyesCommands,
];
