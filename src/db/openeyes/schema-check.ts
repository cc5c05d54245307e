/**
 * Checks that an existing OpenEyes MariaDB/MySQL database can be served (DATABASE_SCHEMA=openeyes): every
 * table and column of `OPENEYES_TABLE_NEEDS` exists with a compatible type, width, nullability, character
 * set and collation; every INSERT of the service fills the table's NOT NULL columns that have no default;
 * and the versioned tables it changes have their `_version` twin. Read from `information_schema` of the
 * connection's current database; nothing is changed. The start-up refuses to serve a database with any
 * problem, and `npm run cli -- openeyes check` prints the same report.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { statementLimitProblem } from '../dialect.ts';
import type { ColumnKind, ColumnNeed, TableNeed } from './schema-needs.ts';
import { OPENEYES_TABLE_NEEDS } from './schema-needs.ts';

/** One column as `information_schema.COLUMNS` describes it. */
export interface ColumnInfo {
  readonly tableName: string;
  readonly columnName: string;
  /** `int`, `varchar`, `longblob`, ... */
  readonly dataType: string;
  /** The full type, for messages: `int(10) unsigned`, `varchar(255)`. */
  readonly columnType: string;
  readonly isNullable: boolean;
  /** True when an INSERT may omit the column: it has a default, is nullable, generated or auto-increment. */
  readonly hasDefault: boolean;
  readonly isGenerated: boolean;
  /** Characters of char/varchar/text types; null for other types. */
  readonly maxChars: number | null;
  /** Bytes of text and binary types; null for other types. */
  readonly maxBytes: number | null;
  readonly characterSet: string | null;
  readonly collation: string | null;
}

export interface SchemaCheckReport {
  readonly databaseName: string;
  /** One line per problem: the server first, then each missing or incompatible table or column. */
  readonly problems: readonly string[];
}

export interface SchemaCheckOptions {
  /**
   * The largest single value the service may write (an attachment upload): the server's
   * `max_allowed_packet` must hold it, as binary, in one statement.
   */
  readonly largestWriteBytes?: number;
}

/**
 * Why the server `version()` cannot run the service: `FOR UPDATE SKIP LOCKED` (claims) needs MariaDB 10.6
 * or MySQL 8.0. Undefined when it can.
 */
export function serverVersionProblem(version: string): string | undefined {
  const match = /^(\d+)\.(\d+)/.exec(version);
  if (match === null)
    return `server version ${version} is not recognised; MariaDB 10.6+ or MySQL 8.0+ is needed`;
  const [major, minor] = [Number(match[1]), Number(match[2])];
  const isMariaDb = /mariadb/i.test(version);
  const isSupported = isMariaDb ? major > 10 || (major === 10 && minor >= 6) : major >= 8;
  return isSupported
    ? undefined
    : `server ${isMariaDb ? 'MariaDB' : 'MySQL'} ${major}.${minor} is too old: MariaDB 10.6+ or MySQL 8.0+ is needed (FOR UPDATE SKIP LOCKED)`;
}

interface ColumnRow {
  table_name: string;
  column_name: string;
  data_type: string;
  column_type: string;
  is_nullable: string;
  column_default: string | null;
  extra: string;
  max_chars: number | string | null;
  max_bytes: number | string | null;
  character_set: string | null;
  collation: string | null;
}

const toNumber = (value: number | string | null): number | null => (value === null ? null : Number(value));

/** The columns of `tables` in the connection's current database, by table then column name. */
export async function readColumns(
  // Reads information_schema, which the service's table types do not describe.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  db: Kysely<any>,
  tables: readonly string[],
): Promise<Map<string, Map<string, ColumnInfo>>> {
  const { rows } = await sql<ColumnRow>`
    select table_name as table_name, column_name as column_name, data_type as data_type,
      column_type as column_type, is_nullable as is_nullable, column_default as column_default,
      extra as extra, character_maximum_length as max_chars, character_octet_length as max_bytes,
      character_set_name as character_set, collation_name as collation
    from information_schema.columns
    where table_schema = database() and table_name in (${sql.join(tables)})
    order by table_name, ordinal_position`.execute(db);
  const byTable = new Map<string, Map<string, ColumnInfo>>();
  for (const row of rows) {
    const extra = row.extra.toLowerCase();
    const isGenerated = extra.includes('generated') && !extra.includes('default_generated');
    const isNullable = row.is_nullable === 'YES';
    const info: ColumnInfo = {
      tableName: row.table_name,
      columnName: row.column_name,
      dataType: row.data_type.toLowerCase(),
      columnType: row.column_type.toLowerCase(),
      isNullable,
      hasDefault:
        row.column_default !== null || isNullable || isGenerated || extra.includes('auto_increment'),
      isGenerated,
      maxChars: toNumber(row.max_chars),
      maxBytes: toNumber(row.max_bytes),
      characterSet: row.character_set,
      collation: row.collation,
    };
    let columns = byTable.get(info.tableName);
    if (columns === undefined) {
      columns = new Map();
      byTable.set(info.tableName, columns);
    }
    columns.set(info.columnName, info);
  }
  return byTable;
}

const INTEGER_TYPES = new Set(['tinyint', 'smallint', 'mediumint', 'int', 'integer', 'bigint']);
const STRING_TYPES = new Set(['char', 'varchar', 'tinytext', 'text', 'mediumtext', 'longtext']);
const BLOB_TYPES = new Set(['tinyblob', 'blob', 'mediumblob', 'longblob']);
/** Character sets that hold what the service writes (utf8 is utf8mb3 on MariaDB and MySQL). */
const UNICODE_CHARSETS = new Set(['utf8', 'utf8mb3', 'utf8mb4']);

/** What `kind` accepts, as a phrase for messages, and whether `column` is of it. */
const KIND_TYPES: Record<ColumnKind, { phrase: string; accepts(column: ColumnInfo): boolean }> = {
  int: { phrase: 'int or bigint', accepts: (c) => c.dataType === 'int' || c.dataType === 'bigint' },
  decimal: {
    phrase: 'decimal, float or double',
    accepts: (c) => c.dataType === 'decimal' || c.dataType === 'float' || c.dataType === 'double',
  },
  bigint: { phrase: 'bigint', accepts: (c) => c.dataType === 'bigint' },
  flag: { phrase: 'an integer type', accepts: (c) => INTEGER_TYPES.has(c.dataType) },
  text: { phrase: 'a character type', accepts: (c) => STRING_TYPES.has(c.dataType) },
  datetime: { phrase: 'datetime', accepts: (c) => c.dataType === 'datetime' || c.dataType === 'timestamp' },
  date: { phrase: 'date', accepts: (c) => c.dataType === 'date' },
  'date-or-datetime': {
    phrase: 'date or datetime',
    accepts: (c) => c.dataType === 'date' || c.dataType === 'datetime',
  },
  blob: { phrase: 'a blob type', accepts: (c) => BLOB_TYPES.has(c.dataType) },
  'int-or-text': {
    phrase: 'an integer or character type',
    accepts: (c) => INTEGER_TYPES.has(c.dataType) || STRING_TYPES.has(c.dataType),
  },
};

const isWritten = (need: ColumnNeed): boolean => need.isInserted === true || need.isUpdated === true;

/** Why `column` cannot serve `need`, one phrase per reason (empty when it can). */
export function columnProblems(column: ColumnInfo, need: ColumnNeed): string[] {
  const kind = KIND_TYPES[need.kind];
  if (!kind.accepts(column)) return [`is ${column.columnType}, the service needs ${kind.phrase}`];
  const problems: string[] = [];
  if (need.minChars !== undefined && column.maxChars !== null && column.maxChars < need.minChars) {
    problems.push(`is ${column.columnType}, shorter than the ${need.minChars} characters the service writes`);
  }
  if (need.minBytes !== undefined && column.maxBytes !== null && column.maxBytes < need.minBytes) {
    problems.push(
      `is ${column.columnType}, which holds ${column.maxBytes} bytes; the service writes up to ${need.minBytes}`,
    );
  }
  if (need.isNullWritten === true && !column.isNullable) {
    problems.push('is NOT NULL, and the service writes NULL there');
  }
  if (isWritten(need) && column.isGenerated) {
    problems.push('is a generated column, and the service writes it');
  }
  if (
    (need.kind === 'text' || need.kind === 'int-or-text') &&
    isWritten(need) &&
    column.characterSet !== null &&
    !UNICODE_CHARSETS.has(column.characterSet.toLowerCase())
  ) {
    problems.push(
      `has character set ${column.characterSet}, which cannot hold all the text the service writes`,
    );
  }
  if (need.isCaseInsensitive === true && column.collation !== null && !/_ci$/i.test(column.collation)) {
    problems.push(
      `has collation ${column.collation}, which is case-sensitive; the service matches it regardless of case`,
    );
  }
  return problems;
}

/** Problems of one table that exists: its needed columns, its inserts, its `_version` twin. */
export function tableProblems(
  table: string,
  need: TableNeed,
  columns: ReadonlyMap<string, ColumnInfo>,
  twinColumns: ReadonlyMap<string, ColumnInfo> | undefined,
): string[] {
  const problems: string[] = [];
  for (const [name, columnNeed] of Object.entries(need.columns)) {
    const column = columns.get(name);
    if (column === undefined) {
      problems.push(`column ${table}.${name} is missing`);
      continue;
    }
    for (const reason of columnProblems(column, columnNeed))
      problems.push(`column ${table}.${name} ${reason}`);
  }
  const isInsertedInto = Object.values(need.columns).some((c) => c.isInserted === true);
  if (isInsertedInto) {
    for (const column of columns.values()) {
      if (!column.hasDefault && need.columns[column.columnName]?.isInserted !== true) {
        problems.push(
          `column ${table}.${column.columnName} is NOT NULL without a default, and the service does not fill it when it inserts into ${table}`,
        );
      }
    }
  }
  if (need.isVersionedWrite === true) {
    if (twinColumns === undefined) {
      problems.push(
        `table ${table}_version is missing: the service changes ${table} rows and keeps their history there`,
      );
    } else {
      for (const name of ['version_date', 'version_id']) {
        if (!twinColumns.has(name)) problems.push(`column ${table}_version.${name} is missing`);
      }
    }
  }
  return problems;
}

/** Compares the current database with every need of the service; an empty list means it can be served. */
export async function checkOpenEyesSchema(
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  db: Kysely<any>,
  options: SchemaCheckOptions = {},
  needs: Readonly<Record<string, TableNeed>> = OPENEYES_TABLE_NEEDS,
): Promise<SchemaCheckReport> {
  const tables = Object.keys(needs);
  const twins = tables.filter((t) => needs[t]!.isVersionedWrite === true).map((t) => `${t}_version`);
  const [{ rows }, columns] = await Promise.all([
    sql<{
      name: string | null;
      version: string;
      max_packet: number | string;
    }>`select database() as name, version() as version, @@max_allowed_packet as max_packet`.execute(db),
    readColumns(db, [...tables, ...twins]),
  ]);
  const server = rows[0]!;
  const problems: string[] = [];
  const versionProblem = serverVersionProblem(server.version);
  if (versionProblem !== undefined) problems.push(versionProblem);
  if (options.largestWriteBytes !== undefined) {
    const limit = { bytes: Number(server.max_packet), setting: 'max_allowed_packet' };
    const packetProblem = statementLimitProblem(limit, options.largestWriteBytes);
    if (packetProblem !== undefined) problems.push(packetProblem);
  }
  for (const table of tables) {
    const tableColumns = columns.get(table);
    if (tableColumns === undefined) {
      // information_schema shows only the tables the account holds a privilege on.
      problems.push(`table ${table} is missing (or this account has no privilege on it)`);
      continue;
    }
    problems.push(...tableProblems(table, needs[table]!, tableColumns, columns.get(`${table}_version`)));
  }
  return { databaseName: server.name ?? '', problems };
}

/** The report as one message: a first line, then one indented line per problem. */
export function formatSchemaReport(report: SchemaCheckReport): string {
  if (report.problems.length === 0) {
    return `OpenEyes database ${report.databaseName}: every table and column the service uses is present and compatible`;
  }
  const count = report.problems.length;
  return [
    `OpenEyes database ${report.databaseName} cannot be served: ${count} problem${count === 1 ? '' : 's'}`,
    ...report.problems.map((p) => `  - ${p}`),
  ].join('\n');
}
