/**
 * `npm run bench -- pas-query [--dialect sqlite|postgres|mysql|all]`: a patient unknown locally and
 * known to the PAS, matched within 1 s of the device's study arriving (issue 34's target). A PAS peer on
 * 127.0.0.1 (test/pas-peer.ts, MLLP framed by `@medplum/hl7`) answers QBP^Q22 with RSP^K21 for every
 * number; the service's queue worker runs in this process with `PAS_QUERY_HOST` set, as `npm start`'s
 * in-process worker does. Three rows of 50 studies each, one after the other, each for a number the
 * database lacks: a DICOM Part 10 file queued as a `dicom_request` (its PatientID, birth date and sex;
 * `DICOM_SEED`, `EXTRACT_IMAGE`, then `PATIENT_MATCH`), and a `PATIENT_MATCH` request carrying the keys
 * `DICOM_SEED` writes, with the PAS answering at once and 200 ms late. The time is from the enqueue (the
 * intake's write, which wakes the worker) to `matched_patient_id` committed, polled every 2 ms. The
 * DICOM receipt before the enqueue (STOW-RS, C-STORE) is measured by `dicom-receive`.
 */
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { createLogger } from '../src/logger.ts';
import { createAuditTrail } from '../src/modules/audit/index.ts';
import { createFilingCatalog } from '../src/modules/filing/index.ts';
import { createPasQuery } from '../src/modules/hl7/index.ts';
import { createQueueWorker, enqueueRequest } from '../src/modules/request-queue/index.ts';
import { createPasInstallation } from '../test/factories-pasapi.ts';
import { blobRow, buildDicomFile, createRequestType, jsonRow } from '../test/factories-queue.ts';
import type { PeerPatient } from '../test/pas-peer.ts';
import { startPasPeer } from '../test/pas-peer.ts';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BenchReport, BenchRow, BenchRunOptions } from './lib.ts';
import { percentile, prepareDatabase } from './lib.ts';

const STUDIES = 50;
const TARGET_MS = 1000;
const PATIENT: PeerPatient = { surname: 'Benchperson', given: 'Pat', dob: '19750607', sex: 'M' };

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const prepared = await prepareDatabase(options.dialect);
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-bench-pas-'));
  const peer = await startPasPeer();
  const database = await openDatabase(loadConfig({ DATABASE_URL: prepared.url }).database, { poolSize: 8 });
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  try {
    const pas = await createPasInstallation(database.db);
    const mapFile = path.join(dir, 'field-map.json');
    await writeFile(
      mapFile,
      JSON.stringify({ localIdentifiers: [{ authority: 'PAS', identifierType: pas.typeKey }] }),
    );
    const type = await createRequestType(database.db, { routineName: 'PATIENT_MATCH' });
    const config = loadConfig({
      ...prepared.env,
      LOG_LEVEL: 'silent',
      HL7_FIELD_MAP_FILE: mapFile,
      PAS_QUERY_HOST: '127.0.0.1',
      PAS_QUERY_PORT: String(peer.port),
      PAS_QUERY_TIMEOUT_MS: '2000',
    });
    const logger = createLogger('silent');
    const pasQuery = await createPasQuery({
      database,
      config,
      logger,
      auditTrail: createAuditTrail(database),
    });
    if (pasQuery === undefined) throw new Error('the PAS query is not configured');
    const worker = createQueueWorker({
      database,
      config,
      catalog: createFilingCatalog({ missingPatients: pasQuery }),
      logger,
    });
    await worker.start();
    let serial = 0;
    try {
      for (const { delayMs, isDicom } of [
        { delayMs: 0, isDicom: true },
        { delayMs: 0, isDicom: false },
        { delayMs: 200, isDicom: false },
      ]) {
        const times: number[] = [];
        for (let i = 0; i < STUDIES; i += 1) {
          serial += 1;
          const number = String(70_000_000 + serial);
          peer.set(number, { kind: 'found', patient: PATIENT, ...(delayMs === 0 ? {} : { delayMs }) });
          const uid = `1.2.826.0.1.3680043.8.498.${process.pid}.${serial}`;
          const started = performance.now();
          const { requestId } = await enqueueRequest(
            database,
            isDicom
              ? {
                  requestType: 'dicom_request',
                  attachments: [
                    jsonRow('REQUEST_DATA', {}),
                    blobRow(
                      'dicom',
                      'application/dicom',
                      buildDicomFile(
                        {
                          PatientID: number,
                          PatientName: `${PATIENT.surname}^${PATIENT.given}`,
                          PatientBirthDate: PATIENT.dob,
                          PatientSex: PATIENT.sex,
                          Modality: 'OP',
                          Manufacturer: 'Bench',
                          StudyInstanceUID: `${uid}.1`,
                          StudyDate: '20261204',
                        },
                        `${uid}.2`,
                      ),
                      'scan.dcm',
                    ),
                  ],
                }
              : {
                  requestType: type.requestType,
                  attachments: [
                    jsonRow('REQUEST_DATA', {
                      dicom_patient_id: number,
                      dicom_patient_birth_date: PATIENT.dob,
                      dicom_patient_sex: PATIENT.sex,
                    }),
                  ],
                },
          );
          for (;;) {
            const row = await database.db
              .selectFrom('attachment_data')
              .select('text_data')
              .where('request_id', '=', requestId)
              .where('attachment_mnemonic', '=', 'REQUEST_DATA')
              .executeTakeFirst();
            if (row?.text_data?.includes('"matched_patient_id"') === true) break;
            if (performance.now() - started > 30_000) throw new Error(`study ${i} not matched within 30 s`);
            await new Promise((resolve) => setTimeout(resolve, 2));
          }
          times.push(performance.now() - started);
        }
        const sorted = [...times].sort((a, b) => a - b);
        const name = `${isDicom ? 'DICOM file queued (seed, extract, match)' : 'PATIENT_MATCH request queued'} -> matched, PAS answers ${delayMs === 0 ? 'at once' : `after ${delayMs} ms`}`;
        const p50 = percentile(sorted, 50);
        const p99 = percentile(sorted, 99);
        const max = sorted[sorted.length - 1]!;
        const seconds = times.reduce((a, b) => a + b, 0) / 1000;
        rows.push({
          name,
          dialect: options.dialect,
          connections: 1,
          requestsPerSec: times.length / seconds,
          bytesPerSec: 0,
          p50Ms: p50,
          p99Ms: p99,
          totalRequests: times.length,
          durationSeconds: seconds,
          errors: 0,
          timeouts: 0,
          non2xx: 0,
          statusCounts: { matched: times.length },
        });
        notes.push(
          `${name}: p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${max.toFixed(1)} ms over ${times.length} studies; ` +
            `target <= ${TARGET_MS} ms: ${max <= TARGET_MS ? 'met' : 'missed'}`,
        );
      }
      notes.push(`PAS queries read by the peer: ${peer.received.length} (one per study)`);
    } finally {
      await worker.stop();
    }
  } finally {
    await database.close();
    await peer.close();
    await rm(dir, { recursive: true, force: true });
    await prepared.cleanup();
  }
  return { rows, notes };
}
