/** CLI commands of the dicom-receive module: `dicom reindex [--batch N]`. */
import type { CliCommand } from '../../cli/cli-types.ts';
import { UsageError } from '../../cli/cli-types.ts';
import { closeDicomPools } from '../dicom/index.ts';
import { countUnindexed, reindexInstances } from './reindex.ts';

const reindexCommand: CliCommand = {
  words: ['dicom', 'reindex'],
  options: {
    batch: {
      type: 'string',
      valueName: 'N',
      description: 'receipts read per batch (default 200, 1 to 10000)',
    },
  },
  summary:
    'index for query/retrieve the received instances that dicom_instance_index lacks (received before it existed)',
  async run(ctx) {
    const raw = ctx.options.batch;
    const batchSize = raw === undefined ? 200 : Number(raw);
    if (typeof raw === 'boolean' || !Number.isInteger(batchSize) || batchSize < 1 || batchSize > 10_000)
      throw new UsageError(`--batch must be a whole number from 1 to 10000, got "${String(raw)}"`);
    const progress = ctx.progress({
      label: 'Indexing received instances',
      unit: 'instances',
      total: await countUnindexed(ctx.database.db),
    });
    try {
      const counts = await reindexInstances(ctx.database, ctx.config, {
        batchSize,
        onInstance: () => progress.increment(),
      });
      progress.stop();
      ctx.out(
        `Indexed ${counts.indexed} instance(s); left out ${counts.dropped} whose bytes were dropped and ${counts.unreadable} that no longer read`,
      );
      return 0;
    } finally {
      await closeDicomPools();
    }
  },
};

export const dicomReceiveCommands: readonly CliCommand[] = [reindexCommand];
