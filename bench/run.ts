/**
 * `npm run bench -- <name>|all [--dialect sqlite|postgres|mysql|both|all] [--duration S] [--connections 1,32]
 * [--warmup S]`: runs `bench/<name>.ts` (which exports `run(options)`) once per dialect, prints its table
 * and saves `bench/results/<name>-<dialect>-<timestamp>.json`. `all` runs every bench in `bench/`.
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { BenchReport, BenchRow, BenchRunOptions, Dialect } from './lib.ts';
import { ROOT_DIR, printTable, saveResults } from './lib.ts';

type BenchModule = { run?: (options: BenchRunOptions) => Promise<BenchReport | readonly BenchRow[]> };

/** Files in bench/ that are not benches: the harness, child process entries, type declarations. */
const NOT_BENCHES = /^(lib|run|floor)\.ts$|-server\.ts$|\.child\.ts$|\.d\.ts$|^_/;

const USAGE =
  'usage: npm run bench -- <name>|all [--dialect sqlite|postgres|mysql|both|all] [--duration S] [--connections 1,32] [--warmup S]';

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    args: process.argv.slice(2),
    allowPositionals: true,
    options: {
      dialect: { type: 'string', default: 'both' },
      duration: { type: 'string', default: '10' },
      connections: { type: 'string', default: '1,32' },
      warmup: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true || positionals.length !== 1) {
    process.stderr.write(`${USAGE}\n`);
    return values.help === true ? 0 : 2;
  }
  const dialects: Dialect[] =
    values.dialect === 'both'
      ? ['sqlite', 'postgres']
      : values.dialect === 'all'
        ? ['sqlite', 'postgres', 'mysql']
        : values.dialect === 'sqlite' || values.dialect === 'postgres' || values.dialect === 'mysql'
          ? [values.dialect]
          : [];
  const durationSeconds = Number(values.duration);
  const connections = values.connections.split(',').map((c) => Number(c.trim()));
  const warmupSeconds = values.warmup === undefined ? Math.min(2, durationSeconds) : Number(values.warmup);
  const problems = [
    dialects.length === 0
      ? '--dialect must be sqlite, postgres, mysql, both (sqlite and postgres) or all'
      : '',
    !Number.isFinite(durationSeconds) || durationSeconds < 1
      ? '--duration must be a number of seconds >= 1'
      : '',
    connections.some((c) => !Number.isInteger(c) || c < 1)
      ? '--connections must be positive integers, e.g. 1,32'
      : '',
    !Number.isFinite(warmupSeconds) || warmupSeconds < 0 ? '--warmup must be a number of seconds >= 0' : '',
  ].filter((p) => p !== '');
  if (problems.length > 0) {
    process.stderr.write(`${problems.join('\n')}\n${USAGE}\n`);
    return 2;
  }

  const benchDir = path.join(ROOT_DIR, 'bench');
  const name = positionals[0]!;
  const names =
    name === 'all'
      ? (await readdir(benchDir))
          .filter((f) => f.endsWith('.ts') && !NOT_BENCHES.test(f))
          .map((f) => f.slice(0, -3))
          .sort()
      : [name];

  let failures = 0;
  for (const benchName of names) {
    if (!/^[\w-]+$/.test(benchName)) {
      process.stderr.write(`bad bench name "${benchName}"\n`);
      return 2;
    }
    let bench: BenchModule;
    try {
      bench = (await import(path.join(benchDir, `${benchName}.ts`))) as BenchModule;
    } catch (error) {
      process.stderr.write(`cannot load bench/${benchName}.ts: ${String(error)}\n`);
      failures += 1;
      continue;
    }
    if (typeof bench.run !== 'function') {
      if (name !== 'all') {
        process.stderr.write(`bench/${benchName}.ts exports no run(options)\n`);
        failures += 1;
      }
      continue;
    }
    for (const dialect of dialects) {
      const options: BenchRunOptions = { dialect, durationSeconds, connections, warmupSeconds };
      process.stdout.write(
        `\n== ${benchName} on ${dialect} (Node ${process.version}, ${durationSeconds} s runs after ${warmupSeconds} s warm-up, connections ${connections.join(',')}) ==\n`,
      );
      try {
        const outcome = await bench.run(options);
        const report: BenchReport = Array.isArray(outcome) ? { rows: outcome } : (outcome as BenchReport);
        printTable(report.rows, report.notes);
        const file = await saveResults(benchName, report.rows, { notes: report.notes ?? [], options });
        process.stdout.write(`saved ${path.relative(ROOT_DIR, file)}\n`);
      } catch (error) {
        failures += 1;
        process.stderr.write(
          `bench ${benchName} on ${dialect} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
        );
      }
    }
  }
  return failures === 0 ? 0 : 1;
}

process.exitCode = await main();
