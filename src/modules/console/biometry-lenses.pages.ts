/**
 * The biometry lenses held for review: lens types a device file named that the lens list lacked, created
 * inactive and offered to no clinician (`BIOMETRY_OFFER_NEW_LENSES` off). A request admin sees them here
 * with the request that brought each; names are device text and are shown escaped, as every value.
 */
import type { FastifyInstance } from 'fastify';
import { listHeldLenses } from '../biometry/index.ts';
import type { ConsoleContext } from './console-context.ts';
import { OPERATIONS } from './console-context.ts';
import type { ConsoleGuard } from './console-guard.ts';

/** Lens types the page lists at most (the newest). */
const PAGE_SIZE = 200;

export function registerBiometryLensPages(
  app: FastifyInstance,
  ctx: ConsoleContext,
  guard: ConsoleGuard,
): void {
  app.get(
    '/biometry-lenses',
    { preHandler: guard(OPERATIONS.queue), config: { consoleAction: 'console.biometry.lenses' } },
    async (request, reply) => {
      const { lenses, total } = await listHeldLenses(ctx.deps.database.db, { limit: PAGE_SIZE });
      return ctx.render(request, reply, 'biometry-lenses', {
        title: 'Biometry lenses held for review',
        nav: 'biometry-lenses',
        lenses,
        total,
      });
    },
  );
}
