/**
 * The HL7 v2 listener (MLLP release 1) on `HL7_PORT`: the PAS's ADT and SIU feeds without Mirth. `@medplum/hl7`'s
 * `Hl7Connection` frames and parses each message on a socket of this server's own (so that the host,
 * the connection limit and the gate are the service's); this file decides and answers.
 *
 * - With `HL7_TLS`, MLLP runs inside TLS (the server's certificate and key).
 * - Gate, before the library: at most `HL7_MAX_CONNECTIONS` connections, a connection silent for
 *   `HL7_IDLE_TIMEOUT_MS` is closed, and one whose unframed bytes exceed `HL7_MAX_MESSAGE_BYTES` or
 *   that sends more messages than it waits acknowledgements for is closed.
 * - Per connection, messages are answered one after the other, in the order received.
 * - Refused with AR (nothing read further, nothing written): a frame that is not HL7, a malformed MSH, a
 *   sender not in `HL7_ALLOWED_SENDERS` (MSH-3, MSH-4 and the peer address), a character set other than
 *   ASCII, 8859/1 and UNICODE UTF-8 (MSH-18; bytes not of the declared set), a processing id other than
 *   P, a version other than 2.x, a message type other than the ADT and SIU events handled.
 * - ADT patient events and A34/A40 apply PASAPI's patient change and merge; SIU S12-S14 its appointment
 *   PUT for the patient holding PID-3's local number, S15 and S17 its appointment DELETE.
 * - A message control id (MSH-10) a sender sent before is answered with the first answer, not applied
 *   again (`hl7_message`).
 * - AA only once the change, its `hl7_message` row and its audit row are committed; AE with the reason
 *   for a message that cannot be applied (an unknown patient, an impossible date; PASAPI's 4xx), also
 *   recorded; a failure of the service itself (the database down) answers AE without recording it, so
 *   that the PAS's retry applies the message.
 * - Logs: sender, event, control id, answer code; never a field of the message or a reason's text.
 */
import { Hl7Message } from '@medplum/core';
import { Hl7Connection } from '@medplum/hl7';
import type { Hl7ErrorEvent, Hl7MessageEvent } from '@medplum/hl7';
import { randomUUID } from 'node:crypto';
import type { AddressInfo, Server, Socket } from 'node:net';
import { BlockList, createServer, isIPv6 } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import type { Config, Hl7Sender } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import { databaseErrorKind } from '../../errors.ts';
import type { Logger } from '../../logger.ts';
import type { AuditTrail } from '../audit/index.ts';
import type { ChangeActor } from '../pasapi/index.ts';
import {
  PasapiError,
  createPatientAppointments,
  createPatientChanges,
  createPatientMerges,
  findIdentifierType,
  findPatientByNumber,
  unknownIdentifierType,
} from '../pasapi/index.ts';
import type { AdtChange } from './adt-mapping.ts';
import { AdtMappingError, MERGE_EVENTS, PATIENT_EVENTS, mapAdtMessage } from './adt-mapping.ts';
import type { SiuChange } from './siu-mapping.ts';
import { BOOKING_EVENTS, CANCEL_EVENTS, mapSiuMessage } from './siu-mapping.ts';
import type { AckContent, Hl7Charset } from './hl7-text.ts';
import { ERROR_CODE, buildAck, charsetOf, decodeAs, encodingOf } from './hl7-text.ts';
import { findLoggedMessage, logMessage } from './message-log.queries.ts';

/** The account of the audit columns of rows the feed writes: OpenEyes's system user. */
const SYSTEM_ACTOR: ChangeActor = { userId: 1 };
/** Messages one connection may send ahead of their acknowledgements (a PAS sends one and waits). */
const MAX_PENDING_PER_CONNECTION = 32;
const FS = 0x1c;

export interface Hl7Server {
  /** The port listened on (the one asked for, or the one the system chose for port 0). */
  readonly port: number;
  /** Stops accepting, lets the messages being answered finish, then closes every connection. */
  stop(timeoutMs?: number): Promise<void>;
}

export interface Hl7ServerDeps {
  readonly database: Database;
  readonly config: Config;
  readonly logger: Logger;
  /** The process's audit trail: one row per message answered. */
  readonly auditTrail: AuditTrail;
}

/** What one message came to: its acknowledgement, and what the log and the audit say of it. */
interface Answer {
  readonly ack: AckContent;
  readonly charset: Hl7Charset;
  readonly message: Hl7Message | undefined;
  readonly action: string;
  readonly httpStatus: number;
  readonly patientIds: readonly number[];
  readonly isDuplicate?: boolean;
}

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

function normaliseAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
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

/** Starts the listener on `HL7_PORT` (and `HL7_HOST`, else `HOST`); resolves once it listens. */
export async function startHl7Server(deps: Hl7ServerDeps): Promise<Hl7Server> {
  const { config, database, logger, auditTrail } = deps;
  const settings = config.hl7;
  if (settings.port === undefined) throw new Error('HL7_PORT is not set');
  const log = logger.child({ component: 'hl7' });
  const allowed = compileSenders(settings.allowedSenders);
  const patients = createPatientChanges(database);
  const merges = createPatientMerges(database);
  const appointments = createPatientAppointments(database, { timeZone: config.timeZone });
  const sockets = new Set<Socket>();
  const inFlight = new Set<Promise<void>>();
  let isStopping = false;

  /** Reads, checks and applies one message (framed and parsed as Latin-1). */
  async function answer(raw: Hl7Message, address: string): Promise<Answer> {
    const refused = (ack: AckContent, message: Hl7Message | undefined, httpStatus = 400): Answer => ({
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
    const withCharset = (a: Answer): Answer => ({ ...a, charset, message });
    if (!isAllowedSender(allowed, application, facility, address))
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
    const logged = await findLoggedMessage(database.db, sender, controlId);
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

    async function recordError(ack: AckContent, httpStatus: number): Promise<Answer> {
      try {
        await database.writeTransaction((trx) =>
          logMessage(trx, {
            sender,
            controlId,
            messageType,
            ackCode: ack.code,
            ackText: ack.text,
            patientId: undefined,
          }),
        );
      } catch (error) {
        if (databaseErrorKind(error) !== 'unique') throw error;
        const first = await findLoggedMessage(database.db, sender, controlId);
        if (first !== undefined) return duplicateOf(first, message, charset, action);
      }
      return { ack, charset, message, action, httpStatus, patientIds: [] };
    }

    try {
      const applied = await database.writeTransaction(async (trx) => {
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
            const identifierType = await findIdentifierType(trx, change.identifierTypeKey);
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
        await logMessage(trx, {
          sender,
          controlId,
          messageType,
          ackCode: 'AA',
          ackText: '',
          patientId: patientIds[0],
        });
        return { patientIds, httpStatus };
      });
      return { ack: { code: 'AA', text: '' }, charset, message, action, ...applied };
    } catch (error) {
      if (error instanceof PasapiError)
        return recordError(
          { code: 'AE', text: error.errors.join('; '), errorCode: ERROR_CODE.applicationError },
          error.statusCode,
        );
      if (databaseErrorKind(error) === 'unique') {
        // The same control id answered meanwhile on another connection, or the record changed meanwhile.
        const first = await findLoggedMessage(database.db, sender, controlId);
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
  ): Answer {
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

  /** Answers one message on `connection`, its audit row committed before its acknowledgement. */
  async function serve(connection: Hl7Connection, raw: Hl7Message | undefined, address: string) {
    const requestId = randomUUID();
    let result: Answer;
    try {
      result =
        raw === undefined
          ? {
              ack: reject('not an HL7 v2 message', ERROR_CODE.segmentSequence),
              charset: 'latin1',
              message: undefined,
              action: 'hl7.refused',
              httpStatus: 400,
              patientIds: [],
            }
          : await answer(raw, address);
    } catch (error) {
      log.error({ err: error, requestId }, 'HL7 message failed');
      result = {
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
      };
    }
    const msh = result.message?.getSegment('MSH');
    const messageType = msh?.getField(9)?.toString().slice(0, 16) ?? '';
    let ack = result.ack;
    try {
      await auditTrail.record({
        action: result.action,
        userId: null,
        targetType: 'patient',
        targetIds: result.patientIds,
        outcome: result.httpStatus,
        clientAddress: address,
        requestId,
        detail: `${messageType} ${ack.code}${result.isDuplicate === true ? ' duplicate' : ''}`,
      });
    } catch (error) {
      // As on the HTTP side: no AA for a change whose audit row could be lost; the PAS sends it again
      // and the duplicate is answered (and audited) then.
      log.error({ err: error, requestId }, 'audit row not written: HL7 answered AE');
      ack = { code: 'AE', text: 'audit unavailable: send the message again', errorCode: '207' };
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
    if (connection.isClosed()) return;
    connection.setEncoding(encodingOf(result.charset));
    try {
      connection.send(buildAck(result.message, ack));
    } finally {
      connection.setEncoding('latin1');
    }
  }

  function accept(socket: Socket): void {
    if (isStopping || sockets.size >= settings.maxConnections) {
      log.warn({ address: socket.remoteAddress }, 'HL7 connection refused: limit reached');
      socket.destroy();
      return;
    }
    sockets.add(socket);
    const address = normaliseAddress(socket.remoteAddress ?? '');
    socket.setTimeout(settings.idleTimeoutMs, () => socket.destroy());
    socket.on('close', () => sockets.delete(socket));
    // The gate: bytes of a frame not yet ended, bounded before the library buffers them.
    let unframedBytes = 0;
    socket.prependListener('data', (chunk: Buffer) => {
      const end = chunk.lastIndexOf(FS);
      unframedBytes = end === -1 ? unframedBytes + chunk.length : chunk.length - end - 1;
      if (unframedBytes > settings.maxMessageBytes) {
        log.warn({ address }, 'HL7 connection closed: message longer than HL7_MAX_MESSAGE_BYTES');
        socket.destroy();
      }
    });
    // Latin-1 keeps every byte: the character set MSH-18 declares is applied once MSH is read.
    const connection = new Hl7Connection(socket, 'latin1');
    let pending = 0;
    let chain = Promise.resolve();
    const enqueue = (raw: Hl7Message | undefined) => {
      if (socket.destroyed) return;
      pending += 1;
      if (pending > MAX_PENDING_PER_CONNECTION) {
        log.warn({ address }, 'HL7 connection closed: too many messages without waiting for answers');
        socket.destroy();
        return;
      }
      const job = chain.then(() => serve(connection, raw, address));
      chain = job
        .catch((error: unknown) => log.error({ err: error }, 'HL7 answer not sent'))
        .finally(() => {
          pending -= 1;
        });
      const tracked = chain.then(() => {
        inFlight.delete(tracked);
      });
      inFlight.add(tracked);
    };
    connection.addEventListener('message', (event: Hl7MessageEvent) => enqueue(event.message));
    connection.addEventListener('error', (event: Hl7ErrorEvent) => {
      // A frame that is not HL7 (the library's parse refuses it): AR. Socket errors end the connection.
      if (event.error.message === 'Invalid HL7 message') enqueue(undefined);
      else log.debug({ address, err: event.error.message }, 'HL7 connection error');
    });
  }

  const tls = config.tls;
  const server: Server =
    settings.isTls && tls !== undefined
      ? createTlsServer({ cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' }, accept)
      : createServer(accept);
  // Connections beyond the limit are refused by Node before a TLS handshake or a byte is read.
  server.maxConnections = settings.maxConnections;
  const host = settings.host ?? config.host;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  log.info({ port, host, tls: settings.isTls }, 'HL7 MLLP listener listening');

  return {
    port,
    async stop(timeoutMs = 10_000) {
      isStopping = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      const timer = setTimeout(() => {
        for (const socket of sockets) socket.destroy();
      }, timeoutMs);
      timer.unref();
      await Promise.all([...inFlight]);
      for (const socket of sockets) socket.destroy();
      await closed;
      clearTimeout(timer);
      log.info('HL7 MLLP listener stopped');
    },
  };
}
