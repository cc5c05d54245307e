import type { AppDeps } from '../deps.ts';
import type { BasicAuthGuard } from './basic-auth.ts';
import type { UploadMemory } from './upload-spool.ts';

/** What `buildApp` hands every module's route plugin. */
export interface ModuleOptions {
  readonly deps: AppDeps;
  /** The one Basic-auth guard of this app: `preHandler: basicAuth({ operation: 'OprnApi' })`. */
  readonly basicAuth: BasicAuthGuard;
  /** The app's budget of spooled upload bytes loaded into memory at once (upload-spool.ts). */
  readonly uploadMemory: UploadMemory;
}
