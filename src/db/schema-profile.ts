/**
 * The schema the service runs on, beside the engine (`dialect.ts`): its own (created by its migrations,
 * on any engine) or an existing OpenEyes database (`DATABASE_SCHEMA=openeyes`, MariaDB/MySQL), whose
 * tables differ from the service's own (moved columns, application-written keys, no `table_name`). Like the
 * dialect adapter it is asked what the schema has or needs, never which one it is, so that a module's SQL
 * stays written once:
 *
 * - logins: `user.active` exists only in the own schema (OpenEyes keeps it in `user_authentication`);
 * - element types: the own schema names an element's table (`element_type.table_name`), OpenEyes only its
 *   PHP class; OpenEyes's attachment element has a table of its own that every event showing
 *   attachments has a row in;
 * - versioned tables: OpenEyes keeps the previous version of a row of `event`, `request_details`, ... in
 *   `<table>_version`, written before each update or delete;
 * - text: OpenEyes's tables are utf8 (utf8mb3), which holds no character beyond U+FFFF;
 * - accounts: OpenEyes manages its users and roles, so the service's commands for them refuse;
 * - the service's own tables carry the prefix `cra_` beside OpenEyes's (see openeyes/own-tables.ts).
 */
import type { Kysely } from 'kysely';
import type { DatabaseSchema } from '../config.ts';

/** Copies rows of a versioned table into its `_version` twin before they change (OpenEyes's versioning). */
export type RowVersioner = (
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  trx: Kysely<any>,
  table: string,
  ids: readonly number[],
) => Promise<void>;

export interface SchemaProfile {
  readonly name: DatabaseSchema;
  /** The service creates users and assigns roles (its CLI); false where OpenEyes manages them. */
  readonly managesAccounts: boolean;
  /** `user.active` exists (and must be 1, beside `user_authentication.active`, for a login). */
  readonly hasUserActiveColumn: boolean;
  /** `element_type.table_name` exists (the own schema's way to name an element's table). */
  readonly hasElementTableName: boolean;
  /**
   * Episodes have OpenEyes's workflow: `episode.change_tracker` and an `episode_status` table (whose
   * `Discharged` status closes an episode without an end date).
   */
  readonly hasEpisodeWorkflow: boolean;
  /**
   * A `firm` table whose `service_subspecialty_assignment_id` places each firm in a subspecialty (the
   * own schema has firm ids on episodes and events, and no firm table).
   */
  readonly hasFirmSubspecialties: boolean;
  /**
   * The table of the attachment element (`OEModule\OphGeneric\models\Attachment`) that an event showing
   * attachments has a row in; undefined where the schema has none.
   */
  readonly attachmentElementTable: string | undefined;
  /**
   * The request type of the `request` row an attachment upload hangs on (`attachment_data.request_id` is
   * NOT NULL): the own schema's `attachment_upload`; undefined where the service adds no request type (an
   * OpenEyes database keeps the site's): then the configured `DEFAULT_REQUEST_TYPE`.
   */
  readonly uploadRequestType: string | undefined;
  /** The highest code point a text column holds (U+FFFF for utf8mb3). */
  readonly maxTextCodePoint: number;
  /**
   * Which of `signature_import_log.created_date` / `last_modified_date` hold a time of day. The own
   * schema declares both DATE (as OpenEyes first did); an OpenEyes database created by its migrations has
   * datetime columns, an older table altered by hand may still have DATE. Read once per process.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly importLogTimedDates: (db: Kysely<any>) => Promise<TimedAuditDates>;
  /** True where {@link keepRowVersions} writes anything (the schema has `_version` twins). */
  readonly keepsRowVersions: boolean;
  /** Keeps the previous versions of the rows `ids` of `table` before they are updated or deleted. */
  readonly keepRowVersions: RowVersioner;
  /**
   * Where another engine may serve the same queues (OpenEyes's Java payload processor): holds `queues`
   * against it until released, or throws when it holds one (see openeyes/queue-guard.ts); `onLost` is
   * told when the hold is lost later. Undefined where no other engine can run.
   */
  readonly holdQueues?: (
    queues: readonly string[],
    onLost: (error: unknown) => void,
  ) => Promise<{ release(): Promise<void> }>;
}

/** Which audit date columns of a table hold a date-time (true) rather than a date (false). */
export interface TimedAuditDates {
  readonly createdDate: boolean;
  readonly lastModifiedDate: boolean;
}

/** The service's own schema (every engine). */
export const OWN_SCHEMA: SchemaProfile = {
  name: 'own',
  managesAccounts: true,
  hasUserActiveColumn: true,
  hasElementTableName: true,
  hasEpisodeWorkflow: false,
  hasFirmSubspecialties: false,
  attachmentElementTable: undefined,
  uploadRequestType: 'attachment_upload',
  maxTextCodePoint: 0x10ffff,
  importLogTimedDates: async () => ({ createdDate: false, lastModifiedDate: false }),
  keepsRowVersions: false,
  keepRowVersions: async () => {},
};

/** The first character of `text` beyond `maxCodePoint`, or undefined when every one fits. */
export function findUnstorableCharacter(text: string, maxCodePoint: number): string | undefined {
  if (maxCodePoint >= 0x10ffff) return undefined;
  for (const character of text) if (character.codePointAt(0)! > maxCodePoint) return character;
  return undefined;
}

/** The 422 message for text with a character the database cannot store, in the field `label`. */
export function unstorableCharacterMessage(label: string): string {
  return `${label} holds a character the database cannot store (such as an emoji).`;
}

/**
 * `text` with every character beyond `maxCodePoint` replaced by U+FFFD, for texts the service writes on
 * its own account (a log's message), where refusing the call would lose the record.
 */
export function replaceUnstorableCharacters(text: string, maxCodePoint: number): string {
  if (findUnstorableCharacter(text, maxCodePoint) === undefined) return text;
  return Array.from(text, (c) => (c.codePointAt(0)! > maxCodePoint ? '\uFFFD' : c)).join('');
}
