/**
 * Console sessions, kept in the database so that every server process (and a restart) sees them, and so
 * that logout ends a session for good. The cookie holds a random 256-bit token (signed by the cookie
 * plugin); the row is keyed by the token's SHA-256. A session ends after `idleMinutes` without a request
 * or `sessionHours` after login, whichever comes first; `last_seen_at` is written at most once a minute.
 * Each session has its own CSRF secret, so a form from another or an earlier session is refused.
 * Each keeps the user's credential stamp at sign-in (a digest of the user's passwords and role
 * assignments): the guard ends a session whose user's stamp has moved since, so a password change or a
 * revoked role, made by any process, ends the user's sessions at their next request.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { formatDateTime, parseDateTime } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';

/** Tables of migration 0013, owned by this module. */
export interface ConsoleSessionTable {
  id: string;
  user_id: number;
  csrf_secret: string;
  created_at: string;
  last_seen_at: string;
  /** Null only for sessions from before the column: they match no stamp. */
  credential_stamp: string | null;
  /** The RBAC items assigned to the user at sign-in, as a JSON array (null for sessions from before it). */
  signed_in_items: string | null;
}
export interface ConsoleSecretTable {
  name: string;
  value: string;
}
type ConsoleTables = { console_session: ConsoleSessionTable; console_secret: ConsoleSecretTable };

function consoleDb(db: Kysely<DB>): Kysely<DB & ConsoleTables> {
  return db.withTables<ConsoleTables>();
}

export interface ConsoleSession {
  /** Row key (the token's digest); never sent to the browser. */
  readonly id: string;
  readonly userId: number;
  readonly csrfSecret: string;
  /** The user's credential stamp when the session started; null for sessions that have none. */
  readonly credentialStamp: string | null;
  /** The RBAC items assigned to the user when the session started; null for sessions that have none. */
  readonly signedInItems: readonly string[] | null;
}

/** What a new session starts with. */
export interface NewSession {
  readonly userId: number;
  readonly csrfSecret: string;
  /** The credential stamp of the principal that signed in (`Principal.credentialStamp`). */
  readonly credentialStamp: string;
  /** The RBAC items assigned to the principal that signed in (`Principal.assignedItems`). */
  readonly assignedItems: readonly string[];
}

export type SessionLookup =
  | { readonly kind: 'active'; readonly session: ConsoleSession }
  /** The session existed but ran past its idle or absolute limit (now deleted). */
  | { readonly kind: 'expired' }
  | { readonly kind: 'none' };

export interface SessionStore {
  /** Starts a session; returns the cookie token. */
  create(session: NewSession): Promise<string>;
  lookup(token: string): Promise<SessionLookup>;
  /** Ends the session `sessionId` (logout, a user no longer allowed in, or one whose credentials changed). */
  destroy(sessionId: string): Promise<void>;
}

export interface SessionStoreOptions {
  readonly idleMinutes: number;
  readonly sessionHours: number;
  readonly now?: () => Date;
}

const TOUCH_INTERVAL_MS = 60_000;

/** The JSON array of `signed_in_items`, or null when absent or not an array of strings. */
function parseItems(text: string | null): readonly string[] | null {
  if (text === null) return null;
  try {
    const value: unknown = JSON.parse(text);
    return Array.isArray(value) && value.every((v) => typeof v === 'string') ? value : null;
  } catch {
    return null;
  }
}

function digest(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export function createSessionStore(database: Database, options: SessionStoreOptions): SessionStore {
  const db = consoleDb(database.db);
  const now = options.now ?? (() => new Date());
  const idleMs = options.idleMinutes * 60_000;
  const absoluteMs = options.sessionHours * 3_600_000;

  return {
    async create({ userId, csrfSecret, credentialStamp, assignedItems }) {
      const token = randomBytes(32).toString('base64url');
      const at = now();
      const atText = formatDateTime(at);
      await database.writeTransaction(async (trx) => {
        const tdb = consoleDb(trx);
        // Sessions past either limit are removed as new ones start: the table stays small.
        await tdb
          .deleteFrom('console_session')
          .where((eb) =>
            eb.or([
              eb('last_seen_at', '<', formatDateTime(new Date(at.getTime() - idleMs))),
              eb('created_at', '<', formatDateTime(new Date(at.getTime() - absoluteMs))),
            ]),
          )
          .execute();
        await tdb
          .insertInto('console_session')
          .values({
            id: digest(token),
            user_id: userId,
            csrf_secret: csrfSecret,
            created_at: atText,
            last_seen_at: atText,
            credential_stamp: credentialStamp,
            signed_in_items: JSON.stringify(assignedItems),
          })
          .execute();
      });
      return token;
    },

    async lookup(token) {
      const id = digest(token);
      const row = await db.selectFrom('console_session').selectAll().where('id', '=', id).executeTakeFirst();
      if (row === undefined) return { kind: 'none' };
      const at = now().getTime();
      const lastSeen = parseDateTime(row.last_seen_at)?.getTime() ?? Number.NaN;
      const created = parseDateTime(row.created_at)?.getTime() ?? Number.NaN;
      if (!(at - lastSeen <= idleMs) || !(at - created <= absoluteMs)) {
        await database.writeTransaction((trx) =>
          consoleDb(trx).deleteFrom('console_session').where('id', '=', id).execute(),
        );
        return { kind: 'expired' };
      }
      if (at - lastSeen >= TOUCH_INTERVAL_MS) {
        await database.writeTransaction((trx) =>
          consoleDb(trx)
            .updateTable('console_session')
            .set({ last_seen_at: formatDateTime(new Date(at)) })
            .where('id', '=', id)
            .execute(),
        );
      }
      return {
        kind: 'active',
        session: {
          id,
          userId: row.user_id,
          csrfSecret: row.csrf_secret,
          credentialStamp: row.credential_stamp,
          signedInItems: parseItems(row.signed_in_items),
        },
      };
    },

    async destroy(sessionId) {
      await database.writeTransaction((trx) =>
        consoleDb(trx).deleteFrom('console_session').where('id', '=', sessionId).execute(),
      );
    },
  };
}

/**
 * The key that signs console cookies when `CONSOLE_SESSION_SECRET` is unset: created once (random, 48
 * bytes) and kept in `console_secret`, so that every server process and every restart signs alike.
 */
export async function loadCookieSecret(database: Database): Promise<string> {
  const db = consoleDb(database.db);
  const read = () =>
    db.selectFrom('console_secret').select('value').where('name', '=', 'cookie').executeTakeFirst();
  const existing = await read();
  if (existing !== undefined) return existing.value;
  await database.writeTransaction((trx) =>
    database.dialect
      .insertOrIgnore(
        consoleDb(trx)
          .insertInto('console_secret')
          .values({ name: 'cookie', value: randomBytes(48).toString('base64url') }),
        ['name'],
      )
      .execute(),
  );
  // Another process may have won the insert: its key is the one.
  return (await read())!.value;
}
