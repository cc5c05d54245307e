/**
 * The test runner: every `*.test.ts` under src/ and test/ with Node's test runner. SQLite always;
 * PostgreSQL too when TEST_DATABASE_URL is set, MariaDB/MySQL when TEST_MYSQL_URL is (each suite runs
 * once per dialect, see test/harness.ts).
 *
 * - `npm test`: the fast path, every file that needs nothing but Node and the databases, files in
 *   parallel (each has its own database, files directory and app on port 0).
 * - `npm run test:all`: those, then the files with needs (real servers and tools, child processes,
 *   long runs), fewer at a time. A tool that a file needs and this machine lacks fails the run before
 *   any test starts, instead of the tests skipping in silence.
 * - `npm test -- <filter>...` (or `test:all -- <filter>`): only the files whose path contains a
 *   filter, whatever they need. Other arguments starting with `-` are passed on to `node --test`.
 * - `node scripts/run-tests.ts --list`: every file with its needs, without running anything.
 *
 * A file's needs are what it imports (playwright-core, test/orthanc.ts, test/dcmtk.ts,
 * test/dicom-corpus.ts, test/private-mariadb.ts), the tools that it or the helpers under test/ it imports
 * name (`'pdf2dcm'`, `'opj_decompress'`, `'mllp_send'`, `'chromium'`...), and what it declares on a line of its own:
 * `// test-needs: processes, long`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { createTemplates } from '../test/database-templates.ts';
import { orthancMissing } from '../test/orthanc.ts';

/** What a test file may need beyond Node and the databases, and how to tell that this machine has it. */
const NEEDS = {
  /** Chromium driven by playwright-core. */
  browser: () =>
    missingFile(process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', 'Chromium (or set CHROMIUM_PATH)'),
  /** Orthanc with its DICOMweb plugin. */
  orthanc: orthancMissing,
  /** dcmtk's command-line tools. */
  dcmtk: () =>
    missingTools([
      'storescu',
      'echoscu',
      'dcmdump',
      'dump2dcm',
      'img2dcm',
      'pdf2dcm',
      'dcmcjpeg',
      'dcm2pnm',
      'findscu',
      'wlmscpfs',
    ]),
  /** `mllp_send`, an independent HL7 MLLP client (Debian python3-hl7). */
  hl7: () => missingTools(['mllp_send']),
  /** OpenJPEG's tools (Debian libopenjp2-tools). */
  openjpeg: () => missingTools(['opj_decompress', 'opj_dump']),
  /** The DICOM test corpus of python3-pydicom, in DICOM_CORPUS_DIR. */
  corpus: () =>
    process.env.DICOM_CORPUS_DIR
      ? missingFile(path.join(process.env.DICOM_CORPUS_DIR, 'test_files'), 'DICOM_CORPUS_DIR/test_files')
      : 'DICOM_CORPUS_DIR is not set (the pydicom/data folder of python3-pydicom, see .ci/run)',
  /** Starts the server, worker or CLI as child processes (several servers, kills, signals). */
  processes: () => undefined,
  /** Runs long by design: fuzzing, loads held for seconds, waits on real timeouts. */
  long: () => undefined,
} satisfies Record<string, () => string | undefined>;
type Need = keyof typeof NEEDS;

/** Needs that a file's imports, or the tools it or its helpers under test/ name, imply. */
const INFERRED_NEEDS: readonly (readonly [RegExp, Need])[] = [
  [/from 'playwright-core'|['"`]chromium['"`]/, 'browser'],
  [/from '[./]*\/(test\/)?orthanc\.ts'/, 'orthanc'],
  [
    /from '[./]*\/(test\/)?dcmtk\.ts'|['"`](storescu|echoscu|dcmdump|dump2dcm|img2dcm|pdf2dcm|dcmcjpeg|dcm2pnm|dcmj2pnm|dcml2pnm|findscu|wlmscpfs)['"`]/,
    'dcmtk',
  ],
  [/['"`]opj_(decompress|dump|compress)['"`]/, 'openjpeg'],
  [/['"`]mllp_send['"`]/, 'hl7'],
  [/from '[./]*\/(test\/)?dicom-corpus\.ts'|DICOM_CORPUS_DIR/, 'corpus'],
  [/from '[./]*\/(test\/)?private-mariadb\.ts'/, 'processes'],
];
const DECLARED = /^\/\/ test-needs: (.*)$/gm;
/** A fast file that must have a process of its own (it observes the whole process: its memory, its loop). */
const OWN_PROCESS = /^\/\/ test-isolation: process$/m;

function missingFile(file: string, what: string): string | undefined {
  return existsSync(file) ? undefined : `${what}: ${file} is missing`;
}

function missingTools(tools: readonly string[]): string | undefined {
  const dirs = (process.env.PATH ?? '').split(path.delimiter).filter((dir) => dir !== '');
  const isOnPath = (tool: string) =>
    dirs.some((dir) => {
      try {
        accessSync(path.join(dir, tool), constants.X_OK);
        return true;
      } catch {
        return false;
      }
    });
  const missing = tools.filter((tool) => !isOnPath(tool));
  return missing.length === 0 ? undefined : `not on PATH: ${missing.join(', ')}`;
}

function findTests(dir: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) found.push(...findTests(full));
    else if (name.endsWith('.test.ts')) found.push(full);
  }
  return found;
}

/** The text of `file` and of the helpers under test/ that it imports, directly or through each other. */
function textWithHelpers(file: string, seen = new Set<string>()): string {
  seen.add(file);
  const text = readFileSync(file, 'utf8');
  const helpers = [...text.matchAll(/from '(\.[^']*\.ts)'/g)]
    .map(([, relative]) => path.join(path.dirname(file), relative!))
    .filter(
      // A `from '...'` inside a string (a lint fixture's source) names no file: only files that exist count.
      (helper) =>
        helper.startsWith(`test${path.sep}`) &&
        !helper.endsWith('.test.ts') &&
        !seen.has(helper) &&
        existsSync(helper),
    );
  return [text, ...helpers.map((helper) => textWithHelpers(helper, seen))].join('\n');
}

function needsOf(file: string): Set<Need> {
  const text = readFileSync(file, 'utf8');
  const needs = new Set<Need>();
  const inferable = textWithHelpers(file);
  for (const [pattern, need] of INFERRED_NEEDS) if (pattern.test(inferable)) needs.add(need);
  for (const [, list] of text.matchAll(DECLARED)) {
    for (const word of list!.split(/[\s,]+/).filter((w) => w !== '')) {
      if (!Object.hasOwn(NEEDS, word)) {
        throw new Error(`${file}: unknown test need "${word}" (known: ${Object.keys(NEEDS).join(', ')})`);
      }
      needs.add(word as Need);
    }
  }
  return needs;
}

const args = process.argv.slice(2);
const isAll = args.includes('--all');
const isList = args.includes('--list');
const filters = args.filter((a) => !a.startsWith('-'));
const flags = args.filter((a) => a.startsWith('-') && a !== '--all' && a !== '--list');
const files = ['src', 'test']
  .flatMap((root) => findTests(root))
  .filter((f) => filters.length === 0 || filters.some((filter) => f.includes(filter)))
  .sort()
  .map((file) => ({
    file,
    needs: needsOf(file),
    isOwnProcess: OWN_PROCESS.test(readFileSync(file, 'utf8')),
  }));
if (isList) {
  for (const { file, needs } of files) process.stdout.write(`${file}\t${[...needs].join(', ') || '-'}\n`);
  process.exit(0);
}
const fast = files.filter((f) => f.needs.size === 0);
const withNeeds = files.filter((f) => f.needs.size > 0);
// Without a filter, `npm test` is the fast path; a filter names files to run whatever they need.
const slow = isAll || filters.length > 0 ? withNeeds : [];
if (fast.length + slow.length === 0) {
  process.stderr.write('No test files matched\n');
  process.exit(1);
}

const problems = [...new Set(slow.flatMap((f) => [...f.needs]))].flatMap((need) => {
  const problem = NEEDS[need]();
  if (problem === undefined) return [];
  const users = slow.filter((f) => f.needs.has(need)).map((f) => f.file);
  return [`${need}: ${problem}\n    needed by ${users.join(', ')}`];
});
if (problems.length > 0) {
  process.stderr.write(`Cannot run these test files here:\n  ${problems.join('\n  ')}\n`);
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
  `Running ${fast.length + slow.length} test files on ${engines.join(', ')}${missing.length > 0 ? ` (set ${missing.join(', ')})` : ''}` +
    (slow.length === 0 && withNeeds.length > 0
      ? `; ${withNeeds.length} files with needs are left to npm run test:all\n`
      : '\n'),
);

// Every test file is its own Node process that strips the types of the same few hundred modules:
// Node's compile cache keeps that work between processes and runs (it checks each module's source).
// The databases start as copies of a migrated template (test/database-templates.ts).
const templates = await createTemplates(process.env.TEST_DATABASE_URL);
const env = {
  ...process.env,
  NODE_COMPILE_CACHE:
    process.env.NODE_COMPILE_CACHE ?? path.resolve('node_modules', '.cache', 'node-compile'),
  ...templates.env,
};

/** Runs `testFiles` with `concurrency` files at a time; true when every test passed. */
function runFiles(testFiles: readonly string[], concurrency: number): boolean {
  if (testFiles.length === 0) return true;
  const result = spawnSync(
    process.execPath,
    [
      '--test',
      `--test-concurrency=${concurrency}`,
      '--test-timeout=120000',
      // A file whose tests have all finished exits even if a handle is still open (a hook that failed
      // part way, before it could close a database): without this one such file holds the run forever.
      '--test-force-exit',
      '--disable-warning=ExperimentalWarning',
      ...flags,
      ...testFiles,
    ],
    { stdio: 'inherit', env },
  );
  return result.status === 0;
}

/**
 * Runs `testFiles` in `count` processes, each running its share of the files one after another in the
 * one process (`--experimental-test-isolation=none`): a process per file spent about 1.4 CPU-s on Node,
 * the imports and its first app, two thirds of the suite's CPU. Files are shared out by size (a
 * stand-in for their duration); each process's report is printed once it ends. True when every test passed.
 */
async function runShared(testFiles: readonly string[], count: number): Promise<boolean> {
  if (testFiles.length === 0) return true;
  const shards: { files: string[]; bytes: number }[] = Array.from({ length: count }, () => ({
    files: [],
    bytes: 0,
  }));
  const sized = testFiles.map((file) => ({ file, bytes: statSync(file).size }));
  for (const { file, bytes } of sized.sort((a, b) => b.bytes - a.bytes)) {
    const lightest = shards.reduce((min, shard) => (shard.bytes < min.bytes ? shard : min));
    lightest.files.push(file);
    lightest.bytes += bytes;
  }
  const results = await Promise.all(
    shards
      .filter((shard) => shard.files.length > 0)
      .map(
        (shard) =>
          new Promise<boolean>((resolve) => {
            const child = spawn(
              process.execPath,
              [
                '--test',
                '--experimental-test-isolation=none',
                '--test-timeout=120000',
                '--test-force-exit',
                '--disable-warning=ExperimentalWarning',
                ...flags,
                ...shard.files,
              ],
              { stdio: ['ignore', 'pipe', 'pipe'], env },
            );
            const output: Buffer[] = [];
            child.stdout.on('data', (chunk: Buffer) => output.push(chunk));
            child.stderr.on('data', (chunk: Buffer) => output.push(chunk));
            child.once('close', (code) => {
              process.stdout.write(Buffer.concat(output));
              resolve(code === 0);
            });
          }),
      ),
  );
  return results.every(Boolean);
}

// Fast files mostly wait on their database and sockets: one more process than cores keeps the cores
// busy. The few that need a process of their own then run as the files with needs do.
// Files with needs start servers, browsers and loads of their own, and some measure time: two at a time.
const isSharedPassed = await runShared(
  fast.filter((f) => !f.isOwnProcess).map((f) => f.file),
  availableParallelism() + 1,
);
const isFastPassed =
  runFiles(
    fast.filter((f) => f.isOwnProcess).map((f) => f.file),
    Math.max(2, availableParallelism() * 2),
  ) && isSharedPassed;
if (slow.length > 0) process.stdout.write(`Running ${slow.length} test files with needs\n`);
const isSlowPassed = runFiles(
  slow.map((f) => f.file),
  2,
);
await templates.drop();
process.exit(isFastPassed && isSlowPassed ? 0 : 1);
