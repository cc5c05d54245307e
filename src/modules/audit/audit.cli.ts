/** CLI commands of the audit module: `audit export --since T [--until T] [--file F]` (JSON lines). */
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { rename } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import type { CliCommand, CliContext } from '../../main/cli-types.ts';
import { UsageError } from '../../main/cli-types.ts';
import { exportAuditEvents, parseIsoDateTime } from './audit-export.ts';

function timeOption(ctx: CliContext, name: string): Date | undefined {
  const raw = ctx.options[name];
  if (raw === undefined) return undefined;
  const date = typeof raw === 'string' ? parseIsoDateTime(raw) : undefined;
  if (date === undefined) {
    throw new UsageError(
      `--${name} must be an ISO 8601 date or date-time (2026-11-22, 2026-11-22T03:00:00Z), got "${String(raw)}"`,
    );
  }
  return date;
}

async function writeTo(stream: Writable, line: string): Promise<void> {
  if (!stream.write(`${line}\n`)) await once(stream, 'drain');
}

const exportCommand: CliCommand = {
  words: ['audit', 'export'],
  options: {
    since: {
      type: 'string',
      valueName: 'T',
      isRequired: true,
      description: 'first time included (ISO 8601, UTC unless an offset is given)',
    },
    until: { type: 'string', valueName: 'T', description: 'first time excluded (default: no end)' },
    file: { type: 'string', valueName: 'F', description: 'write to F (created 0600) instead of stdout' },
  },
  summary: 'export the audit trail as JSON lines, one row per line, oldest first',
  async run(ctx) {
    const since = timeOption(ctx, 'since')!;
    const until = timeOption(ctx, 'until');
    if (until !== undefined && until.getTime() <= since.getTime())
      throw new UsageError('--until must be later than --since');
    const range = until === undefined ? { since } : { since, until };
    const file = ctx.options.file;
    if (typeof file !== 'string') {
      const count = await exportAuditEvents(ctx.database.db, range, (line) => writeTo(process.stdout, line));
      ctx.err(`Exported ${count} audit rows`);
      return;
    }
    // Written beside the target and renamed at the end: a failed export never leaves a truncated file
    // that looks complete.
    const partial = `${file}.partial`;
    const stream = createWriteStream(partial, { mode: 0o600 });
    let count: number;
    try {
      count = await exportAuditEvents(ctx.database.db, range, (line) => writeTo(stream, line));
      stream.end();
      await once(stream, 'finish');
    } catch (error) {
      stream.destroy();
      throw error;
    }
    await rename(partial, file);
    ctx.out(`Exported ${count} audit rows to ${file}`);
  },
};

export const auditCommands: readonly CliCommand[] = [exportCommand];
