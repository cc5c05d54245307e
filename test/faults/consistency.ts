/**
 * Helpers of the fault tests: the real server as a child process, and a consistency check of the rows
 * and files that signature import and queue intake write.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import type { Kysely } from 'kysely';
import type { DB } from '../../src/db/schema.ts';
import { until } from '../until.ts';

const SERVER = new URL('../../src/main/server.ts', import.meta.url).pathname;

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly baseUrl: string;
  output(): string;
}

/** Starts `src/main/server.ts` and resolves once it listens on a free port of 127.0.0.1. */
export async function startServerProcess(env: Record<string, string>): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', SERVER], {
    env: { ...process.env, ...env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  let port: string | undefined;
  try {
    await until(
      () => {
        const match = /listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(output);
        if (match !== null && /ready/.test(output.slice(match.index))) port = match[1];
        else if (child.exitCode !== null) throw new Error('the server exited');
        return port !== undefined;
      },
      { timeoutMs: 30_000, intervalMs: 20 },
    );
  } catch {
    child.kill('SIGKILL');
    throw new Error(`server did not start:\n${output}`);
  }
  return { child, baseUrl: `http://127.0.0.1:${port!}`, output: () => output };
}

/** Every regular file under `root`, as paths relative to it. */
export async function filesOnDisk(root: string): Promise<string[]> {
  try {
    const entries = await readdir(root, { recursive: true, withFileTypes: true });
    return entries
      .filter((e) => e.isFile())
      .map((e) => path.relative(root, path.join(e.parentPath, e.name)))
      .sort();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

export interface Consistency {
  /** Broken invariants: must be empty after any fault. */
  readonly problems: string[];
  /** Files on disk that no protected_file row names (a kill between write and commit leaves these). */
  readonly orphanFiles: string[];
}

/**
 * Checks the invariants of the protected file store and the rows around it:
 * every protected_file row has its file; every ophcocvi_signature has its protected_file, its file and a
 * status-4 log naming it; every status-4 log names stored files; every request has a routine and its
 * REQUEST_DATA attachment row. Files without a row are reported apart as orphans.
 */
export async function checkConsistency(db: Kysely<DB>, filesDir: string): Promise<Consistency> {
  const problems: string[] = [];
  const onDisk = new Set(await filesOnDisk(filesDir));
  const fileRows = await db.selectFrom('protected_file').select(['id', 'uid']).execute();
  const pathOf = (uid: string) => path.join(uid[0]!, uid[1]!, uid[2]!, uid);
  const pathById = new Map(fileRows.map((row) => [row.id, pathOf(row.uid)]));
  for (const row of fileRows)
    if (!onDisk.has(pathOf(row.uid))) problems.push(`protected_file ${row.id} has no file`);

  const successLogs = await db
    .selectFrom('signature_import_log')
    .select(['id', 'filename', 'cropped_file_id'])
    .where('status_id', '=', 4)
    .execute();
  const loggedSignatureFiles = new Set(successLogs.map((log) => log.cropped_file_id));
  for (const log of successLogs) {
    if (log.cropped_file_id === null || !pathById.has(log.cropped_file_id))
      problems.push(`status-4 log ${log.id} names no stored signature file`);
    if (!onDisk.has(log.filename) || !fileRows.some((row) => pathOf(row.uid) === log.filename))
      problems.push(`status-4 log ${log.id} names no stored original`);
  }
  const signatures = await db.selectFrom('ophcocvi_signature').select(['id', 'signature_file_id']).execute();
  for (const signature of signatures) {
    const file = signature.signature_file_id === null ? undefined : pathById.get(signature.signature_file_id);
    if (file === undefined || !onDisk.has(file)) problems.push(`signature ${signature.id} has no file`);
    if (!loggedSignatureFiles.has(signature.signature_file_id))
      problems.push(`signature ${signature.id} has no status-4 log`);
  }

  const requests = await db
    .selectFrom('request')
    .select((eb) => [
      'request.id',
      eb
        .selectFrom('request_routine')
        .select((e) => e.fn.countAll<number>().as('n'))
        .whereRef('request_routine.request_id', '=', 'request.id')
        .as('routines'),
      eb
        .selectFrom('attachment_data')
        .select((e) => e.fn.countAll<number>().as('n'))
        .whereRef('attachment_data.request_id', '=', 'request.id')
        .where('attachment_data.attachment_mnemonic', '=', 'REQUEST_DATA')
        .as('requestData'),
    ])
    .execute();
  for (const request of requests) {
    if (Number(request.routines) < 1) problems.push(`request ${request.id} has no routine`);
    if (Number(request.requestData) !== 1) problems.push(`request ${request.id} has no REQUEST_DATA row`);
  }

  const named = new Set(fileRows.map((row) => pathOf(row.uid)));
  const orphanFiles = [...onDisk].filter((file) => !named.has(file));
  return { problems, orphanFiles };
}
