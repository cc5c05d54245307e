/** CLI commands of the audit module: `audit export --since T [--until T] [--file F]` (JSON lines). */
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import type { CliCommand, CliContext } from '../../cli/cli-types.ts';
import { writeDurably } from '../../files/durable-file.ts';
import { UsageError } from '../../cli/cli-types.ts';
import { formatSeconds } from '../../cli/progress.ts';
import { countAuditRange, exportAuditEvents, parseIsoDateTime } from './audit-export.ts';

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
    const started = performance.now();
    const progress = ctx.progress({
      label: 'Exporting audit rows',
      unit: 'rows',
      total: await countAuditRange(ctx.database.db, range),
    });
    const exportTo = (stream: Writable) =>
      exportAuditEvents(ctx.database.db, range, async (line) => {
        await writeTo(stream, line);
        progress.increment();
      });
    const took = () => formatSeconds((performance.now() - started) / 1000);
    if (typeof file !== 'string') {
      let count: number;
      try {
        count = await exportTo(ctx.stdout);
      } finally {
        progress.stop();
      }
      ctx.err(`Exported ${count} audit rows in ${took()}`);
      return;
    }
    // The durable writer: a failed export never leaves a truncated file that looks complete.
    let count: number;
    try {
      count = await writeDurably(file, (write) =>
        exportAuditEvents(ctx.database.db, range, async (line) => {
          await write(`${line}\n`);
          progress.increment();
        }),
      );
    } finally {
      progress.stop();
    }
    ctx.out(`Exported ${count} audit rows to ${file} in ${took()}`);
  },
};

export const auditCommands: readonly CliCommand[] = [exportCommand];
