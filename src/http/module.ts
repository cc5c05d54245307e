import type { AppDeps } from '../deps.ts';
import type { BasicAuthGuard } from './basic-auth.ts';

/** What `buildApp` hands every module's route plugin. */
export interface ModuleOptions {
  readonly deps: AppDeps;
  /** The one Basic-auth guard of this app: `preHandler: basicAuth({ operation: 'OprnApi' })`. */
  readonly basicAuth: BasicAuthGuard;
}
