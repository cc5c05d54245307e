/**
 * A Kysely driver for MariaDB 10.6+ and MySQL 8.0+ on a `mysql2` pool that sends every statement with
 * parameters as a prepared statement (`execute`, the binary protocol) instead of Kysely's `MysqlDriver`,
 * which uses `query()`: that inlines each value into the SQL text on the client, so a Buffer travels as
 * hex (twice its size: a 12 MiB upload became a 24 MiB packet) and every call is parsed anew. Prepared
 * statements are kept per connection (mysql2's cache, `maxPreparedStatements`).
 *
 * Every new connection gets the session the service relies on (`SessionSettings`) before its first
 * query. MariaDB runs `INSERT ... RETURNING`; MySQL has none, so on MySQL an INSERT that asks for
 * RETURNING is run as inserts of one row each and the rows are read back by their new ids.
 */
import type {
  CompiledQuery,
  DatabaseConnection,
  Dialect,
  Driver,
  Kysely,
  QueryCompiler,
  QueryResult,
  TransactionSettings,
} from 'kysely';
import {
  BinaryOperationNode,
  ColumnNode,
  CompiledQuery as CompiledQueryClass,
  InsertQueryNode,
  MysqlAdapter,
  MysqlIntrospector,
  MysqlQueryCompiler,
  OperatorNode,
  QueryNode,
  ReferenceNode,
  SelectQueryNode,
  ValueListNode,
  ValueNode,
  ValuesNode,
  createQueryId,
} from 'kysely';
import type { Pool, PoolConnection } from 'mysql2';
import mysql from 'mysql2';

/** What every connection of the pool is set to before its first query. */
export interface SessionSettings {
  /** `time_zone` of the session; undefined keeps the server's. */
  readonly timeZone: string | undefined;
}

/**
 * - READ COMMITTED: a claim (`SELECT ... FOR UPDATE SKIP LOCKED`) locks the rows it returns and no gaps,
 *   so it never blocks the inserts of intake; every statement sees what was committed before it.
 * - A strict `sql_mode`: a value that does not fit its column (too long, out of range, a character the
 *   column's character set cannot hold) fails the statement instead of being truncated or replaced.
 * - MariaDB's `idle_transaction_timeout` (in the executable comment only MariaDB reads): a process whose
 *   machine dies leaves its transaction open, holding a worker's row locks, until TCP notices, which
 *   takes hours. The server ends such a session after 10 minutes; that exceeds every routine's timeout
 *   and every request's transaction, so no live process is cut off.
 */
const SQL_MODE =
  'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ZERO_IN_DATE,NO_ZERO_DATE,NO_ENGINE_SUBSTITUTION';

function sessionStatements(settings: SessionSettings): string[] {
  const timeZone = settings.timeZone === undefined ? '' : `, time_zone = ${mysql.escape(settings.timeZone)}`;
  return [
    'set session transaction isolation level read committed',
    `set session sql_mode = '${SQL_MODE}'${timeZone} /*M!, idle_transaction_timeout = 600 */`,
  ];
}

/** The server the pool talks to, learnt from its first connection. */
export interface ServerInfo {
  /** `version()`, for example `10.11.19-MariaDB-0+deb12u1` or `8.0.36`. */
  readonly version: string;
  /** MariaDB (which runs `INSERT ... RETURNING`) rather than MySQL. */
  readonly isMariaDb: boolean;
}

/** A Kysely dialect on `pool` with this file's driver; `server()` is known after the first connection. */
export class MysqlExecuteDialect implements Dialect {
  readonly #driver: MysqlExecuteDriver;

  constructor(pool: Pool, settings: SessionSettings) {
    this.#driver = new MysqlExecuteDriver(pool, settings);
  }

  createDriver(): Driver {
    return this.#driver;
  }

  createQueryCompiler(): QueryCompiler {
    return new MysqlQueryCompiler();
  }

  createAdapter(): MysqlAdapter {
    return new MysqlReturningAdapter();
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  createIntrospector(db: Kysely<any>): MysqlIntrospector {
    return new MysqlIntrospector(db);
  }

  /** The server, once a connection has been made. */
  server(): ServerInfo | undefined {
    return this.#driver.server;
  }
}

/** RETURNING is answered on both servers: by MariaDB itself, emulated by the driver on MySQL. */
class MysqlReturningAdapter extends MysqlAdapter {
  override get supportsReturning(): boolean {
    return true;
  }
}

class MysqlExecuteDriver implements Driver {
  readonly #pool: Pool;
  readonly #settings: SessionSettings;
  readonly #connections = new WeakMap<PoolConnection, MysqlExecuteConnection>();
  server: ServerInfo | undefined;

  constructor(pool: Pool, settings: SessionSettings) {
    this.#pool = pool;
    this.#settings = settings;
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    const raw = await new Promise<PoolConnection>((resolve, reject) =>
      this.#pool.getConnection((error, connection) => (error ? reject(error) : resolve(connection))),
    );
    let connection = this.#connections.get(raw);
    if (connection === undefined) {
      try {
        this.server ??= await readServer(raw);
        for (const statement of sessionStatements(this.#settings)) await runText(raw, statement);
      } catch (error) {
        raw.destroy();
        throw error;
      }
      connection = new MysqlExecuteConnection(raw, this.server);
      this.#connections.set(raw, connection);
    }
    return connection;
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    if (settings.isolationLevel !== undefined || settings.accessMode !== undefined) {
      const parts = [
        ...(settings.isolationLevel === undefined ? [] : [`isolation level ${settings.isolationLevel}`]),
        ...(settings.accessMode === undefined ? [] : [settings.accessMode]),
      ];
      await connection.executeQuery(CompiledQueryClass.raw(`set transaction ${parts.join(', ')}`));
    }
    await connection.executeQuery(CompiledQueryClass.raw('begin'));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQueryClass.raw('commit'));
  }

  /**
   * A connection that died in the transaction (the server closes it after a packet too large, a kill or
   * a timeout) has been rolled back by the server; the ROLLBACK that cannot be sent is not an error, so
   * that the caller sees the error that ended the transaction rather than this one.
   */
  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    try {
      await connection.executeQuery(CompiledQueryClass.raw('rollback'));
    } catch (error) {
      if (classifyConnectionLoss(error)) return;
      throw error;
    }
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQueryClass.raw(`savepoint ${quoteId(name)}`));
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQueryClass.raw(`rollback to savepoint ${quoteId(name)}`));
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQueryClass.raw(`release savepoint ${quoteId(name)}`));
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    (connection as MysqlExecuteConnection).raw.release();
  }

  async destroy(): Promise<void> {
    await new Promise<void>((resolve, reject) =>
      this.#pool.end((error) => (error ? reject(error) : resolve())),
    );
  }
}

/** True for errors of a connection that is gone (mysql2's codes and messages, socket errors). */
function classifyConnectionLoss(error: unknown): boolean {
  const { code, message, fatal } = error as { code?: unknown; message?: unknown; fatal?: unknown };
  return (
    fatal === true ||
    code === 'PROTOCOL_CONNECTION_LOST' ||
    code === 'ECONNRESET' ||
    code === 'EPIPE' ||
    (typeof message === 'string' &&
      message.startsWith("Can't add new command when connection is in closed state"))
  );
}

const quoteId = (name: string): string => `\`${name.replace(/`/g, '``')}\``;

async function readServer(raw: PoolConnection): Promise<ServerInfo> {
  const rows = (await runText(raw, 'select version() as version')) as { version: string }[];
  const version = rows[0]?.version ?? '';
  return { version, isMariaDb: /mariadb/i.test(version) };
}

/** A statement without parameters, as text (transaction control, DDL, SET). */
function runText(raw: PoolConnection, text: string): Promise<unknown> {
  return new Promise((resolve, reject) =>
    raw.query(text, (error, result) => (error ? reject(withoutValues(error)) : resolve(result))),
  );
}

/** Whole numbers are bound as BIGINT: mysql2 sends every JS number as a DOUBLE otherwise. */
function toParameter(value: unknown): unknown {
  if (typeof value === 'number' && Number.isSafeInteger(value)) return mysql.TypedParameter.LONGLONG(value);
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (value === undefined) return null;
  return value;
}

interface OkPacket {
  readonly insertId: number | string;
  readonly affectedRows: number;
  readonly changedRows?: number;
}

const isOkPacket = (result: unknown): result is OkPacket =>
  typeof result === 'object' && result !== null && 'affectedRows' in result && 'insertId' in result;

class MysqlExecuteConnection implements DatabaseConnection {
  readonly raw: PoolConnection;
  readonly #server: ServerInfo;
  readonly #compiler = new MysqlQueryCompiler();

  constructor(raw: PoolConnection, server: ServerInfo) {
    this.raw = raw;
    this.#server = server;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    // The caller's frames, added to a failure's stack (mysql2's stack holds only its own frames).
    const caller = new Error();
    try {
      const node = compiledQuery.query;
      if (!this.#server.isMariaDb && InsertQueryNode.is(node) && node.returning !== undefined) {
        return (await this.#insertReturning(node)) as QueryResult<R>;
      }
      return await this.#run<R>(compiledQuery.sql, compiledQuery.parameters);
    } catch (error) {
      if (error instanceof Error && caller.stack !== undefined)
        error.stack = `${error.stack}\n${caller.stack.split('\n').slice(1).join('\n')}`;
      throw error;
    }
  }

  async *streamQuery<R>(compiledQuery: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    const result = await this.executeQuery<R>(compiledQuery);
    for (const row of result.rows) yield { rows: [row] };
  }

  async #run<R>(text: string, parameters: readonly unknown[]): Promise<QueryResult<R>> {
    const result = await new Promise<unknown>((resolve, reject) => {
      const done = (error: unknown, value: unknown) =>
        error ? reject(withoutValues(error)) : resolve(value);
      if (parameters.length === 0) this.raw.query(text, done);
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      else this.raw.execute(text, parameters.map(toParameter) as any[], done);
    });
    if (!isOkPacket(result)) return { rows: (Array.isArray(result) ? result : []) as R[] };
    const insertId = BigInt(result.insertId);
    return {
      rows: [],
      insertId: insertId === 0n ? undefined : insertId,
      numAffectedRows: BigInt(result.affectedRows),
      ...(result.changedRows === undefined ? {} : { numChangedRows: BigInt(result.changedRows) }),
    };
  }

  /**
   * `INSERT ... RETURNING` on MySQL: each row inserted on its own (with `innodb_autoinc_lock_mode = 2`,
   * the default, a multi-row insert need not get consecutive ids), then the returned columns read back
   * by the new ids, in insertion order. Only for tables with an auto-increment `id`; an upsert cannot
   * say which row it touched, and is refused.
   */
  async #insertReturning(node: InsertQueryNode): Promise<QueryResult<unknown>> {
    const plan = planInsertReturning(this.#compiler, node);
    const ids: bigint[] = [];
    for (const insert of plan.inserts) {
      const result = await this.#run(insert.sql, insert.parameters);
      if (result.insertId === undefined)
        throw new Error('INSERT ... RETURNING on MySQL needs an auto-increment id');
      ids.push(result.insertId);
    }
    const select = plan.selectByIds(ids.map(Number));
    const rows = (await this.#run<Record<string, unknown>>(select.sql, select.parameters)).rows;
    const byId = new Map(rows.map((row) => [Number(row[plan.idAlias]), row]));
    return {
      rows: ids.map((id) => {
        const row = { ...byId.get(Number(id)) };
        if (!plan.isIdReturned) delete row[plan.idAlias];
        return row;
      }),
    };
  }
}

/** The statements that emulate `INSERT ... RETURNING` on MySQL (see `#insertReturning`). */
export interface InsertReturningPlan {
  /** One INSERT without RETURNING per row. */
  readonly inserts: readonly CompiledQuery[];
  /** The SELECT of the returned columns (and the id, as `idAlias`) of the rows with `ids`. */
  selectByIds(ids: readonly number[]): CompiledQuery;
  readonly idAlias: string;
  /** The id is one of the returned columns (else it is dropped from the rows). */
  readonly isIdReturned: boolean;
}

export function planInsertReturning(compiler: QueryCompiler, node: InsertQueryNode): InsertReturningPlan {
  if (node.onDuplicateKey !== undefined || node.onConflict !== undefined)
    throw new Error('INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING needs MariaDB 10.5+');
  if (node.into === undefined || node.returning === undefined || node.values === undefined)
    throw new Error('INSERT ... RETURNING without a table, values or returned columns');
  const rows = ValuesNode.is(node.values) ? node.values.values : [node.values];
  const inserts = rows.map((row) =>
    compiler.compileQuery(
      InsertQueryNode.cloneWith(node, {
        returning: undefined,
        values: ValuesNode.create([row as ValuesNode['values'][number]]),
      }),
      createQueryId(),
    ),
  );
  const selections = node.returning.selections;
  const isIdReturned = selections.some(
    (s) =>
      ReferenceNode.is(s.selection) &&
      ColumnNode.is(s.selection.column) &&
      s.selection.column.column.name === 'id',
  );
  const idAlias = 'id';
  const idColumn = ReferenceNode.create(ColumnNode.create('id'));
  return {
    inserts,
    idAlias,
    isIdReturned,
    selectByIds: (ids) => {
      let select = SelectQueryNode.createFrom([node.into!]);
      select = SelectQueryNode.cloneWithSelections(select, [
        ...selections,
        ...(isIdReturned ? [] : [{ kind: 'SelectionNode' as const, selection: idColumn }]),
      ]);
      select = QueryNode.cloneWithWhere(
        select,
        BinaryOperationNode.create(
          idColumn,
          OperatorNode.create('in'),
          ValueListNode.create(ids.map((id) => ValueNode.create(id))),
        ),
      );
      return compiler.compileQuery(select, createQueryId());
    },
  };
}

/**
 * MariaDB and MySQL quote the offending value in the messages of some errors (`Duplicate entry
 * 'Smith-1' for key ...`, `Incorrect string value: '\xF0\x9F...' for column ...`): patient data that
 * must not reach a log. The value is cut out of `message` and `sqlMessage` where the error is made.
 */
function withoutValues(error: unknown): Error {
  if (!(error instanceof Error)) return new Error(String(error));
  const e = error as { message?: unknown; sqlMessage?: unknown };
  const clean = (text: unknown) =>
    typeof text === 'string'
      ? text
          .replace(/^Duplicate entry '.*' for key/s, 'Duplicate entry for key')
          .replace(/^Incorrect (\w+) value: '.*' for column/s, 'Incorrect $1 value for column')
      : text;
  e.message = clean(e.message);
  if (typeof e.sqlMessage === 'string') e.sqlMessage = clean(e.sqlMessage);
  return error;
}
