/**
 * The hl7 module: the PAS's HL7 v2 ADT and SIU feeds over MLLP (`HL7_PORT`), mapped through the site's
 * field map to PASAPI's patient, merge and appointment changes, and the query that asks the PAS for a
 * patient the database lacks (`PAS_QUERY_HOST`). Owns `hl7_message`. Other modules import it only
 * through this file.
 */
import type { Hl7Server, Hl7ServerDeps } from './mllp-server.ts';
import type { PasQuery, PasQueryDeps } from './pas-query.ts';

export type { Hl7Server, Hl7ServerDeps } from './mllp-server.ts';
export type { Hl7FieldMap } from '../../site-files/hl7-field-map.ts';

/**
 * Starts the MLLP listener on `HL7_PORT`. Its code (and the HL7 library) is loaded here, so that a
 * server without `HL7_PORT` does not hold it.
 */
export async function startHl7Server(deps: Hl7ServerDeps): Promise<Hl7Server> {
  const { startHl7Server: start } = await import('./mllp-server.ts');
  return start(deps);
}

export type { PasQuery, PasQueryDeps } from './pas-query.ts';

/**
 * The client that asks the PAS (QBP^Q22 over MLLP) for a patient no local patient is found for;
 * undefined when `PAS_QUERY_HOST` is not set, in which case the HL7 library is not loaded for it.
 */
export async function createPasQuery(deps: PasQueryDeps): Promise<PasQuery | undefined> {
  if (deps.config.pasQuery.host === undefined) return undefined;
  const { createPasQuery: create } = await import('./pas-query.ts');
  return create(deps);
}
