/**
 * Asking the PAS for a patient the service lacks, as the sites' "PAS OUT" Mirth channel does: a QBP^Q22
 * (QPD-3 `@PID.3.1^<number>~@PID.3.4^<authority>`, RCP immediate, one candidate) over MLLP with
 * `@medplum/hl7`'s `Hl7Client` to `PAS_QUERY_HOST`:`PAS_QUERY_PORT`, one connection per query; its
 * RSP^K21 (or K22) read as MSA-1 `AA`, QAK-2 `OK` with one PID, or `NF`.
 *
 * - The patient of an `OK` answer is stored by the code an ADT^A28 goes through: the PID mapped by
 *   `mapAdtMessage` with the site's field map, applied by PASAPI's patient change in a write transaction
 *   of its own, then its audit row (action `hl7.pas-query`), as the listener does; so its rows are those
 *   the same A28 would write.
 * - Bounded: connecting and the answer together take at most `PAS_QUERY_TIMEOUT_MS`; a PAS that is down,
 *   slow, answers AE/AR or something unreadable gives `unavailable` and nothing is stored. Nothing is
 *   thrown to the caller.
 * - A `not-found` answer is kept `PAS_QUERY_NOT_FOUND_CACHE_MS` per (authority, number), so that a device
 *   sending one unknown identifier again and again does not ask each time; asks for the same number at
 *   the same time share one query.
 * - An identifier is asked under each of `PAS_QUERY_AUTHORITIES` (else the field map's local
 *   authorities) whose identifier type's pattern it matches after the type's pad, in order, until one
 *   finds it.
 * - Logs: outcome, authority and timing; never the number or a field of the answer.
 */
import { Hl7Message } from '@medplum/core';
import { Hl7Client } from '@medplum/hl7';
import { LRUCache } from 'lru-cache';
import { randomUUID } from 'node:crypto';
import type { Config } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import { databaseErrorKind } from '../../errors.ts';
import type { Logger } from '../../logger.ts';
import type { LocalIdentifierMap } from '../../site-files/hl7-field-map.ts';
import type { AuditTrail } from '../audit/index.ts';
import type { ChangeActor, PatientChange } from '../pasapi/index.ts';
import {
  PasapiError,
  createPasReferenceCache,
  createPatientChanges,
  findIdentifierType,
} from '../pasapi/index.ts';
import type { MissingPatientAnswer, MissingPatientSource } from '../patient/index.ts';
import { matchIdentifier } from '../patient/index.ts';
import { AdtMappingError, MessageReader, mapAdtMessage } from './adt-mapping.ts';
import { charsetOf, decodeAs } from './hl7-text.ts';

/** The account of the audit columns of rows the query writes: OpenEyes's system user, as the feed's. */
const SYSTEM_ACTOR: ChangeActor = { userId: 1 };
/** Numbers whose `not-found` answer is kept at most (the oldest go first). */
const MAX_CACHED_NOT_FOUND = 10_000;
/** Whether the query may send `number`: 1-40 printable ASCII characters, none an HL7 separator. */
function isSendable(number: string): boolean {
  return /^[\x21-\x7e]{1,40}$/.test(number) && !/[|^~\\&]/.test(number);
}

export interface PasQueryDeps {
  readonly database: Database;
  readonly config: Config;
  readonly logger: Logger;
  /** The process's audit trail: one row per patient stored from an answer. */
  readonly auditTrail: AuditTrail;
}

/** What one QBP^Q22 came to, before anything is stored. */
type PasAnswer =
  | { readonly kind: 'found'; readonly change: PatientChange }
  | { readonly kind: 'not-found' }
  | { readonly kind: 'unavailable'; readonly reason: string };

/** The PAS as the source of a patient the database lacks. */
export type PasQuery = MissingPatientSource;

/** `YYYYMMDDHHMMSS+0000`, now. */
function hl7Now(): string {
  return `${new Date()
    .toISOString()
    .replace(/[-:T]/g, '')
    .replace(/\.\d+Z$/, '')}+0000`;
}

/** The QBP^Q22 for `number` (one {@link isSendable} accepts) under `authority`. */
function buildPasQuery(config: Config, authority: string, number: string, controlId: string): Hl7Message {
  const { receiver } = config.pasQuery;
  const safe = (text: string) => text.replace(/[|^~\\&\r\n]/g, '');
  return Hl7Message.parse(
    [
      `MSH|^~\\&|CRA|${safe(config.institutionCode)}|${receiver.application}|${receiver.facility}|${hl7Now()}||QBP^Q22^QBP_Q21|${controlId}|P|2.5`,
      `QPD|Q22^Find Candidates^HL7nnnn|${controlId}|@PID.3.1^${number}~@PID.3.4^${safe(authority)}`,
      'RCP|I|1^RD',
    ].join('\r'),
  );
}

/** Whether PID-3 of `reader`'s message holds `number` under `authority` (the field map's components). */
function holdsNumber(
  reader: MessageReader,
  authorityComponents: readonly number[],
  authority: string,
  number: string,
): boolean {
  return reader
    .repetitions('PID', 3)
    .some(
      (components) =>
        reader.text(components[0] ?? '').toUpperCase() === number.toUpperCase() &&
        authorityComponents.some(
          (index) => reader.firstSub(components[index - 1] ?? '').toUpperCase() === authority.toUpperCase(),
        ),
    );
}

/** The answer `response` gives to the query for `number` under `authority`. */
function readPasAnswer(response: Hl7Message, config: Config, authority: string, number: string): PasAnswer {
  const unavailable = (reason: string): PasAnswer => ({ kind: 'unavailable', reason });
  const charset = charsetOf(response.getSegment('MSH')?.getField(18)?.getComponent(1) ?? '');
  if (charset === undefined) return unavailable('the answer declares an unsupported character set');
  const text = decodeAs(response.toString(), charset);
  if (text === undefined) return unavailable('the answer is not of its declared character set');
  const message = charset === 'latin1' ? response : Hl7Message.parse(text);
  const reader = new MessageReader(message);
  const type = reader.value('MSH-9.1').toUpperCase();
  if (type !== 'RSP')
    return unavailable(`the answer is ${type === '' ? 'no' : 'an'} ${type} message, not RSP`);
  const ack = reader.value('MSA-1').toUpperCase();
  if (ack !== 'AA' && ack !== 'CA')
    return unavailable(`the PAS answered MSA-1 ${ack.slice(0, 2) || 'empty'}`);
  const status = reader.value('QAK-2').toUpperCase();
  const pids = message.getAllSegments('PID').length;
  if (status === 'NF') return pids === 0 ? { kind: 'not-found' } : unavailable('QAK-2 NF with a PID');
  if (status !== 'OK') return unavailable(`the PAS answered QAK-2 ${status.slice(0, 2) || 'empty'}`);
  if (pids !== 1) return unavailable(`QAK-2 OK with ${pids} PID segments`);
  const map = config.hl7.fieldMap;
  if (!holdsNumber(reader, map.authorityComponents, authority, number))
    return unavailable('the answer is for another number');
  try {
    const change = mapAdtMessage(message, 'A28', map);
    return change.kind === 'patient'
      ? { kind: 'found', change: change.change }
      : unavailable('not a patient');
  } catch (error) {
    if (error instanceof AdtMappingError) return unavailable(`the answer's PID: ${error.message}`);
    throw error;
  }
}

/** The client of the PAS's query endpoint; undefined when `PAS_QUERY_HOST` is not set. */
export function createPasQuery(deps: PasQueryDeps): PasQuery | undefined {
  const { database, config, auditTrail } = deps;
  const settings = config.pasQuery;
  const { host, port, timeoutMs } = settings;
  if (host === undefined || port === undefined) return undefined;
  const log = deps.logger.child({ component: 'pas-query' });
  const patients = createPatientChanges(database, {
    reference: createPasReferenceCache(config.referenceCacheTtlMs),
  });
  const map = config.hl7.fieldMap;
  const wanted = settings.authorities.map((a) => a.toUpperCase());
  const entries: readonly LocalIdentifierMap[] =
    wanted.length === 0
      ? map.localIdentifiers
      : wanted.flatMap((a) =>
          map.localIdentifiers.filter((e) => e.authority.toUpperCase() === a).slice(0, 1),
        );
  const notFound =
    settings.notFoundCacheMs > 0
      ? new LRUCache<string, true>({ max: MAX_CACHED_NOT_FOUND, ttl: settings.notFoundCacheMs })
      : undefined;
  const inFlight = new Map<string, Promise<MissingPatientAnswer>>();

  /** One query for `number` under `authority`: no cache, nothing stored. */
  async function ask(authority: string, number: string): Promise<PasAnswer> {
    const controlId = randomUUID().replace(/-/g, '').slice(0, 20);
    const client = new Hl7Client({ host: host!, port: port!, encoding: 'latin1', connectTimeout: timeoutMs });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<PasAnswer>((resolve) => {
      timer = setTimeout(
        () => resolve({ kind: 'unavailable', reason: `no answer within ${timeoutMs} ms` }),
        timeoutMs,
      );
    });
    const exchange = (async (): Promise<PasAnswer> => {
      try {
        const response = await client.sendAndWait(buildPasQuery(config, authority, number, controlId), {
          timeoutMs,
        });
        return readPasAnswer(response, config, authority, number);
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        return {
          kind: 'unavailable',
          reason: typeof code === 'string' ? `the PAS cannot be reached (${code})` : 'no answer from the PAS',
        };
      }
    })();
    try {
      return await Promise.race([exchange, deadline]);
    } finally {
      clearTimeout(timer);
      await client.close().catch(() => {});
    }
  }

  /** Stores the patient of a found answer, then its audit row. */
  async function store(change: PatientChange): Promise<MissingPatientAnswer> {
    const requestId = randomUUID();
    let patientId: number | undefined;
    let outcome: string;
    try {
      const result = await database.writeTransaction((trx) =>
        patients.applyPatientChangeIn(trx, change, SYSTEM_ACTOR),
      );
      patientId = result.patientId;
      outcome = result.outcome;
    } catch (error) {
      if (error instanceof PasapiError)
        return { kind: 'unavailable', reason: `the answer cannot be applied (${error.statusCode})` };
      if (databaseErrorKind(error) === 'unique')
        return { kind: 'unavailable', reason: 'the record changed meanwhile' };
      log.error({ err: error, requestId }, 'PAS answer not stored');
      return { kind: 'unavailable', reason: 'the patient could not be stored' };
    }
    if (patientId === undefined) return { kind: 'unavailable', reason: 'the answer created no patient' };
    try {
      await auditTrail.record({
        action: 'hl7.pas-query',
        userId: null,
        targetType: 'patient',
        targetIds: [patientId],
        outcome: outcome === 'created' ? 201 : 200,
        clientAddress: null,
        requestId,
        detail: `RSP^K21 OK ${outcome}`,
      });
    } catch (error) {
      // As the listener: a change whose audit row could be lost is not handed on; the patient is stored
      // and the next match or search finds it in the database.
      log.error({ err: error, requestId }, 'audit row of a PAS answer not written');
      return { kind: 'unavailable', reason: 'audit unavailable' };
    }
    return { kind: 'found', patientId };
  }

  /** One number under one authority: the cache, a shared query in flight, or a new query. */
  function askOnce(authority: string, number: string): Promise<MissingPatientAnswer> {
    const key = `${authority.toUpperCase()}\u0000${number.toUpperCase()}`;
    if (notFound?.has(key) === true) return Promise.resolve({ kind: 'not-found' });
    const running = inFlight.get(key);
    if (running !== undefined) return running;
    const started = Date.now();
    const query = (async (): Promise<MissingPatientAnswer> => {
      const answer = await ask(authority, number);
      const stored = answer.kind === 'found' ? await store(answer.change) : answer;
      if (stored.kind === 'not-found') notFound?.set(key, true);
      log.info(
        {
          authority,
          outcome: stored.kind,
          reason: stored.kind === 'unavailable' ? stored.reason : undefined,
          patientId: stored.kind === 'found' ? stored.patientId : undefined,
          ms: Date.now() - started,
        },
        'PAS asked for a patient',
      );
      return stored;
    })()
      .catch((error: unknown): MissingPatientAnswer => {
        log.error({ err: error }, 'PAS query failed');
        return { kind: 'unavailable', reason: 'the query failed' };
      })
      .finally(() => inFlight.delete(key));
    inFlight.set(key, query);
    return query;
  }

  return {
    async findMissingPatient(identifier: string): Promise<MissingPatientAnswer> {
      try {
        const despaced = identifier.replace(/[\s-]+/g, '');
        let answer: MissingPatientAnswer | undefined;
        for (const entry of entries) {
          const type = await findIdentifierType(database.db, entry.identifierType);
          if (type === undefined) continue;
          const number = type.regex === undefined ? despaced : matchIdentifier(despaced, type);
          if (number === undefined || !isSendable(number)) continue;
          const outcome = await askOnce(entry.authority, number);
          if (outcome.kind === 'found') return outcome;
          if (answer === undefined || outcome.kind === 'unavailable') answer = outcome;
        }
        return answer ?? { kind: 'not-found' };
      } catch (error) {
        log.error({ err: error }, 'PAS query failed');
        return { kind: 'unavailable', reason: 'the query failed' };
      }
    },
  };
}
