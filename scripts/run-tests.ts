/**
 * `npm test`: every `*.test.ts` under src/ and test/ with Node's test runner. SQLite always; PostgreSQL
 * too when TEST_DATABASE_URL is set, MariaDB/MySQL when TEST_MYSQL_URL is (each suite runs once per
 * dialect, see test/harness.ts).
 * Extra arguments are passed on, e.g. `npm test -- src/modules/patient`.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

function findTests(dir: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) found.push(...findTests(full));
    else if (name.endsWith('.test.ts')) found.push(full);
  }
  return found;
}

const args = process.argv.slice(2);
const filters = args.filter((a) => !a.startsWith('-'));
const flags = args.filter((a) => a.startsWith('-'));
const files = ['src', 'test']
  .flatMap((root) => findTests(root))
  .filter((f) => filters.length === 0 || filters.some((filter) => f.includes(filter)))
  .sort();
if (files.length === 0) {
  process.stderr.write('No test files matched\n');
  process.exit(1);
}
const engines = [
  'SQLite',
  ...(process.env.TEST_DATABASE_URL ? ['PostgreSQL'] : []),
  ...(process.env.TEST_MYSQL_URL ? ['MariaDB/MySQL'] : []),
];
const missing = [
  ...(process.env.TEST_DATABASE_URL ? [] : ['TEST_DATABASE_URL for PostgreSQL']),
  ...(process.env.TEST_MYSQL_URL ? [] : ['TEST_MYSQL_URL for MariaDB/MySQL']),
];
process.stdout.write(
  `Running ${files.length} test files on ${engines.join(', ')}${missing.length > 0 ? ` (set ${missing.join(', ')})` : ''}\n`,
);
const result = spawnSync(
  process.execPath,
  [
    '--test',
    '--test-concurrency=2',
    '--test-timeout=120000',
    '--disable-warning=ExperimentalWarning',
    ...flags,
    ...files,
  ],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
