/**
 * Keyset paging with a bounded cost per page, for filtered lists over large tables (the console's
 * request, import log and audit lists). A page is read newest first in key order; candidates come from
 * an index in windows of a fixed number of keys, and each window is filtered in SQL. The scan stops at
 * a full page, at the end of the candidates, or when the time budget is spent: then the page carries the
 * key the scan reached, and the next page continues below it. A filter that matches one row in a million
 * therefore costs a bounded time per page instead of a full table scan, and the operator sees how far
 * the search has looked.
 */

/** What one window of candidates gave. */
export interface ScanWindow<Row, Key> {
  /** The candidates of the window that pass every filter, in key order (newest first). */
  readonly rows: readonly Row[];
  /** The last (oldest) key of the window; undefined when there was no candidate at all. */
  readonly lastKey: Key | undefined;
  /** The window held fewer candidates than asked: nothing older remains. */
  readonly isExhausted: boolean;
}

export interface ScanPage<Row, Key> {
  readonly rows: readonly Row[];
  /** Where the next page starts (exclusive); undefined at the end of the list. */
  readonly next: Key | undefined;
  /** The page ended because the time budget was spent before it was full. */
  readonly isPartial: boolean;
}

export interface ScanOptions<Row, Key> {
  readonly pageSize: number;
  /** Stop scanning new windows after this long (ms); the first window always runs. 0 = no budget. */
  readonly budgetMs: number;
  /** Start below this key (exclusive), or at the newest row. */
  readonly start: Key | undefined;
  /** Reads the window of candidates below `after` (exclusive), returning at most `limit` matching rows. */
  readWindow(after: Key | undefined, limit: number): Promise<ScanWindow<Row, Key>>;
  keyOf(row: Row): Key;
  /** The clock (ms); tests may inject one. */
  readonly now?: () => number;
}

/** Reads one page (see the file comment). */
export async function scanPage<Row, Key>(options: ScanOptions<Row, Key>): Promise<ScanPage<Row, Key>> {
  const now = options.now ?? (() => performance.now());
  const startedAt = now();
  const rows: Row[] = [];
  let after = options.start;
  for (;;) {
    const window = await options.readWindow(after, options.pageSize + 1 - rows.length);
    rows.push(...window.rows);
    if (rows.length > options.pageSize) {
      const page = rows.slice(0, options.pageSize);
      return { rows: page, next: options.keyOf(page.at(-1)!), isPartial: false };
    }
    if (window.isExhausted || window.lastKey === undefined)
      return { rows, next: undefined, isPartial: false };
    after = window.lastKey;
    if (options.budgetMs > 0 && now() - startedAt >= options.budgetMs) {
      return { rows, next: after, isPartial: true };
    }
  }
}
