/**
 * A merge request from the PAS (PASAPI's `PatientMerge` PUT, HL7 A40 later): the surviving (primary) and
 * retired (secondary) patients by their numbers of the URL's identifier type, a `patient_merge_request`
 * row, and the merge itself as the `pasapi_automerge` setting says: 0 never, 1 (OpenEyes's default)
 * when date of birth and gender match, 2 always. Statuses are OpenEyes's: 0 Not processed, 10 Conflict,
 * 20 Merged. One write transaction for the request row and the merge.
 *
 * Differences from OpenEyes (P23): patients are found by identifier of the URL's type, then by
 * `pasapi_assignment` (OpenEyes: assignment only); all four identifier values are stored; the
 * secondary's `Patient` assignment moves to the primary (or goes, when the primary has one), so a later
 * PUT with the retired number never updates the retired patient (it reaches the survivor and is refused
 * as a renumbering, 409); a refused merge leaves status 0 with its reason as a warning (OpenEyes answers
 * an HTML 500).
 *
 * What the merge writes: the secondary's episodes re-pointed to the primary; each of its identifiers
 * copied onto the primary (active `MERG ID =(<request>)`, or deleted `DEL ID=(<request>)` when the
 * primary already has that type or the original was deleted) and then soft-deleted
 * (`DEL ID=(<request>)[<unix time>]`); the secondary soft-deleted. Versions kept in openeyes mode.
 */
import type { Transaction } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { nowDateTime } from '../../db/stored-time.ts';
import type { ChangeActor, PasIdentifierType } from './patient-change.ts';
import {
  PATIENT_INTERNAL_TYPE,
  PATIENT_RESOURCE,
  findGlobalType,
  findIdentifierType,
  findPatientByIdentifier,
  findPatientByNumber,
  readInstallationSetting,
  unknownIdentifierType,
} from './patient-change.ts';
import { PasapiError } from './pasapi-values.ts';

export const MERGE_STATUS = { notProcessed: 0, conflict: 10, merged: 20 } as const;
const STATUS_TEXT: Readonly<Record<number, string>> = { 0: 'Not processed', 10: 'Conflict', 20: 'Merged' };

export interface PatientMergeChange {
  readonly identifierTypeKey: string;
  readonly primaryNumber: string;
  readonly secondaryNumber: string;
}

export interface PatientMergeResult {
  readonly outcome: 'created' | 'updated';
  readonly requestId: number;
  readonly primaryId: number;
  readonly secondaryId: number;
  readonly status: number;
  readonly warnings: readonly string[];
}

interface MergePatient {
  readonly id: number;
  readonly dob: string | null;
  readonly gender: string | null;
  readonly isDeceased: number;
  readonly isLocal: number | null;
}

export function createPatientMerges(database: Database): {
  requestPatientMerge(change: PatientMergeChange, actor: ChangeActor): Promise<PatientMergeResult>;
  /** The same request inside a write transaction of the caller's, which commits it with its own rows. */
  requestPatientMergeIn(
    trx: Transaction<DB>,
    change: PatientMergeChange,
    actor: ChangeActor,
  ): Promise<PatientMergeResult>;
} {
  const { schema } = database;

  async function resolve(
    trx: Transaction<DB>,
    type: PasIdentifierType,
    number: string,
    role: 'primary' | 'secondary',
  ): Promise<MergePatient> {
    if (number.trim() === '') throw new PasapiError(400, [`${role} patient number not provided`]);
    const id = await findPatientByNumber(trx, type.id, number);
    const row =
      id === undefined
        ? undefined
        : await trx
            .selectFrom('patient')
            .select(['id', 'dob', 'gender', 'is_deceased', 'is_local'])
            .where('id', '=', id)
            .where('deleted', '=', 0)
            .executeTakeFirst();
    if (row === undefined) throw new PasapiError(400, [`${role} patient not found`]);
    return {
      id: row.id,
      dob: row.dob,
      gender: row.gender,
      isDeceased: row.is_deceased,
      isLocal: row.is_local,
    };
  }

  async function valueOf(
    trx: Transaction<DB>,
    patientId: number,
    typeId: number | undefined,
  ): Promise<string> {
    if (typeId === undefined) return '';
    const row = await trx
      .selectFrom('patient_identifier')
      .select('value')
      .where('patient_id', '=', patientId)
      .where('patient_identifier_type_id', '=', typeId)
      .where('deleted', '=', 0)
      .orderBy('id')
      .executeTakeFirst();
    return row?.value ?? '';
  }

  async function apply(
    trx: Transaction<DB>,
    change: PatientMergeChange,
    actor: ChangeActor,
  ): Promise<PatientMergeResult> {
    const type = await findIdentifierType(trx, change.identifierTypeKey);
    if (type === undefined) throw unknownIdentifierType(change.identifierTypeKey);
    const primary = await resolve(trx, type, change.primaryNumber, 'primary');
    // A merge already done retired the secondary and its numbers: the same request again is answered
    // with it (OpenEyes finds the retired patient through its assignment).
    const done = await trx
      .selectFrom('patient_merge_request')
      .select(['id', 'secondary_id'])
      .where('primary_id', '=', primary.id)
      .where('secondary_local_identifier_value', '=', change.secondaryNumber)
      .where('status', '=', MERGE_STATUS.merged)
      .where('deleted', '=', 0)
      .orderBy('id', 'desc')
      .executeTakeFirst();
    if (done !== undefined) {
      const live = await findPatientByIdentifier(trx, type.id, change.secondaryNumber);
      if (live === undefined)
        return {
          outcome: 'updated',
          requestId: done.id,
          primaryId: primary.id,
          secondaryId: done.secondary_id,
          status: MERGE_STATUS.merged,
          warnings: [],
        };
    }
    const secondary = await resolve(trx, type, change.secondaryNumber, 'secondary');
    if (primary.id === secondary.id)
      throw new PasapiError(400, ['primary and secondary patient are the same patient']);

    const existing = await database.dialect
      .lockRows(
        trx
          .selectFrom('patient_merge_request')
          .select(['id', 'primary_id', 'status'])
          .where('deleted', '=', 0)
          .where((eb) =>
            eb.or([
              eb.and([eb('primary_id', '=', primary.id), eb('secondary_id', '=', secondary.id)]),
              eb.and([eb('primary_id', '=', secondary.id), eb('secondary_id', '=', primary.id)]),
            ]),
          )
          .orderBy('id', 'desc'),
      )
      .execute();
    const opposite = existing.find((r) => r.primary_id === secondary.id);
    if (opposite !== undefined)
      throw new PasapiError(400, [
        `Merge request already exists in opposite direction (status: ${STATUS_TEXT[opposite.status ?? 0] ?? 'Not processed'})`,
      ]);
    const same = existing[0];
    const base = { primaryId: primary.id, secondaryId: secondary.id };
    if (same?.status === MERGE_STATUS.merged)
      return { ...base, outcome: 'updated', requestId: same.id, status: MERGE_STATUS.merged, warnings: [] };

    const now = nowDateTime();
    const modified = { last_modified_user_id: actor.userId, last_modified_date: now };
    const created = { ...modified, created_user_id: actor.userId, created_date: now };
    let requestId: number;
    if (same === undefined) {
      const globalType = await findGlobalType(trx);
      const row = await trx
        .insertInto('patient_merge_request')
        .values({
          ...created,
          primary_id: primary.id,
          primary_local_identifier_value: await valueOf(trx, primary.id, type.id),
          primary_global_identifier_value: await valueOf(trx, primary.id, globalType?.id),
          primary_dob: primary.dob,
          primary_gender: primary.gender,
          secondary_id: secondary.id,
          secondary_local_identifier_value: await valueOf(trx, secondary.id, type.id),
          secondary_global_identifier_value: await valueOf(trx, secondary.id, globalType?.id),
          secondary_dob: secondary.dob,
          secondary_gender: secondary.gender,
          status: MERGE_STATUS.notProcessed,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      requestId = row.id;
    } else {
      requestId = same.id;
    }
    const outcome = same === undefined ? 'created' : 'updated';

    const setting = Number((await readInstallationSetting(trx, 'pasapi_automerge')) ?? '1');
    const strategy = setting === 0 || setting === 2 ? setting : 1;
    const warnings: string[] = [];
    if (strategy === 0) return { ...base, outcome, requestId, status: MERGE_STATUS.notProcessed, warnings };
    if (strategy === 1) {
      if (primary.dob !== secondary.dob) warnings.push('Merge conflict: dob mismatch');
      if (primary.gender !== secondary.gender) warnings.push('Merge conflict: gender mismatch');
      if (warnings.length > 0)
        return { ...base, outcome, requestId, status: MERGE_STATUS.notProcessed, warnings };
    }
    const refusal =
      primary.isLocal === 1 && secondary.isLocal !== 1
        ? 'Secondary patient is not local while the primary patient is local'
        : primary.isDeceased !== secondary.isDeceased
          ? 'Patients have different deceased status'
          : undefined;
    if (refusal !== undefined) {
      warnings.push('Merge request was created but patients cannot be automatically merged.', refusal);
      return { ...base, outcome, requestId, status: MERGE_STATUS.notProcessed, warnings };
    }

    const log = await mergePatients(trx, requestId, primary.id, secondary.id, modified);
    log.push('Patients successfully merged');
    await schema.keepRowVersions(trx, 'patient_merge_request', [requestId]);
    await trx
      .updateTable('patient_merge_request')
      .set({ ...modified, status: MERGE_STATUS.merged, merge_json: JSON.stringify({ log }) })
      .where('id', '=', requestId)
      .execute();
    return { ...base, outcome, requestId, status: MERGE_STATUS.merged, warnings };
  }

  /** The merge's writes; returns its log lines (ids and counts only). */
  async function mergePatients(
    trx: Transaction<DB>,
    requestId: number,
    primaryId: number,
    secondaryId: number,
    modified: { last_modified_user_id: number; last_modified_date: string },
  ): Promise<string[]> {
    const log: string[] = [];
    const created = {
      ...modified,
      created_user_id: modified.last_modified_user_id,
      created_date: modified.last_modified_date,
    };

    const episodes = await trx
      .selectFrom('episode')
      .select('id')
      .where('patient_id', '=', secondaryId)
      .execute();
    if (episodes.length > 0) {
      const ids = episodes.map((e) => e.id);
      await schema.keepRowVersions(trx, 'episode', ids);
      await trx
        .updateTable('episode')
        .set({ ...modified, patient_id: primaryId })
        .where('id', 'in', ids)
        .execute();
      log.push(`Episodes moved from patient ${secondaryId} to patient ${primaryId}: ${ids.join(', ')}`);
    }

    const primaryIdentifiers = await trx
      .selectFrom('patient_identifier')
      .select(['patient_identifier_type_id', 'value', 'deleted'])
      .where('patient_id', '=', primaryId)
      .execute();
    const secondaryIdentifiers = await trx
      .selectFrom('patient_identifier')
      .select(['id', 'patient_identifier_type_id', 'value', 'deleted', 'source_info'])
      .where('patient_id', '=', secondaryId)
      .orderBy('id')
      .execute();
    const stamp = Math.floor(Date.now() / 1000);
    for (const identifier of secondaryIdentifiers) {
      const typeId = identifier.patient_identifier_type_id;
      const isHeld = primaryIdentifiers.some(
        (p) => p.patient_identifier_type_id === typeId && p.value === identifier.value,
      );
      if (!isHeld) {
        const hasType = primaryIdentifiers.some(
          (p) => p.patient_identifier_type_id === typeId && p.deleted === 0,
        );
        const isDeletedCopy = hasType || identifier.deleted === 1;
        const previous = identifier.source_info !== 'ACTIVE' ? `, ${identifier.source_info}` : '';
        const sourceInfo = isDeletedCopy
          ? `DEL ID=(${requestId})${previous}`
          : `MERG ID =(${requestId})${previous}`;
        await trx
          .insertInto('patient_identifier')
          .values({
            ...created,
            patient_id: primaryId,
            patient_identifier_type_id: typeId,
            value: identifier.value,
            source_info: sourceInfo.slice(0, 255),
            deleted: isDeletedCopy ? 1 : 0,
            unique_row_string: isDeletedCopy
              ? `${primaryId}-${typeId}-${sourceInfo}-${identifier.value}`.slice(0, 255)
              : `${primaryId}-${typeId}-ACTIVE`,
          })
          .execute();
        primaryIdentifiers.push({
          patient_identifier_type_id: typeId,
          value: identifier.value,
          deleted: isDeletedCopy ? 1 : 0,
        });
      }
      if (identifier.deleted === 0) {
        const sourceInfo = `DEL ID=(${requestId})[${stamp}]`;
        await schema.keepRowVersions(trx, 'patient_identifier', [identifier.id]);
        await trx
          .updateTable('patient_identifier')
          .set({
            ...modified,
            deleted: 1,
            source_info: sourceInfo,
            unique_row_string: `${secondaryId}-${typeId}-${sourceInfo}-${identifier.value}`.slice(0, 255),
          })
          .where('id', '=', identifier.id)
          .execute();
      }
    }
    log.push(
      `Identifiers of patient ${secondaryId} copied to patient ${primaryId}: ${secondaryIdentifiers.length}`,
    );

    // The secondary's assignment follows the surviving patient (one assignment per patient).
    const primaryAssignment = await trx
      .selectFrom('pasapi_assignment')
      .select('id')
      .where('internal_type', '=', PATIENT_INTERNAL_TYPE)
      .where('internal_id', '=', primaryId)
      .executeTakeFirst();
    const secondaryAssignments = trx
      .selectFrom('pasapi_assignment')
      .select('id')
      .where('resource_type', '=', PATIENT_RESOURCE)
      .where('internal_type', '=', PATIENT_INTERNAL_TYPE)
      .where('internal_id', '=', secondaryId);
    const moved = await secondaryAssignments.execute();
    if (moved.length > 0) {
      const ids = moved.map((m) => m.id);
      if (primaryAssignment === undefined) {
        await trx
          .updateTable('pasapi_assignment')
          .set({ ...modified, internal_id: primaryId })
          .where('id', '=', ids[0]!)
          .execute();
        if (ids.length > 1)
          await trx.deleteFrom('pasapi_assignment').where('id', 'in', ids.slice(1)).execute();
      } else {
        await trx.deleteFrom('pasapi_assignment').where('id', 'in', ids).execute();
      }
      log.push(`PASAPI assignment of patient ${secondaryId} moved to patient ${primaryId}`);
    }

    await schema.keepRowVersions(trx, 'patient', [secondaryId]);
    await trx
      .updateTable('patient')
      .set({ ...modified, deleted: 1 })
      .where('id', '=', secondaryId)
      .execute();
    log.push(`Patient ${secondaryId} flagged as deleted.`);
    return log;
  }

  return {
    requestPatientMerge: (change, actor) => database.writeTransaction((trx) => apply(trx, change, actor)),
    requestPatientMergeIn: apply,
  };
}
