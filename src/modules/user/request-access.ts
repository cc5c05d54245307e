/**
 * Who may read what a request holds beyond its id (its status with the routines' logs, its parts not yet
 * filed under an event, an upload filed under none): the user who submitted it and request admins. The
 * routes answer anyone else as they answer an unknown id, so that sequential ids reveal nothing.
 */
import type { Principal } from './authenticator.ts';

/** The RBAC operation of request admins (OpenEyes's role `Edit Payload Processor` holds it). */
export const REQUEST_ADMIN_OPERATION = 'OprnEditRequestData';

/** The caller of a read of a request's own data. */
export interface RequestReader {
  readonly userId: number;
  /** Holds {@link REQUEST_ADMIN_OPERATION}. */
  readonly isRequestAdmin: boolean;
}

/** The request reader a signed-in principal is. */
export function requestReaderOf(principal: Pick<Principal, 'userId' | 'authItems'>): RequestReader {
  return { userId: principal.userId, isRequestAdmin: principal.authItems.has(REQUEST_ADMIN_OPERATION) };
}

/** Whether `reader` may read the data of a request submitted by user `submitterUserId`. */
export function mayReadRequest(reader: RequestReader, submitterUserId: number): boolean {
  return reader.isRequestAdmin || reader.userId === submitterUserId;
}
