/**
 * The audit module: the append-only `audit_event` trail of every audited API call, its
 * group-commit writer and app hook, and the `audit export` CLI command. Other modules import it only
 * through this file; a route handler tells the trail what it touched with
 * `request.audit = { targetType, targetIds }`.
 */
export type {
  AuditActor,
  AuditAnnotation,
  AuditRefusal,
  AuditTargetType,
  AuditedRoute,
  RouteAudit,
} from './audit-hook.ts';
export { idParameter, installAuditTrail } from './audit-hook.ts';
export type { AuditSink, AuditSinkStats } from './audit-sink.ts';
export { auditSinkGauges } from './audit-sink-gauges.ts';
export type { AuditEntry, AuditTrail } from './audit-trail.ts';
export { createAuditTrail } from './audit-trail.ts';
export type { AuditExportRange, AuditExportRecord } from './audit-export.ts';
export { exportAuditEvents, parseIsoDateTime, readAuditEvents } from './audit-export.ts';
export type { AuditEventRow } from './audit.queries.ts';
export type { AuditKey, AuditSearchFilter, AuditSearchOptions, AuditSearchPage } from './audit-search.ts';
export { csvLine, readAuditSelection, searchAuditEvents } from './audit-search.ts';
export type { CliAuditAction, CliAuditNote } from './cli-audit.ts';
export { runAuditedCliAction } from './cli-audit.ts';
export { findLastActivity } from './audit.queries.ts';
