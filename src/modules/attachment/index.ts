import type { FastifyPluginAsync } from 'fastify';
import type { ModuleOptions } from '../../http/module.ts';

// TODO(#5): the routes of this module.
export const attachmentRoutes: FastifyPluginAsync<ModuleOptions> = async () => {};
