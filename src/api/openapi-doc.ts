/**
 * The served OpenAPI document, finished the way generated clients and linters expect: an
 * operationId on every operation (derived from method and path, so it is stable), a server,
 * /healthz marked as needing no token, and the 401 every other operation can answer.
 */
type Operation = { operationId?: string; security?: unknown[]; responses?: Record<string, unknown> };
type Doc = { paths?: Record<string, Record<string, Operation>>; servers?: unknown[]; [k: string]: unknown };

const VERBS: Record<string, string> = { get: 'get', post: 'create', put: 'set', patch: 'update', delete: 'delete' };

/** "post /api/projects/{name}/runs" → "createProjectsRunsByName" (unique per method and path). */
export function operationIdOf(method: string, path: string): string {
  const words = path.split('/').filter((s) => s && s !== 'api');
  const parts = words
    .filter((w) => !w.startsWith('{'))
    .map((w) => w.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? '').toUpperCase()));
  const by = words.filter((w) => w.startsWith('{')).map((w) => w.slice(1, -1));
  const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
  return `${VERBS[method] ?? method}${parts.map(cap).join('')}${by.length ? `By${by.map(cap).join('And')}` : ''}`;
}

export function finishOpenApiDoc<D extends Doc>(doc: D, open: (path: string) => boolean): D {
  // The 401 as the routes that declare it describe it (already JSON Schema), for those that do not.
  const unauthorized = Object.values(doc.paths ?? {})
    .flatMap((ops) => Object.values(ops))
    .find((op) => op.responses?.[401])?.responses?.[401];
  for (const [path, ops] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(ops)) {
      op.operationId ??= operationIdOf(method, path);
      if (open(path)) op.security = [];
      else op.responses = { ...op.responses, 401: op.responses?.[401] ?? unauthorized };
    }
  }
  doc.servers ??= [{ url: '/', description: 'this berth serve' }];
  return doc;
}
