import type { FastifyPluginAsync } from 'fastify';
import type { ModuleOptions } from '../../http/module.ts';

// TODO(#6): the routes of this module.
export const requestQueueRoutes: FastifyPluginAsync<ModuleOptions> = async () => {};
