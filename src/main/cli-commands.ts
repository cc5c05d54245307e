/**
 * The CLI's command table. A module plugs in its commands with one line here, imported from the module's
 * `*.cli.ts` file: a module's index does not export its CLI commands, so that the app, which imports the
 * indexes, never loads the CLI (and its imports of other modules). `npm run cli` and the tests run command
 * lines against this table (`cli-runner.ts`).
 */
import type { CliCommand } from '../cli/cli-types.ts';
import { auditCommands } from '../modules/audit/audit.cli.ts';
import { datasetCommands } from '../modules/dataset/dataset.cli.ts';
import { dicomReceiveCommands } from '../modules/dicom-receive/dicom.cli.ts';
import { pasCommands } from '../modules/hl7/pas.cli.ts';
import { queueCommands } from '../modules/request-queue/admin/queue.cli.ts';
import { userCommands } from '../modules/user/user.cli.ts';
import { migrateCommand } from './cli-runner.ts';
import { openEyesCommands } from './openeyes-commands.ts';

export const CLI_COMMANDS: readonly CliCommand[] = [
  migrateCommand,
  ...userCommands,
  ...datasetCommands,
  ...queueCommands,
  ...auditCommands,
  ...dicomReceiveCommands,
  ...pasCommands,
  ...openEyesCommands,
];
