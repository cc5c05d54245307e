import type { FastifyPluginAsync } from 'fastify';
import type { ModuleOptions } from '../../http/module.ts';

// TODO(#4): the routes of this module.
export const signatureRoutes: FastifyPluginAsync<ModuleOptions> = async () => {};
