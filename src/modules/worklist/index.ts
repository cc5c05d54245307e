/**
 * The worklist module's face: the Modality Worklist C-FIND answered from OpenEyes's worklist tables
 * (the DICOM port's SCP calls it), the bounded reader of C-FIND identifiers (the PDU gate calls it), and
 * the station settings.
 */
export type {
  WorklistFinder,
  WorklistFindOutcome,
  WorklistFindRequest,
  WorklistFindSink,
} from './worklist-find.ts';
export { createWorklistFinder } from './worklist-find.ts';
export type { IdentifierRefusal } from './identifier.ts';
export {
  MAX_IDENTIFIER_BYTES,
  MAX_IDENTIFIER_DEPTH,
  MAX_IDENTIFIER_ELEMENTS,
  readIdentifier,
} from './identifier.ts';
export { FIND_STATUS } from './worklist-query.ts';
/** Modality Worklist Information Model - FIND (PS3.4 K.6.1). */
export const MODALITY_WORKLIST_FIND = '1.2.840.10008.5.1.4.31';
// The C-FIND building blocks the query/retrieve SCP shares: reading a query's keys and character set,
// matching a value (PS3.4 C.2.2.2), and encoding an answer in the query's character set.
export type { AnswerElement } from './answer-encoding.ts';
export { encodeAnswer, isNonAscii } from './answer-encoding.ts';
export type { QueryKey, WorklistQuery } from './worklist-query.ts';
export { dateRangeOf, foldName, matchesValue, readQuery } from './worklist-query.ts';
export type { WorklistCharacterSet } from '../../site-files/worklist-stations.ts';
// The worklist entry a received study was made for (filing matches the study through it).
export type { StudyEntry, StudyEntryFinding, StudyEntryKeys } from './worklist.queries.ts';
export { findStudyEntry } from './worklist.queries.ts';
