/**
 * Progress of long CLI work (`import`, `export`, `demo-data`, `audit export`), on stderr so that stdout
 * keeps only data. On a terminal, `cli-progress` draws a bar with the rate and the ETA; anywhere else (a
 * log file, CI, a pipe) the same library prints one plain line every few seconds, so that a long import
 * shows life without flooding a log. The command prints its own summary line when done.
 */
import type { Writable } from 'node:stream';
import cliProgress from 'cli-progress';

export interface ProgressOptions {
  /** What is being done, for example `Importing`. */
  readonly label: string;
  /** Units counted, for example `rows`; `bytes` is shown in MB. */
  readonly unit: string;
  /** The amount of work, when known; unknown totals show the count and the rate only. */
  readonly total?: number;
}

export interface ProgressReporter {
  /** Sets the amount done (and the total, when it became known). */
  update(done: number, total?: number): void;
  /** Adds to the amount done. */
  increment(amount?: number): void;
  /** Draws the last state and releases the terminal line; safe to call twice. */
  stop(): void;
}

export interface ProgressSettings {
  /** Interval of the plain lines when stderr is not a terminal. */
  readonly plainIntervalMs: number;
}

export const DEFAULT_PLAIN_INTERVAL_MS = 5000;

interface Payload {
  readonly label: string;
  readonly unit: string;
  readonly hasTotal: boolean;
}

/** A factory of progress reporters writing to `stream` (a terminal when its `isTTY` is true). */
export function createProgressFactory(
  stream: Writable & { isTTY?: boolean },
  settings: ProgressSettings = { plainIntervalMs: DEFAULT_PLAIN_INTERVAL_MS },
): (options: ProgressOptions) => ProgressReporter {
  const isTerminal = stream.isTTY === true;
  return (options) => {
    const payload: Payload = {
      label: options.label,
      unit: options.unit,
      hasTotal: options.total !== undefined,
    };
    const bar = new cliProgress.SingleBar({
      stream,
      noTTYOutput: true,
      notTTYSchedule: settings.plainIntervalMs,
      // Ctrl-C and SIGTERM keep their default meaning (the library would otherwise hold them).
      gracefulExit: false,
      hideCursor: false,
      // Off a terminal each line already ends with a newline: no empty line after the last one.
      clearOnComplete: !isTerminal,
      etaBuffer: 50,
      etaAsynchronousUpdate: true,
      format: (_options, params) => formatLine(payload, params, isTerminal),
    });
    let done = 0;
    let total = options.total ?? 0;
    let isStopped = false;
    bar.start(total, 0);
    return {
      update(value, newTotal) {
        done = value;
        if (newTotal !== undefined && newTotal !== total) {
          total = newTotal;
          bar.setTotal(newTotal);
        }
        bar.update(done);
      },
      increment(amount = 1) {
        done += amount;
        bar.update(done);
      },
      stop() {
        if (isStopped) return;
        isStopped = true;
        bar.stop();
      },
    };
  };
}

interface BarParams {
  readonly value: number;
  readonly total: number;
  readonly progress: number;
  readonly startTime: number | null;
  readonly eta: number;
  readonly barsize?: number;
}

function formatLine(payload: Payload, params: BarParams, isTerminal: boolean): string {
  const elapsedSeconds = params.startTime === null ? 0 : (Date.now() - params.startTime) / 1000;
  const rate = params.value / Math.max(elapsedSeconds, 0.001);
  const hasTotal = payload.hasTotal && params.total > 0;
  const parts: string[] = [];
  if (hasTotal) {
    const percent = `${Math.min(100, Math.floor(params.progress * 100))}%`;
    parts.push(isTerminal ? `${bar(params.progress, 30)} ${percent}` : percent);
    parts.push(
      `${formatAmount(params.value, payload.unit, false)} / ${formatAmount(params.total, payload.unit)}`,
    );
  } else {
    parts.push(formatAmount(params.value, payload.unit));
  }
  parts.push(`${formatAmount(rate, payload.unit)}/s`);
  if (hasTotal && params.value < params.total && params.value > 0) {
    parts.push(`ETA ${formatSeconds((params.total - params.value) / rate)}`);
  }
  parts.push(`elapsed ${formatSeconds(elapsedSeconds)}`);
  return `${payload.label} ${parts.join(' | ')}`;
}

function bar(progress: number, width: number): string {
  const filled = Math.max(0, Math.min(width, Math.round(progress * width)));
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]`;
}

function formatAmount(n: number, unit: string, withUnit = true): string {
  const text = unit === 'bytes' ? (n / 1_000_000).toFixed(1) : Math.round(n).toLocaleString('en-US');
  if (!withUnit) return text;
  return `${text} ${unit === 'bytes' ? 'MB' : unit}`;
}

/** `42 s`, `3 min 05 s`, `2 h 07 min`. */
export function formatSeconds(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}
