/**
 * Upload bodies that never sit whole in memory while they arrive (`files/spool.ts`), and a bound on the
 * upload bytes held in memory at once.
 *
 * Processing: the checks and the database write need the bytes in one Buffer (the drivers bind a Buffer;
 * and the binding copies it once more), so a request loads its spooled bytes only after reserving twice
 * their size from the process's {@link UploadMemory}; others wait their turn (FIFO). A body larger than the
 * whole budget runs alone. Server memory for uploads is thus about the budget, whatever the number or size
 * of the uploads in flight.
 * Each request's spooled files are removed once it is answered or aborted.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { SpooledBytes } from '../files/spool.ts';

/** The process's budget of upload bytes held in memory for processing. */
export interface UploadMemory {
  /**
   * Waits until `bytes` fit in the budget (a request larger than the budget waits until nothing else is
   * held, then runs alone) and reserves them; resolves to the function that gives them back.
   */
  reserve(bytes: number): Promise<() => void>;
  /** Bytes reserved now (a metric). */
  readonly reservedBytes: number;
}

export function createUploadMemory(budgetBytes: number): UploadMemory {
  let reserved = 0;
  const waiting: { bytes: number; grant: () => void }[] = [];
  const fits = (bytes: number) => reserved === 0 || reserved + bytes <= budgetBytes;
  const admit = () => {
    while (waiting.length > 0 && fits(waiting[0]!.bytes)) {
      const next = waiting.shift()!;
      reserved += next.bytes;
      next.grant();
    }
  };
  return {
    reserve(bytes) {
      const release = () => {
        let isReleased = false;
        return () => {
          if (isReleased) return;
          isReleased = true;
          reserved -= bytes;
          admit();
        };
      };
      if (waiting.length === 0 && fits(bytes)) {
        reserved += bytes;
        return Promise.resolve(release());
      }
      return new Promise((resolve) => waiting.push({ bytes, grant: () => resolve(release()) }));
    },
    get reservedBytes() {
      return reserved;
    },
  };
}

/**
 * Loads spooled bytes into memory under the budget: resolves to the Buffers (in order) and the function
 * that releases the reservation. Bytes already in memory reserve nothing.
 */
export async function loadSpooled(
  memory: UploadMemory,
  spooled: readonly SpooledBytes[],
): Promise<{ buffers: Buffer[]; release: () => void }> {
  const onDisk = spooled.filter((s) => s.isOnDisk).reduce((sum, s) => sum + s.sizeBytes, 0);
  const release = onDisk === 0 ? () => {} : await memory.reserve(2 * onDisk);
  try {
    return { buffers: await Promise.all(spooled.map((s) => s.load())), release };
  } catch (error) {
    release();
    throw error;
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The process's budget of upload bytes in memory, shared by every intake path. */
    uploadMemory: UploadMemory;
  }
  interface FastifyRequest {
    /** Spooled bodies and parts of this request, removed once it is answered or aborted. */
    spools?: SpooledBytes[];
  }
}

/** Keeps `spooled` with `request`, to be removed when it ends (whatever the outcome). */
export function holdSpool(request: FastifyRequest, spooled: SpooledBytes): SpooledBytes {
  (request.spools ??= []).push(spooled);
  return spooled;
}

/** Removes every request's spooled files once it is answered or aborted. */
export function installSpoolCleanup(app: FastifyInstance): void {
  const cleanUp = async (request: FastifyRequest) => {
    const spools = request.spools;
    if (spools === undefined) return;
    request.spools = undefined;
    await Promise.all(spools.map((s) => s.dispose().catch(() => {})));
  };
  app.addHook('onResponse', cleanUp);
  app.addHook('onRequestAbort', cleanUp);
}
