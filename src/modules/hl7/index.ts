/**
 * The hl7 module: the PAS's HL7 v2 ADT and SIU feeds over MLLP (`HL7_PORT`), mapped through the site's
 * field map to PASAPI's patient, merge and appointment changes, the log of what each message got
 * (`hl7_message`, which the console lists, an AE corrected and applied again), and the query that asks
 * the PAS for a patient the database lacks (`PAS_QUERY_HOST`). Owns `hl7_message`. Other modules import
 * it only through this file.
 */
import type { Hl7Applier, Hl7ApplierDeps } from './apply-message.ts';
import type { ReapplyInput, ReapplyOutcome } from './reapply-message.ts';
import type { Hl7Server, Hl7ServerDeps } from './mllp-server.ts';
import type { PasQuery, PasQueryDeps } from './pas-query.ts';

export type { Hl7Server, Hl7ServerDeps } from './mllp-server.ts';
export type { Hl7Answer, Hl7Applier, Hl7ApplierDeps, Hl7Source } from './apply-message.ts';
export type { AckCode, AckContent } from './hl7-text.ts';
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

/**
 * The listener's per-message path without a socket (checks, change, `hl7_message`, audit row, ACK),
 * for a message applied by an operator (`pas replay`, the console's re-apply): loaded on first use,
 * as the listener is.
 */
export async function createHl7Applier(deps: Hl7ApplierDeps): Promise<Hl7Applier> {
  const { createHl7Applier: create } = await import('./apply-message.ts');
  return create(deps);
}

export type {
  LoggedMessageDetail,
  LoggedMessageRow,
  MessageLogKey,
  MessageLogPage,
} from './message-log.queries.ts';
export { listLoggedMessages, messageTextVersion, readLoggedMessage } from './message-log.queries.ts';
export type { ReapplyInput, ReapplyOutcome } from './reapply-message.ts';

/**
 * Applies an operator's correction of a message answered AE (the console): loaded on first use, as the
 * listener is.
 */
export async function createHl7Reapplier(
  deps: Hl7ApplierDeps,
): Promise<(input: ReapplyInput) => Promise<ReapplyOutcome>> {
  const { createReapplier } = await import('./reapply-message.ts');
  return createReapplier(deps);
}
