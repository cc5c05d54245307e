/** Problems found in a dataset document, each naming where it is: table, row index (0-based), column. */

export interface DatasetProblem {
  readonly table?: string;
  /** Index of the row in the document's array for the table, from 0. */
  readonly row?: number;
  readonly column?: string;
  readonly message: string;
}

/** `tables.patient[3].dob: expected a date` */
export function formatProblem(problem: DatasetProblem): string {
  let where = 'document';
  if (problem.table !== undefined) {
    where = `tables.${problem.table}`;
    if (problem.row !== undefined) where += `[${problem.row}]`;
    if (problem.column !== undefined) where += `.${problem.column}`;
  }
  return `${where}: ${problem.message}`;
}

/** The import refused the document; nothing was written. */
export class DatasetError extends Error {
  readonly problems: readonly DatasetProblem[];
  constructor(problems: readonly DatasetProblem[]) {
    super(
      `Dataset refused, nothing was imported:\n${problems.map((p) => `  - ${formatProblem(p)}`).join('\n')}`,
    );
    this.name = 'DatasetError';
    this.problems = problems;
  }
}

/** Collects problems up to a limit, so that one bad column in 100,000 rows does not print 100,000 lines. */
export class ProblemList {
  readonly items: DatasetProblem[] = [];
  readonly limit: number;
  constructor(limit = 25) {
    this.limit = limit;
  }
  add(problem: DatasetProblem): void {
    if (this.items.length < this.limit) this.items.push(problem);
  }
  get isFull(): boolean {
    return this.items.length >= this.limit;
  }
  throwIfAny(): void {
    if (this.items.length > 0) throw new DatasetError(this.items);
  }
}
