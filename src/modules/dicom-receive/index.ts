/**
 * The dicom-receive module: DICOM from real senders becomes queued `dicom_request`s, through DICOMweb
 * STOW-RS (`POST /api/v1/dicomweb/studies[/{uid}]`) and a DIMSE C-STORE SCP (`DICOM_PORT`), both through
 * queue intake. Owns `dicom_received_instance`. Other modules import it only through this file.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { StowRouteOptions } from './stow.routes.ts';
import { registerStowRoutes } from './stow.routes.ts';

export const dicomWebRoutes: FastifyPluginAsync<StowRouteOptions> = async (app, options) => {
  await registerStowRoutes(app, options);
};

export type { DicomServer } from './dimse-server.ts';
export { startDicomServer } from './dimse-server.ts';
export { registerDicomReceiveMetrics } from './dicom-metrics.ts';
