/**
 * The `/docs` page: the OpenAPI document rendered to plain HTML on the server, with one inline style and
 * no script, font or CDN (the service may run on a hospital network without internet access).
 */
import type { OpenApiDocument, OpenApiOperation, OpenApiResponse } from './openapi-document.ts';

const STYLE = `
body{font:15px/1.5 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:1rem 1.5rem;color:#1b1f24}
h1{margin-bottom:0}h2{border-bottom:1px solid #ccd;margin-top:2.5rem}
section.op{border:1px solid #d7dbe0;border-radius:6px;margin:1rem 0;padding:.5rem 1rem}
section.refused{opacity:.75}
.m{display:inline-block;min-width:4.5rem;font-weight:700;font-family:ui-monospace,monospace}
code,pre{font-family:ui-monospace,monospace;font-size:13px;background:#f3f5f7;border-radius:4px}
code{padding:0 .25rem}pre{padding:.5rem;overflow:auto;max-height:20rem}
table{border-collapse:collapse;width:100%}td,th{border-top:1px solid #e3e6ea;padding:.25rem .5rem;
text-align:left;vertical-align:top}.auth{color:#8a4b00}details summary{cursor:pointer}
`;

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** Inline `code` spans from backquotes, everything else escaped. */
function prose(text: string): string {
  return escapeHtml(text).replace(/`([^`]+)`/g, '<code>$1</code>');
}

function schemaBlock(schema: unknown): string {
  return `<details><summary>schema</summary><pre>${escapeHtml(JSON.stringify(schema, null, 2))}</pre></details>`;
}

function responseRow(status: string, response: OpenApiResponse): string {
  const headers = Object.entries(response.headers ?? {})
    .map(([name, h]) => `<br><code>${escapeHtml(name)}</code>: ${prose(h.description)}`)
    .join('');
  const content = Object.entries(response.content ?? {})
    .map(([type, c]) => `<code>${escapeHtml(type)}</code>${schemaBlock(c.schema)}`)
    .join('');
  return `<tr><td><b>${escapeHtml(status)}</b></td><td>${prose(response.description)}${headers}</td><td>${content}</td></tr>`;
}

function parameterRows(parameters: readonly unknown[]): string {
  return parameters
    .map((p) => {
      const parameter = p as {
        name: string;
        in: string;
        required?: boolean;
        description?: string;
        schema?: unknown;
      };
      return (
        `<tr><td><code>${escapeHtml(parameter.name)}</code>${parameter.required === true ? ' (required)' : ''}</td>` +
        `<td>${escapeHtml(parameter.in)}</td><td>${prose(parameter.description ?? '')}</td>` +
        `<td><code>${escapeHtml(JSON.stringify(parameter.schema ?? {}))}</code></td></tr>`
      );
    })
    .join('');
}

function operationSection(method: string, path: string, op: OpenApiOperation): string {
  const isRefused = Object.keys(op.responses).every((s) => s === '405') || op.summary.startsWith('Refused');
  const security =
    op.security.length === 0
      ? 'No authentication.'
      : `Authentication: ${op.security.map((s) => Object.keys(s).join(' + ')).join(' or ')}` +
        (op['x-required-operation'] === undefined ? '' : `, operation ${op['x-required-operation']}`) +
        '.';
  const parts = [
    `<section class="op${isRefused ? ' refused' : ''}" id="${escapeHtml(op.operationId)}">`,
    `<h3><span class="m">${escapeHtml(method.toUpperCase())}</span> <code>${escapeHtml(path)}</code> ${prose(op.summary)}</h3>`,
    `<p class="auth">${escapeHtml(security)}</p>`,
  ];
  if (op.description !== undefined) parts.push(`<p>${prose(op.description)}</p>`);
  if (op.parameters !== undefined && op.parameters.length > 0)
    parts.push(
      `<table><tr><th>Parameter</th><th>In</th><th>Meaning</th><th>Schema</th></tr>${parameterRows(op.parameters)}</table>`,
    );
  if (op.requestBody !== undefined) parts.push(`<p>Request body:</p>${schemaBlock(op.requestBody)}`);
  parts.push(
    `<table><tr><th>Status</th><th>Meaning</th><th>Body</th></tr>${Object.entries(op.responses)
      .map(([status, response]) => responseRow(status, response))
      .join('')}</table>`,
    '</section>',
  );
  return parts.join('\n');
}

/** The whole page. */
export function renderDocsPage(document: OpenApiDocument): string {
  const byTag = new Map<string, string[]>();
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const tag = op.tags[0] ?? 'other';
      const list = byTag.get(tag) ?? [];
      list.push(operationSection(method, path, op));
      byTag.set(tag, list);
    }
  }
  const sections = document.tags
    .filter((t) => byTag.has(t.name))
    .map(
      (t) =>
        `<h2 id="tag-${escapeHtml(t.name)}">${escapeHtml(t.name)}</h2><p>${prose(t.description)}</p>${byTag.get(t.name)!.join('\n')}`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(document.info.title)}</title><style>${STYLE}</style></head>
<body><h1>${escapeHtml(document.info.title)}</h1><p>Version ${escapeHtml(document.info.version)} ·
OpenAPI ${escapeHtml(document.openapi)} document: <a href="/api/v1/openapi.json">/api/v1/openapi.json</a></p>
<p>${prose(document.info.description)}</p>
<nav>${document.tags.map((t) => `<a href="#tag-${escapeHtml(t.name)}">${escapeHtml(t.name)}</a>`).join(' · ')}</nav>
${sections}
</body></html>
`;
}
