/**
 * The services that several route plugins (and the DIMSE receiver of the same process) share, built once
 * per process by its composition root (`src/main/server.ts`) and handed down: one audit trail, so that the
 * rows of every caller share its group commits; one queue intake, so that queue add, STOW-RS and DIMSE
 * share its reference cache; one attachment service and one patient search (with its reference data
 * cache) for the API and the console.
 */
import type { AppDeps } from './deps.ts';
import type { AttachmentService } from './modules/attachment/index.ts';
import { createAttachmentService } from './modules/attachment/index.ts';
import type { AuditTrail } from './modules/audit/index.ts';
import { createAuditTrail } from './modules/audit/index.ts';
import type { MissingPatientSource, PatientSearchService } from './modules/patient/index.ts';
import { createPatientSearchService } from './modules/patient/index.ts';
import type { IntakePace, IntakeService } from './modules/request-queue/index.ts';
import { createIntakeService } from './modules/request-queue/index.ts';

export interface AppServices {
  readonly auditTrail: AuditTrail;
  readonly intake: IntakeService;
  readonly attachments: AttachmentService;
  readonly patients: PatientSearchService;
}

/** Builds the shared services of one process from its dependencies. */
export function createAppServices(
  deps: AppDeps,
  options: {
    /** Intake paced to the queue worker of this process, when it runs one. */
    readonly intakePace?: IntakePace;
    /** The process's audit trail when the composition root built it first (for the PAS query). */
    readonly auditTrail?: AuditTrail;
    /** Asked by the patient search for an identifier no local patient holds (the PAS query). */
    readonly missingPatients?: MissingPatientSource;
  } = {},
): AppServices {
  return {
    auditTrail: options.auditTrail ?? createAuditTrail(deps.database),
    intake: createIntakeService({
      database: deps.database,
      config: deps.config,
      ...(options.intakePace === undefined ? {} : { pace: options.intakePace }),
    }),
    attachments: createAttachmentService(deps),
    patients: createPatientSearchService(
      deps,
      options.missingPatients === undefined ? {} : { missingPatients: options.missingPatients },
    ),
  };
}
