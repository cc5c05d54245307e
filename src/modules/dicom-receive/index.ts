/**
 * The dicom-receive module: DICOM from real senders becomes queued `dicom_request`s, through DICOMweb
 * STOW-RS (`POST /api/v1/dicomweb/studies[/{uid}]`) and a DIMSE C-STORE SCP (`DICOM_PORT`), both through
 * queue intake; what it kept is searched and retrieved with DICOMweb QIDO-RS and WADO-RS (`GET` on
 * `/api/v1/dicomweb/...`) and the DIMSE C-FIND SCP. Owns `dicom_received_instance` and
 * `dicom_instance_index`. Other modules import it only through this file.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { DicomServer, DicomServerDeps } from './dimse-server.ts';
import type { StowRouteOptions } from './stow.routes.ts';
import { registerStowRoutes } from './stow.routes.ts';
import { registerDicomWebRoutes } from './dicomweb.routes.ts';

export const dicomWebRoutes: FastifyPluginAsync<StowRouteOptions> = async (app, options) => {
  await registerStowRoutes(app, options);
  await registerDicomWebRoutes(app, options);
};

export type { DicomServer } from './dimse-server.ts';

/**
 * Starts the DIMSE C-STORE SCP on `DICOM_PORT`. Its code (and dcmjs-dimse) is loaded here, so that a
 * server without `DICOM_PORT` does not hold it.
 */
export async function startDicomServer(deps: DicomServerDeps): Promise<DicomServer> {
  const { startDicomServer: start } = await import('./dimse-server.ts');
  return start(deps);
}
export { registerDicomReceiveMetrics } from './dicom-metrics.ts';
