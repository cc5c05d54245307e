/**
 * Factories for tests that need the PAS's HL7 feed beside the app: a field map file whose local
 * identifier type has a fixed key (so that it can be configured before the database holds the type),
 * the type itself, ADT messages for synthetic patients, and a running MLLP listener with a client that
 * reads acknowledgements.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Hl7Message } from '@medplum/core';
import { Hl7Client } from '@medplum/hl7';
import type { Kysely } from 'kysely';
import type { DB } from '../src/db/schema.ts';
import { createLogger } from '../src/logger.ts';
import { createAuditTrail } from '../src/modules/audit/index.ts';
import type { Hl7Server } from '../src/modules/hl7/index.ts';
import { startHl7Server } from '../src/modules/hl7/index.ts';
import { createInstitution, unique } from './factories.ts';
import { createIdentifierType } from './factories-patient.ts';
import type { TestApp } from './harness.ts';

/** The `unique_row_string` of the local identifier type the feed's field map names. */
export const FEED_TYPE_KEY = 'LOCAL-FEED-0';

/** The environment of an app with the feed's settings (listener on port 0, 127.0.0.1, sender PAS^RHS). */
export async function pasFeedEnv(dir: string): Promise<Record<string, string>> {
  const mapFile = path.join(dir, 'field-map.json');
  await writeFile(
    mapFile,
    JSON.stringify({ localIdentifiers: [{ authority: 'PAS', identifierType: FEED_TYPE_KEY }] }),
  );
  return {
    HL7_PORT: '0',
    HL7_HOST: '127.0.0.1',
    HL7_ALLOWED_SENDERS: 'PAS^RHS@127.0.0.0/8',
    HL7_FIELD_MAP_FILE: mapFile,
  };
}

/** The local identifier type of the field map, at a new institution; its id. */
export async function createFeedIdentifierType(db: Kysely<DB>): Promise<number> {
  const institutionId = await createInstitution(db, {
    remote_id: unique('F').slice(0, 10),
    name: 'PAS Hospital',
  });
  return createIdentifierType(db, {
    institution_id: institutionId,
    usage_type: 'LOCAL',
    unique_row_string: FEED_TYPE_KEY,
  });
}

let controlCounter = 0;
export const newControlId = (): string => `C${process.pid}-${Date.now()}-${(controlCounter += 1)}`;

/** An ADT patient message (A28 or A08; segments ended by CR) for a synthetic patient. */
export function adtMessage(values: {
  readonly event: 'A28' | 'A08';
  readonly controlId: string;
  readonly hospitalNumber: string;
  readonly surname?: string;
  readonly dob?: string;
}): string {
  const structure = values.event === 'A28' ? 'ADT_A05' : 'ADT_A01';
  return [
    `MSH|^~\\&|PAS|RHS|CRA|EYE|20260301120000||ADT^${values.event}^${structure}|${values.controlId}|P|2.4|||AL|NE`,
    `EVN|${values.event}|20260301120000`,
    `PID|1||${values.hospitalNumber}^^^PAS^MR||${values.surname ?? 'Testperson'}^Alex^^^Ms||${values.dob ?? '19800214'}|F|||1 Test Road^^Testtown^^TE1 1ST^^H`,
  ].join('\r');
}

export interface PasFeed {
  readonly server: Hl7Server;
  /** Sends `text` and resolves to its acknowledgement's MSA-1 and MSA-3. */
  send(text: string): Promise<{ code: string; text: string }>;
  stop(): Promise<void>;
}

/** Starts the MLLP listener of `app`'s settings on the app's database, and a client of it. */
export async function startPasFeed(app: TestApp): Promise<PasFeed> {
  const server = await startHl7Server({
    database: app.database,
    config: app.config,
    logger: createLogger('silent'),
    auditTrail: createAuditTrail(app.database),
  });
  const client = new Hl7Client({ host: '127.0.0.1', port: server.port });
  return {
    server,
    async send(text) {
      const ack = await client.sendAndWait(Hl7Message.parse(text), { timeoutMs: 20_000 });
      const msa = ack.getSegment('MSA');
      return { code: msa?.getField(1)?.toString() ?? '', text: msa?.getField(3)?.toString() ?? '' };
    },
    async stop() {
      await client.close();
      await server.stop();
    },
  };
}
