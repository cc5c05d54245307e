/**
 * The shape of the OpenAPI 3.1 document this service generates (`openapi.ts`) and renders (`docs-page.ts`).
 */

export type JsonSchema = Record<string, unknown>;

export interface OpenApiDocument {
  readonly openapi: '3.1.0';
  readonly info: { title: string; version: string; description: string };
  readonly paths: Record<string, Record<string, OpenApiOperation>>;
  readonly components: { securitySchemes: Record<string, unknown> };
  readonly tags: readonly { name: string; description: string }[];
}

export interface OpenApiOperation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  parameters?: unknown[];
  requestBody?: unknown;
  security: Record<string, string[]>[];
  responses: Record<string, OpenApiResponse>;
  'x-required-operation'?: string;
}

export interface OpenApiResponse {
  description: string;
  headers?: Record<string, { description: string; schema: JsonSchema }>;
  content?: Record<string, { schema: JsonSchema }>;
}
