/**
 * One HL7 v2 message, from its parse to its acknowledgement, with no socket: the checks that refuse it
 * (AR), its ADT or SIU change applied through PASAPI's code, its `hl7_message` row and its audit row, and
 * the acknowledgement's content. The MLLP listener (`mllp-server.ts`) frames and gates the network and
 * sends what this answers; `pas replay` (`pas.cli.ts`) applies a file's messages through the same path.
 *
 * - Refused with AR (nothing read further, nothing written): a frame that is not HL7, a malformed MSH, a
 *   sender not in `HL7_ALLOWED_SENDERS` (MSH-3, MSH-4 and the peer address; not checked for an
 *   operator's action), a character set other than ASCII, 8859/1 and UNICODE UTF-8 (MSH-18; bytes not of
 *   the declared set), a processing id other than P, a version other than 2.x, a message type other
 *   than the ADT and SIU events handled.
 * - ADT patient events and A34/A40 apply PASAPI's patient change and merge; SIU S12-S14 its appointment
 *   PUT for the patient holding PID-3's local number, S15 and S17 its appointment DELETE.
 * - A message control id (MSH-10) a sender (MSH-3^MSH-4) sent before is answered with the first answer,
 *   not applied again (`hl7_message`).
 * - AA only once the change, its `hl7_message` row and its audit row are committed; AE with the reason
 *   for a message that cannot be applied (an unknown patient, an impossible date; PASAPI's 4xx), also
 *   recorded, with the message's text (for the console to correct); a failure of the service itself (the database down) answers AE without recording it, so
 *   that the PAS's retry applies the message.
 * - An operator's correction of such an AE (`Hl7Source.replaces`, the console) must keep its sender and
 *   control id; applied, its answer replaces the AE's row in the change's transaction; still refused,
 *   nothing is written.
 * - Logs: sender, event, control id, answer code; never a field of the message or a reason's text.
 */
import { Hl7Message } from '@medplum/core';
import type { Kysely, Transaction } from 'kysely';
import { sql } from 'kysely';
import { randomUUID } from 'node:crypto';
import { BlockList, isIPv6 } from 'node:net';
import type { Config, Hl7Sender } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { databaseErrorKind } from '../../errors.ts';
import type { Logger } from '../../logger.ts';
import type { AuditTrail } from '../audit/index.ts';
import type { ChangeActor } from '../pasapi/index.ts';
import {
  PasapiError,
  createPatientAppointments,
  createPatientChanges,
  createPasReferenceCache,
  createPatientMerges,
  findPatientByNumber,
  unknownIdentifierType,
} from '../pasapi/index.ts';
import type { AdtChange } from './adt-mapping.ts';
import { AdtMappingError, MERGE_EVENTS, PATIENT_EVENTS, mapAdtMessage } from './adt-mapping.ts';
import type { SiuChange } from './siu-mapping.ts';
import { BOOKING_EVENTS, CANCEL_EVENTS, mapSiuMessage } from './siu-mapping.ts';
import type { AckContent, Hl7Charset } from './hl7-text.ts';
import { ERROR_CODE, buildAck, charsetOf, decodeAs } from './hl7-text.ts';
import { findLoggedMessage, logMessage, replaceLoggedAnswer } from './message-log.queries.ts';

/** The account of the audit columns of rows the feed writes: OpenEyes's system user. */
const SYSTEM_ACTOR: ChangeActor = { userId: 1 };

export interface Hl7ApplierDeps {
  readonly database: Database;
  /** `config.hl7` (allowed senders, field map) and `config.timeZone`. */
  readonly config: Config;
  readonly logger: Logger;
  /** The process's audit trail: one row per message answered. */
  readonly auditTrail: AuditTrail;
}

/** Where a message comes from, for the allowed-senders check and its audit row. */
export interface Hl7Source {
  /** The peer's address (MLLP), or null for an operator's action without one. */
  readonly address: string | null;
  /**
   * An operator's action (a replayed backlog, a message re-applied from the console): the sender is not
   * checked against `HL7_ALLOWED_SENDERS`; MSH-3^MSH-4 stays the sender of the duplicate check.
   */
  readonly isOperator?: boolean;
  /** The acting account for the audit row (the CLI's operating-system account, the console's user). */
  readonly username?: string;
  readonly userId?: number | null;
  /** The audit row's request id; a new one per message by default. */
  readonly requestId?: string;
  /** An operator's correction of the AE of this `hl7_message` row (its sender, control id and kept text). */
  readonly replaces?: {
    readonly id: number;
    readonly sender: string;
    readonly controlId: string;
    readonly messageText: string;
  };
}

/** The AE row an operator's correction replaces changed (or was answered) meanwhile. */
class ReplacedMeanwhileError extends Error {}

/** What one message came to: its acknowledgement, and what the log and the audit say of it. */
export interface Hl7Answer {
  /** The acknowledgement's content, once the audit row is written (AE when it could not be). */
  readonly ack: AckContent;
  /** The character set of the acknowledgement's bytes (the message's MSH-18). */
  readonly charset: Hl7Charset;
  /** The message as read (in its character set), or undefined for one that is not HL7. */
  readonly message: Hl7Message | undefined;
  /** The audit action (`hl7.patient`, `hl7.merge`, `hl7.appointment`, ..., `hl7.refused`, `hl7.failed`). */
  readonly action: string;
  readonly httpStatus: number;
  readonly patientIds: readonly number[];
  /** The sender and control id answered before: the first answer again, nothing applied. */
  readonly isDuplicate: boolean;
  readonly requestId: string;
  /**
   * A failure of the service itself (the database down: `hl7.failed`, not recorded in `hl7_message`; or
   * its audit row not written): the message was answered AE; sent again, it is applied (or answered as a
   * duplicate when its change was committed).
   */
  readonly failure?: unknown;
}

export interface Hl7BatchOptions {
  /** Stop after the first message answered AE or AR: the ones before it and it hold, none after. */
  readonly stopOnError?: boolean;
}

export interface Hl7Applier {
  /** Applies one message parsed from its bytes read as Latin-1 (undefined: a frame that is not HL7). */
  apply(raw: Hl7Message | undefined, source: Hl7Source): Promise<Hl7Answer>;
  /** Applies one message from its bytes as sent, without MLLP framing (undefined: not HL7, AR). */
  applyBytes(bytes: Buffer | undefined, source: Hl7Source): Promise<Hl7Answer>;
  /**
   * Applies messages in order in one transaction (a backlog's replay: one commit for many messages):
   * each answered as `apply` would after the ones before it; after a failure of the service, fewer
   * answers than messages (the first is the failure, nothing of the batch is applied).
   */
  applyBatch(
    items: readonly (Buffer | undefined)[],
    source: Hl7Source,
    options?: Hl7BatchOptions,
  ): Promise<Hl7Answer[]>;
  /** The acknowledgement message of an answer (to send back in `answer.charset`). */
  ackOf(answer: Hl7Answer): Hl7Message;
}

/** Where a message's reads and writes go: the database, or one transaction of a batch. */
interface Io {
  readonly read: Kysely<DB>;
  readonly write: <T>(fn: (trx: Transaction<DB>) => Promise<T>) => Promise<T>;
}

/** A batch's message failed (the service): the batch's transaction rolls back. */
class BatchStopped extends Error {
  readonly failure: unknown;
  constructor(failure: unknown) {
    super('HL7 batch stopped');
    this.failure = failure;
  }
}

/** A message parsed from its bytes read as Latin-1 (undefined: not HL7). */
function parseBytes(bytes: Buffer | undefined): Hl7Message | undefined {
  try {
    // Latin-1 keeps every byte: the character set MSH-18 declares is applied once MSH is read.
    return bytes === undefined ? undefined : Hl7Message.parse(bytes.toString('latin1'));
  } catch {
    return undefined;
  }
}

/** The decision before the audit row: `Hl7Answer` without its request id and final ack. */
type Decision = Omit<Hl7Answer, 'requestId' | 'isDuplicate'> & { readonly isDuplicate?: boolean };

type AllowedSenders = readonly { sender: Hl7Sender; addresses: BlockList | 'any' }[];

function compileSenders(senders: readonly Hl7Sender[]): AllowedSenders {
  return senders.map((sender) => {
    if (sender.address === '*') return { sender, addresses: 'any' as const };
    const list = new BlockList();
    const slash = sender.address.indexOf('/');
    const ip = slash === -1 ? sender.address : sender.address.slice(0, slash);
    const family = isIPv6(ip) ? 'ipv6' : 'ipv4';
    if (slash === -1) list.addAddress(ip, family);
    else list.addSubnet(ip, Number(sender.address.slice(slash + 1)), family);
    return { sender, addresses: list };
  });
}

/** True when an allowed sender names this application and facility (or `*`) and holds the address. */
export function isAllowedSender(
  allowed: AllowedSenders,
  application: string,
  facility: string,
  address: string,
): boolean {
  const same = (pattern: string, value: string) =>
    pattern === '*' || pattern.toUpperCase() === value.toUpperCase();
  return allowed.some(
    ({ sender, addresses }) =>
      same(sender.application, application) &&
      same(sender.facility, facility) &&
      (addresses === 'any' || addresses.check(address, isIPv6(address) ? 'ipv6' : 'ipv4')),
  );
}

const reject = (text: string, errorCode: string): AckContent => ({ code: 'AR', text, errorCode });

/** The events handled per message type, and the audit action of each. */
function actionOf(type: string, event: string): string | undefined {
  if (type === 'ADT') {
    if (PATIENT_EVENTS.has(event)) return 'hl7.patient';
    if (MERGE_EVENTS.has(event)) return 'hl7.merge';
  } else if (type === 'SIU') {
    if (BOOKING_EVENTS.has(event)) return 'hl7.appointment';
    if (CANCEL_EVENTS.has(event)) return 'hl7.appointment.cancel';
  }
  return undefined;
}

export function createHl7Applier(deps: Hl7ApplierDeps): Hl7Applier {
  const { config, database, logger, auditTrail } = deps;
  const settings = config.hl7;
  const log = logger.child({ component: 'hl7' });
  const allowed = compileSenders(settings.allowedSenders);
  // Identifier types and the other reference data: kept REFERENCE_CACHE_TTL_MS (pasapi's pas-reference.ts).
  const reference = createPasReferenceCache(config.referenceCacheTtlMs);
  const patients = createPatientChanges(database, { reference });
  const merges = createPatientMerges(database);
  const appointments = createPatientAppointments(database, { timeZone: config.timeZone });

  /** Reads, checks and applies one message (framed and parsed as Latin-1) through `io`. */
  async function decide(raw: Hl7Message, source: Hl7Source, io: Io): Promise<Decision> {
    const refused = (ack: AckContent, message: Hl7Message | undefined, httpStatus = 400): Decision => ({
      ack,
      charset: 'latin1',
      message,
      action: 'hl7.refused',
      httpStatus,
      patientIds: [],
    });
    const context = raw.context;
    const separators = [
      context.fieldSeparator,
      context.componentSeparator,
      context.repetitionSeparator,
      context.escapeCharacter,
      context.subcomponentSeparator,
    ];
    if (separators.some((s) => s.length !== 1 || /[A-Za-z0-9\s]/.test(s)) || new Set(separators).size !== 5)
      return refused(reject('MSH-1/MSH-2: malformed encoding characters', ERROR_CODE.dataType), undefined);
    const rawMsh = raw.getSegment('MSH');
    const charsetCode = rawMsh?.getField(18)?.getComponent(1) ?? '';
    const declared = charsetOf(charsetCode);
    if (declared === undefined)
      return refused(reject('MSH-18: unsupported character set', ERROR_CODE.dataType), raw);
    const charset: Hl7Charset = declared;
    const text = decodeAs(raw.toString(), charset);
    if (text === undefined)
      return refused(reject('the bytes are not of the MSH-18 character set', ERROR_CODE.dataType), raw);
    const message = charset === 'latin1' ? raw : Hl7Message.parse(text);
    const msh = message.getSegment('MSH');
    const component = (field: number, index: number) =>
      (msh?.getField(field)?.getComponent(index) ?? '').split(context.subcomponentSeparator)[0]!.trim();
    const application = component(3, 1);
    const facility = component(4, 1);
    const withCharset = (a: Decision): Decision => ({ ...a, charset, message });
    if (source.isOperator !== true && !isAllowedSender(allowed, application, facility, source.address ?? ''))
      return withCharset(refused(reject('sender not allowed', ERROR_CODE.applicationError), message, 403));
    const type = component(9, 1).toUpperCase();
    const event = component(9, 2).toUpperCase();
    const controlId = (msh?.getField(10)?.toString() ?? '').trim();
    if (controlId === '' || controlId.length > 199)
      return withCharset(
        refused(reject('MSH-10: message control id missing or too long', ERROR_CODE.requiredField), message),
      );
    if (component(11, 1).toUpperCase() !== 'P')
      return withCharset(
        refused(reject('MSH-11: processing id must be P', ERROR_CODE.unsupportedProcessingId), message),
      );
    if (!/^2\.[1-9](\.\d+)?$/.test(component(12, 1)))
      return withCharset(
        refused(reject('MSH-12: unsupported version', ERROR_CODE.unsupportedVersion), message),
      );
    if (type !== 'ADT' && type !== 'SIU')
      return withCharset(
        refused(reject(`MSH-9: unsupported message type`, ERROR_CODE.unsupportedMessageType), message),
      );
    const eventAction = actionOf(type, event);
    if (eventAction === undefined)
      return withCharset(
        refused(
          reject(`MSH-9: unsupported event ${event.slice(0, 8)}`, ERROR_CODE.unsupportedEvent),
          message,
        ),
      );

    const action: string = eventAction;
    const sender = `${application}^${facility}`.slice(0, 180);
    const messageType = `${type}^${event}`;
    const replaces = source.replaces;
    if (replaces !== undefined && (replaces.sender !== sender || replaces.controlId !== controlId))
      return withCharset(
        refused(
          reject(
            'MSH-3, MSH-4 and MSH-10 must stay those of the message corrected',
            ERROR_CODE.applicationError,
          ),
          message,
          422,
        ),
      );
    // A correction replaces its own AE row: the control id is answered, but not yet applied.
    const logged = replaces === undefined ? await findLoggedMessage(io.read, sender, controlId) : undefined;
    if (logged !== undefined) return duplicateOf(logged, message, charset, action);

    let change: AdtChange | SiuChange;
    try {
      change =
        type === 'SIU'
          ? mapSiuMessage(message, event, settings.fieldMap)
          : mapAdtMessage(message, event, settings.fieldMap);
    } catch (error) {
      if (!(error instanceof AdtMappingError)) throw error;
      const ack: AckContent = { code: 'AE', text: error.message, errorCode: error.errorCode };
      return recordError(ack, 422);
    }

    async function recordError(ack: AckContent, httpStatus: number): Promise<Decision> {
      // A correction still refused changes nothing: the AE row keeps the text it was read with.
      if (replaces !== undefined) return { ack, charset, message, action, httpStatus, patientIds: [] };
      try {
        await io.write((trx) =>
          logMessage(trx, {
            sender,
            controlId,
            messageType,
            ackCode: ack.code,
            ackText: ack.text,
            patientId: undefined,
            messageText: message.toString(),
          }),
        );
      } catch (error) {
        if (databaseErrorKind(error) !== 'unique') throw error;
        const first = await findLoggedMessage(io.read, sender, controlId);
        if (first !== undefined) return duplicateOf(first, message, charset, action);
      }
      return { ack, charset, message, action, httpStatus, patientIds: [] };
    }

    try {
      const applied = await io.write(async (trx) => {
        let patientIds: number[];
        let httpStatus: number;
        switch (change.kind) {
          case 'patient': {
            const result = await patients.applyPatientChangeIn(trx, change.change, SYSTEM_ACTOR);
            patientIds = result.patientId === undefined ? [] : [result.patientId];
            httpStatus = result.outcome === 'created' ? 201 : 200;
            break;
          }
          case 'merge': {
            const result = await merges.requestPatientMergeIn(trx, change.change, SYSTEM_ACTOR);
            patientIds = [result.primaryId, result.secondaryId];
            httpStatus = result.outcome === 'created' ? 201 : 200;
            break;
          }
          case 'appointment': {
            const identifierType = await reference.identifierType(trx, change.identifierTypeKey);
            if (identifierType === undefined) throw unknownIdentifierType(change.identifierTypeKey);
            const patientId = await findPatientByNumber(trx, identifierType.id, change.patientNumber);
            if (patientId === undefined)
              throw new PasapiError(422, [
                'PID-3: no patient holds this local number (send the patient, A28, first)',
              ]);
            const result = await appointments.applyAppointmentChangeIn(
              trx,
              {
                externalId: change.externalId,
                identifierTypeKey: change.identifierTypeKey,
                record: { ...change.record, patientId: { id: String(patientId) } },
                isPartial: false,
                isUpdateOnly: false,
              },
              SYSTEM_ACTOR,
            );
            patientIds = [patientId];
            httpStatus = result.outcome === 'created' ? 201 : 200;
            break;
          }
          case 'cancel': {
            const result = await appointments.deleteAppointmentIn(trx, change.externalId, SYSTEM_ACTOR);
            patientIds = [result.patientId];
            httpStatus = 204;
            break;
          }
        }
        if (replaces === undefined)
          await logMessage(trx, {
            sender,
            controlId,
            messageType,
            ackCode: 'AA',
            ackText: '',
            patientId: patientIds[0],
          });
        else if (
          !(await replaceLoggedAnswer(trx, replaces.id, replaces.messageText, {
            messageType,
            ackCode: 'AA',
            ackText: '',
            patientId: patientIds[0],
            messageText: message.toString(),
          }))
        )
          throw new ReplacedMeanwhileError();
        return { patientIds, httpStatus };
      });
      return { ack: { code: 'AA', text: '' }, charset, message, action, ...applied };
    } catch (error) {
      if (error instanceof ReplacedMeanwhileError)
        return {
          ack: {
            code: 'AE',
            text: 'The message changed meanwhile: nothing was applied',
            errorCode: ERROR_CODE.applicationInternal,
          },
          charset,
          message,
          action,
          httpStatus: 409,
          patientIds: [],
        };
      if (error instanceof PasapiError)
        return recordError(
          { code: 'AE', text: error.errors.join('; '), errorCode: ERROR_CODE.applicationError },
          error.statusCode,
        );
      if (databaseErrorKind(error) === 'unique') {
        // The same control id answered meanwhile on another connection, or the record changed meanwhile.
        const first = await findLoggedMessage(io.read, sender, controlId);
        if (first !== undefined) return duplicateOf(first, message, charset, action);
        return {
          ack: {
            code: 'AE',
            text: 'The record changed meanwhile: send the message again',
            errorCode: ERROR_CODE.applicationInternal,
          },
          charset,
          message,
          action,
          httpStatus: 409,
          patientIds: [],
        };
      }
      throw error;
    }
  }

  function duplicateOf(
    logged: Awaited<ReturnType<typeof findLoggedMessage>> & object,
    message: Hl7Message,
    charset: Hl7Charset,
    action: string,
  ): Decision {
    return {
      ack: { code: logged.ackCode, text: logged.ackText, errorCode: ERROR_CODE.applicationError },
      charset,
      message,
      action,
      httpStatus: logged.ackCode === 'AA' ? 200 : 422,
      patientIds: logged.patientId === undefined ? [] : [logged.patientId],
      isDuplicate: true,
    };
  }

  const direct: Io = { read: database.db, write: database.writeTransaction };

  /** The decision on one message (undefined: not HL7); a failure of the service is a decision too. */
  async function decideOrFail(
    raw: Hl7Message | undefined,
    source: Hl7Source,
    requestId: string,
    io: Io,
  ): Promise<Decision> {
    try {
      return raw === undefined
        ? {
            ack: reject('not an HL7 v2 message', ERROR_CODE.segmentSequence),
            charset: 'latin1',
            message: undefined,
            action: 'hl7.refused',
            httpStatus: 400,
            patientIds: [],
          }
        : await decide(raw, source, io);
    } catch (error) {
      log.error({ err: error, requestId }, 'HL7 message failed');
      return failed(raw, requestId, error);
    }
  }

  function failed(raw: Hl7Message | undefined, requestId: string, error: unknown): Decision {
    return {
      ack: {
        code: 'AE',
        text: `internal error (ref ${requestId}): send the message again`,
        errorCode: ERROR_CODE.applicationInternal,
      },
      charset: 'latin1',
      message: raw,
      action: 'hl7.failed',
      httpStatus: 500,
      patientIds: [],
      failure: error,
    };
  }

  /** Answers one message, its audit row committed before its answer is returned. */
  async function apply(raw: Hl7Message | undefined, source: Hl7Source): Promise<Hl7Answer> {
    const requestId = source.requestId ?? randomUUID();
    return audited(await decideOrFail(raw, source, requestId, direct), source, requestId);
  }

  /** Writes the audit row of a decision (AE when it cannot be written) and logs the answer. */
  async function audited(result: Decision, source: Hl7Source, requestId: string): Promise<Hl7Answer> {
    const msh = result.message?.getSegment('MSH');
    const messageType = msh?.getField(9)?.toString().slice(0, 16) ?? '';
    const isDuplicate = result.isDuplicate === true;
    let ack = result.ack;
    let failure = result.failure;
    try {
      await auditTrail.record({
        action: result.action,
        userId: source.userId ?? null,
        ...(source.username === undefined ? {} : { username: source.username }),
        targetType: 'patient',
        targetIds: result.patientIds,
        outcome: result.httpStatus,
        clientAddress: source.address,
        requestId,
        detail: `${messageType} ${ack.code}${isDuplicate ? ' duplicate' : ''}${source.isOperator === true ? ' operator' : ''}`,
      });
    } catch (error) {
      // As on the HTTP side: no AA for a change whose audit row could be lost; the PAS sends it again
      // and the duplicate is answered (and audited) then.
      log.error({ err: error, requestId }, 'audit row not written: HL7 answered AE');
      ack = { code: 'AE', text: 'audit unavailable: send the message again', errorCode: '207' };
      failure ??= error;
    }
    log.info(
      {
        requestId,
        sender: msh === undefined ? undefined : `${msh.getComponent(3, 1)}^${msh.getComponent(4, 1)}`,
        messageType,
        controlId: msh?.getField(10)?.toString().slice(0, 64),
        ack: ack.code,
        errorCode: ack.code === 'AA' ? undefined : ack.errorCode,
        duplicate: result.isDuplicate,
      },
      'HL7 message answered',
    );
    return { ...result, ack, isDuplicate, requestId, ...(failure === undefined ? {} : { failure }) };
  }

  /**
   * Messages in order in one transaction, each in a savepoint of its own: what each comes to is what
   * it would come to alone after the ones before it (a duplicate within the batch included), with one
   * commit for the batch; then their audit rows. A failure of the service rolls the whole batch back:
   * its first message is answered with the failure, the others not at all (nothing of the batch holds).
   */
  async function applyBatch(
    items: readonly (Buffer | undefined)[],
    source: Hl7Source,
    options: Hl7BatchOptions = {},
  ): Promise<Hl7Answer[]> {
    const requestId = source.requestId ?? randomUUID();
    const decisions: Decision[] = [];
    let raws: (Hl7Message | undefined)[] = [];
    try {
      raws = items.map(parseBytes);
      await database.writeTransaction(async (trx) => {
        // One savepoint at a time (each released before the next write), so one name: one statement
        // each for the statement caches.
        const name = sql.raw('hl7_message');
        const io: Io = {
          read: trx,
          async write(fn) {
            await sql`savepoint ${name}`.execute(trx);
            let value;
            try {
              value = await fn(trx);
            } catch (error) {
              await sql`rollback to savepoint ${name}`.execute(trx);
              await sql`release savepoint ${name}`.execute(trx);
              throw error;
            }
            await sql`release savepoint ${name}`.execute(trx);
            return value;
          },
        };
        for (const raw of raws) {
          const decision = await decideOrFail(raw, source, requestId, io);
          if (decision.failure !== undefined) throw new BatchStopped(decision.failure);
          decisions.push(decision);
          if (options.stopOnError === true && decision.ack.code !== 'AA') break;
        }
      });
    } catch (error) {
      if (!(error instanceof BatchStopped)) log.error({ err: error, requestId }, 'HL7 batch not committed');
      const failure = error instanceof BatchStopped ? error.failure : error;
      return [await audited(failed(raws[0], requestId, failure), source, requestId)];
    }
    return Promise.all(decisions.map((decision) => audited(decision, source, requestId)));
  }

  return {
    apply,
    applyBytes: (bytes, source) => apply(parseBytes(bytes), source),
    applyBatch,
    ackOf(answer) {
      return buildAck(answer.message, answer.ack);
    },
  };
}
