/**
 * The command-line process (`npm run cli -- <command>`): runs one command line of the command table
 * (`cli-commands.ts`) with this process's environment and standard streams; see `cli-runner.ts` for what
 * a run does. Exit status: 0 ok, 1 failure, 2 usage error.
 */
import { CLI_COMMANDS } from './cli-commands.ts';
import { runCommandLine } from './cli-runner.ts';

process.exitCode = await runCommandLine(CLI_COMMANDS, process.argv.slice(2), {
  env: process.env,
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
});
