import type { FastifyPluginAsync } from 'fastify';
import type { ModuleOptions } from '../../http/module.ts';

// TODO(#3): the routes of this module.
export const patientRoutes: FastifyPluginAsync<ModuleOptions> = async () => {};
