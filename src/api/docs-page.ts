import { escapeHtml } from '../base/escape-html.js';

/** A self-contained API reference rendered from the OpenAPI document (no CDN, works offline). */

type Schema = {
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  description?: string;
  enum?: unknown[];
  default?: unknown;
  anyOf?: Schema[];
};
type Operation = {
  summary?: string;
  description?: string;
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, { description?: string }>;
  parameters?: Array<{ name: string; in: string; required?: boolean; schema?: Schema }>;
};

function typeOf(s: Schema | undefined): string {
  if (!s) return 'any';
  if (s.enum) return s.enum.map((e) => JSON.stringify(e)).join(' | ');
  if (s.anyOf) return s.anyOf.map(typeOf).join(' | ');
  if (s.type === 'array') return `${typeOf(s.items)}[]`;
  return s.type ?? 'object';
}

function fields(schema: Schema | undefined): string {
  const props = schema?.properties;
  if (!props) return '';
  const rows = Object.entries(props)
    .map(([name, s]) => {
      const required = schema?.required?.includes(name) ? ' <b>required</b>' : '';
      const def = s.default !== undefined ? ` (default <code>${escapeHtml(JSON.stringify(s.default))}</code>)` : '';
      return `<tr><td><code>${escapeHtml(name)}</code>${required}</td><td><code>${escapeHtml(typeOf(s))}</code></td><td>${escapeHtml(s.description ?? '')}${def}</td></tr>`;
    })
    .join('');
  return `<table><tr><th>field</th><th>type</th><th>meaning</th></tr>${rows}</table>`;
}

export function renderDocsPage(doc: {
  info: { title: string; version: string };
  paths?: Record<string, Record<string, Operation>>;
}): string {
  const ops = Object.entries(doc.paths ?? {}).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => {
      const params = (op.parameters ?? [])
        .map((p) => `<code>${escapeHtml(p.name)}</code> (${escapeHtml(p.in)}${p.required ? ', required' : ''})`)
        .join(', ');
      const body = op.requestBody?.content?.['application/json']?.schema;
      const responses = Object.entries(op.responses ?? {})
        .map(([code, r]) => `<li><b>${escapeHtml(code)}</b> ${escapeHtml(r.description ?? '')}</li>`)
        .join('');
      return `<section><h2><span class="m">${escapeHtml(method.toUpperCase())}</span> <code>${escapeHtml(path)}</code></h2>
<p><b>${escapeHtml(op.summary ?? '')}</b> ${escapeHtml(op.description ?? '')}</p>
${params ? `<p>Parameters: ${params}</p>` : ''}${body ? `<h3>Body</h3>${fields(body)}` : ''}<h3>Responses</h3><ul>${responses}</ul></section>`;
    }),
  );
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(doc.info.title)} API</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
code{background:#f3f3f3;padding:0 .2em}table{border-collapse:collapse;width:100%}td,th{border:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}
.m{display:inline-block;min-width:4.5em;color:#fff;background:#345;padding:0 .4em;border-radius:3px}section{border-top:1px solid #ddd;margin-top:1.5rem}form.out{float:right}</style></head>
<body><form class="out" method="post" action="/docs/logout"><button type="submit">Sign out</button></form><h1>${escapeHtml(doc.info.title)} <small>${escapeHtml(doc.info.version)}</small></h1>
<p>Every route but <code>/healthz</code> needs <code>Authorization: Bearer &lt;admin token&gt;</code>. Errors are
<code>{"error": {"code", "message", "issues"?, "hint"?}}</code>; match on <code>code</code>. Machine-readable: <a href="/openapi.json">/openapi.json</a>.
MCP (Streamable HTTP): <code>/mcp</code>, same token.</p>
${ops.join('\n')}</body></html>`;
}
