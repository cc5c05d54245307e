/**
 * CLI commands of the hl7 module: `pas replay FILE`, a site's backlog of HL7 v2 messages (plain, each
 * starting with an `MSH` line, or MLLP-framed; `hl7-file.ts`) applied in order through the listener's own
 * per-message path (`apply-message.ts`): the same checks, changes, `hl7_message` rows, duplicate answers
 * and audit rows as messages received on `HL7_PORT`.
 *
 * - A replay is an operator's action: the senders are not checked against `HL7_ALLOWED_SENDERS`, and
 *   MSH-3^MSH-4 stays each message's sender, so a message the listener applied already (or a replay run
 *   again) is answered as a duplicate, not applied twice. The audit rows carry the operating-system
 *   account and the command line's id, with no client address.
 * - The file is streamed (a batch of messages in memory at a time) and the messages are applied in
 *   order, `--batch` (default 100) per transaction, each in a savepoint of its own: each message comes
 *   to what it would alone after the ones before it, and the batch takes one commit and one flush to
 *   disk instead of one per message (`Hl7Applier.applyBatch`).
 * - Progress on stderr (messages, rate, AA/AE/AR, share of the file read) once a second or every
 *   `--progress-every` messages; a line per message answered AE or AR (its number, line, MSH-10, code and
 *   error code, never its fields or the reason's text: the reason is in `hl7_message`); the summary on
 *   stdout. A failure of the service itself (the database down) stops the replay there: run it again
 *   once mended, the messages applied before are answered as duplicates.
 * - Exit 0 when every message is applied (AA, now or before), 1 when any is answered AE or AR
 *   (`--stop-on-error`: at the first), 2 for a usage error.
 */
import { stat } from 'node:fs/promises';
import type { CliCommand, CliContext } from '../../cli/cli-types.ts';
import { EXIT_FAILURE, EXIT_OK, UsageError } from '../../cli/cli-types.ts';
import { formatSeconds } from '../../cli/progress.ts';
import { createLogger } from '../../logger.ts';
import { createAuditTrail } from '../audit/index.ts';
import type { Hl7Answer, Hl7Source } from './apply-message.ts';
import { createHl7Applier } from './apply-message.ts';
import type { Hl7FileItem } from './hl7-file.ts';
import { readHl7File } from './hl7-file.ts';

/** Messages applied per transaction: one commit (and one flush to disk) for many. */
const DEFAULT_BATCH = 100;

/** Lines printed for messages answered AE or AR, before only their count goes on. */
const MAX_PROBLEM_LINES = 100;

interface Counts {
  messages: number;
  applied: number;
  duplicates: number;
  ae: number;
  ar: number;
}

function wholeNumber(ctx: CliContext, name: string, min: number, max: number): number | undefined {
  const raw = ctx.options[name];
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (typeof raw !== 'string' || !Number.isInteger(value) || value < min || value > max)
    throw new UsageError(`--${name} must be a whole number from ${min} to ${max}, got "${String(raw)}"`);
  return value;
}

function shortError(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!;
}

const replayCommand: CliCommand = {
  words: ['pas', 'replay'],
  arguments: [{ name: 'file' }],
  options: {
    'stop-on-error': {
      type: 'boolean',
      description:
        'stop at the first message answered AE or AR (exit 1); the messages before it stay applied',
    },
    batch: {
      type: 'string',
      valueName: 'N',
      description: `messages per transaction (default ${DEFAULT_BATCH}; 1: one each, as the HL7 listener commits them)`,
    },
    'progress-every': {
      type: 'string',
      valueName: 'N',
      description: 'a progress line every N messages instead of once a second',
    },
  },
  summary:
    'apply a file of HL7 v2 messages (a backlog: plain or MLLP-framed) in order, as the HL7 listener would, duplicates answered and not applied twice',
  async run(ctx) {
    const file = ctx.args[0]!;
    const stopOnError = ctx.options['stop-on-error'] === true;
    const every = wholeNumber(ctx, 'progress-every', 1, 10_000_000);
    const batchSize = wholeNumber(ctx, 'batch', 1, 10_000) ?? DEFAULT_BATCH;
    let size: number;
    try {
      const info = await stat(file);
      if (!info.isFile()) throw new Error('not a file');
      size = info.size;
    } catch (error) {
      throw new UsageError(`cannot read ${file}: ${shortError(error)}`);
    }

    const auditTrail = createAuditTrail(ctx.database);
    const applier = createHl7Applier({
      database: ctx.database,
      config: ctx.config,
      // The command's own lines say what happened; no message field reaches a log.
      logger: createLogger('silent'),
      auditTrail,
    });
    const source: Hl7Source = {
      address: null,
      isOperator: true,
      username: ctx.actor.username,
      requestId: ctx.actor.invocationId,
    };
    const counts: Counts = { messages: 0, applied: 0, duplicates: 0, ae: 0, ar: 0 };
    const started = performance.now();
    let lastLineAt = started;
    let bytesRead = 0;
    let problemLines = 0;

    const rate = () => {
      const seconds = (performance.now() - started) / 1000;
      return seconds > 0 ? Math.round(counts.messages / seconds) : 0;
    };
    const tally = () =>
      `AA ${counts.applied + counts.duplicates} (duplicates ${counts.duplicates}), AE ${counts.ae}, AR ${counts.ar}`;
    const progressLine = () => {
      const share = size > 0 ? ` (${Math.floor((bytesRead / size) * 100)}% of the file)` : '';
      ctx.err(`pas replay: ${counts.messages} messages${share}, ${rate()}/s; ${tally()}`);
    };
    const problem = (item: Hl7FileItem, controlId: string, code: string, errorCode: string) => {
      problemLines += 1;
      if (problemLines > MAX_PROBLEM_LINES) return;
      const id = controlId === '' ? '' : `, MSH-10 ${controlId}`;
      ctx.err(`message ${counts.messages} (line ${item.line}${id}): ${code} ${errorCode}`);
      if (problemLines === MAX_PROBLEM_LINES) ctx.err(`(further AE and AR messages are counted, not listed)`);
    };

    let stopped: string | undefined;
    /** Answers a batch's messages in order; false once the replay stops. */
    const answer = (items: readonly Hl7FileItem[], answers: readonly Hl7Answer[]): boolean => {
      for (const [index, reply] of answers.entries()) {
        const item = items[index]!;
        counts.messages += 1;
        bytesRead = item.bytesRead;
        const code = reply.ack.code;
        if (code === 'AA') {
          if (reply.isDuplicate) counts.duplicates += 1;
          else counts.applied += 1;
        } else {
          if (code === 'AE') counts.ae += 1;
          else counts.ar += 1;
          const controlId = (reply.message?.getSegment('MSH')?.getField(10)?.toString() ?? '').slice(0, 64);
          const errorCode =
            item.problem === 'too-long' ? 'longer than HL7_MAX_MESSAGE_BYTES' : (reply.ack.errorCode ?? '');
          problem(item, controlId, code, `${errorCode}${reply.isDuplicate ? ' (duplicate)' : ''}`);
        }
        if (reply.failure !== undefined) {
          stopped = `the service failed at message ${counts.messages} (line ${item.line}): ${shortError(reply.failure)}; nothing from there on is applied: run the replay again once mended (the messages applied are answered as duplicates)`;
          return false;
        }
        if (stopOnError && code !== 'AA') {
          stopped = `stopped at message ${counts.messages} (line ${item.line}), answered ${code} (--stop-on-error)`;
          return false;
        }
        const now = performance.now();
        if (every === undefined ? now - lastLineAt >= 1000 : counts.messages % every === 0) {
          lastLineAt = now;
          progressLine();
        }
      }
      return true;
    };

    let batch: Hl7FileItem[] = [];
    const applyBatch = async (): Promise<boolean> => {
      const items = batch;
      batch = [];
      const answers = await applier.applyBatch(
        items.map((item) => item.bytes),
        source,
        { stopOnError },
      );
      return answer(items, answers);
    };
    for await (const item of readHl7File(file, { maxMessageBytes: ctx.config.hl7.maxMessageBytes })) {
      batch.push(item);
      if (batch.length >= batchSize && !(await applyBatch())) break;
    }
    if (stopped === undefined && batch.length > 0) await applyBatch();
    await auditTrail.flush();
    progressLine();
    if (stopped !== undefined) ctx.err(stopped);
    ctx.out(
      `Replayed ${counts.messages} message(s) in ${formatSeconds((performance.now() - started) / 1000)} (${rate()}/s): ${counts.applied} applied, ${counts.duplicates} answered AA before (duplicates), ${counts.ae} AE, ${counts.ar} AR`,
    );
    return counts.ae + counts.ar === 0 && stopped === undefined ? EXIT_OK : EXIT_FAILURE;
  },
};

export const pasCommands: readonly CliCommand[] = [replayCommand];
