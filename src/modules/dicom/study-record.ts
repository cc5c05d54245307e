/**
 * The study record of a DICOM file: what reading its header once learns (UIDs of study, series, SOP
 * instance and class; the patient's id, name, birth date and sex; study date and time, AccessionNumber,
 * Requested Procedure ID; the equipment; modality, laterality, sizes, transfer syntax), typed and
 * versioned. Receipt stores it beside the request, as the request's JSON row `DICOM_STUDY` written in
 * the transaction that queues it, and every later step reads it instead of parsing the file again; it
 * is checked against its schema when read, so that a row written by another version (or by hand) is
 * rebuilt from the file rather than trusted.
 */
import type { Static, TObject, TNull, TString, TUnion } from '@sinclair/typebox';
import { Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { findUnstorableCharacter, replaceUnstorableCharacters } from '../../db/schema-profile.ts';
import type { DicomHeader, DicomHeaderKeyword } from './dicom-header.ts';
import { DICOM_HEADER_KEYWORDS } from './dicom-header.ts';
import type { DicomSummary } from './inspect.ts';

/** The version of the record's shape; a record of another version is rebuilt from the file. */
export const DICOM_STUDY_RECORD_VERSION = 1;

/** The mnemonic of the request's `attachment_data` row that holds the record (JSON). */
export const DICOM_STUDY_MNEMONIC = 'DICOM_STUDY';

const Text = Type.Union([Type.String(), Type.Null()]);

const headerProperties = Object.fromEntries(
  DICOM_HEADER_KEYWORDS.map((keyword) => [keyword, Text]),
) as Record<DicomHeaderKeyword, TUnion<[TString, TNull]>>;
const HeaderSchema: TObject<Record<DicomHeaderKeyword, TUnion<[TString, TNull]>>> = Type.Object(
  headerProperties,
  { additionalProperties: false },
);

export const DicomStudyRecordSchema = Type.Object(
  {
    v: Type.Literal(DICOM_STUDY_RECORD_VERSION),
    transferSyntaxUid: Type.String(),
    /** The data set's SOP Class UID (0008,0016) as the scan reads it, null when absent. */
    sopClassUid: Text,
    hasPixelData: Type.Boolean(),
    numberOfFrames: Type.Integer({ minimum: 1 }),
    elementCount: Type.Integer({ minimum: 0 }),
    sizeBytes: Type.Integer({ minimum: 0 }),
    /** Every value the header read gives, by DICOM keyword (null when absent or empty). */
    header: HeaderSchema,
    /** The keywords whose values had characters the database cannot store replaced (U+FFFD). */
    replacedKeywords: Type.Array(Type.Union(DICOM_HEADER_KEYWORDS.map((k) => Type.Literal(k)))),
  },
  { additionalProperties: false },
);

export type DicomStudyRecord = Static<typeof DicomStudyRecordSchema> & { readonly header: DicomHeader };

/** The record of a file of `sizeBytes` bytes whose read gave `summary`. */
export function studyRecordOf(summary: DicomSummary, sizeBytes: number): DicomStudyRecord {
  return {
    v: DICOM_STUDY_RECORD_VERSION,
    transferSyntaxUid: summary.transferSyntaxUid,
    sopClassUid: summary.sopClassUid,
    hasPixelData: summary.hasPixelData,
    numberOfFrames: summary.numberOfFrames,
    elementCount: summary.elementCount,
    sizeBytes,
    header: { ...summary.header },
    replacedKeywords: [],
  };
}

/** `value` (a stored `DICOM_STUDY` row) as a record when it is one of this version, else undefined. */
export function parseStudyRecord(value: unknown): DicomStudyRecord | undefined {
  return Value.Check(DicomStudyRecordSchema, value) ? value : undefined;
}

/**
 * The record with each character the database's text columns cannot hold (beyond the Basic Multilingual
 * Plane on OpenEyes's utf8mb3 tables) replaced by U+FFFD, the keywords so changed added to
 * `replacedKeywords`: the original file keeps every byte, and a device's emoji never fails the
 * request's writes.
 */
export function storableStudyRecord(record: DicomStudyRecord, maxCodePoint: number): DicomStudyRecord {
  const changed: DicomHeaderKeyword[] = [];
  const header = { ...record.header };
  for (const keyword of DICOM_HEADER_KEYWORDS) {
    const value = header[keyword];
    if (value === null || findUnstorableCharacter(value, maxCodePoint) === undefined) continue;
    header[keyword] = replaceUnstorableCharacters(value, maxCodePoint);
    changed.push(keyword);
  }
  if (changed.length === 0) return record;
  return { ...record, header, replacedKeywords: [...new Set([...record.replacedKeywords, ...changed])] };
}
