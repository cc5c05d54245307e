export { signatureRoutes } from './signature.routes.ts';
