/**
 * The operations console module: server-rendered pages at `/console/` for request admin, the signature
 * import log (manual crop, manual ignore), attachments and the audit log. It owns its session tables
 * (migration 0013) and writes no other table: every change goes through the owning module's `index.ts`.
 */
export { CONSOLE_PREFIX } from './console-guard.ts';
export { CONSOLE_CSP, consoleRoutes } from './console.routes.ts';
