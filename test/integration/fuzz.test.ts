/**
 * Schema-driven fuzzing of the live HTTP admin API and the MCP endpoints ("keep it fixed" for
 * the 217 INTERNAL answers a fuzzer once found).
 *
 * A real server (createBerth + createApp + serve on 127.0.0.1:0) is driven with requests
 * generated from its own /openapi.json and the MCP tools' inputSchema, mostly broken on purpose:
 * wrong types, missing and unknown fields, 1 MB strings, NUL, lone surrogates, 10,000-deep
 * arrays, `__proto__` keys (also inside records such as metadata `teams`), `..`/`%2e%2e`/`%00`
 * path parameters, wrong or doubled content types, missing bodies, a few 50 MB bodies.
 *
 * Per run (all seeded; about 20-30 s on a 2-core machine, about 2,100 requests):
 *   - HTTP_REQUESTS_PER_OPERATION (60) requests to every operation of /openapi.json,
 *   - BARE_REQUESTS_PER_OPERATION (20) to the operator routes of a second home without berth.yaml,
 *   - MCP_REQUESTS_PER_TOOL (30) tools/call per tool on /mcp and on /mcp/session, plus a fixed
 *     set of broken JSON-RPC envelopes per endpoint, plus BIG_BODIES (5) bodies of 50 MB.
 * Asserted: never a 5xx (nor JSON-RPC -32603, nor a tool error whose code is a 5xx), every error
 * in berth's shape with a code of ERROR_TABLE and its status, certainly-invalid input never a
 * 2xx, no token or stack trace in any answer, a keep-alive connection is never dropped under
 * the next request, GET /healthz 200 within 1 s after every HEALTH_EVERY requests, and
 * berth.yaml (a YAML mapping), metadata.json and sessions/*.json valid after every batch.
 * Valid runs (real containers) are capped at MAX_VALID_RUNS; beyond the cap a run request is
 * pointed at a project that does not exist.
 *
 * Replay: FUZZ_SEED=<seed> (default below) and FUZZ_ONLY=<part of an operation name> to run one
 * operation; the failure report prints both.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import { isAbsolute, join, posix } from 'node:path';
import { serve } from '@hono/node-server';
import fc from 'fast-check';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { parseBerthConfig } from '../../src/config/berth-config.js';
import { ProjectMetadataSchema, type ProjectMetadataInput } from '../../src/config/metadata.js';
import { SessionRecordSchema } from '../../src/config/session.js';
import { ERROR_TABLE, isBerthError } from '../../src/base/errors.js';
import { checkHttp, checkMcp, describeRequest, FailureLog, type CheckEnv, type Problem } from '../fuzz/checks.js';
import { closeAgent, send, type RawRequest, type SendResult, type Tag } from '../fuzz/http.js';
import { applyMutation, mutationArb, type Mutation } from '../fuzz/mutate.js';
import { arbitraryFor, hasProtoKey, matches, setOwn, toJsonText, type Hints, type JsonSchema } from '../fuzz/schema.js';
import { testHome, type TestHome } from '../helpers.js';

// ── The bounds (what "make test" runs) ───────────────────────────────────────────────────────
const HTTP_REQUESTS_PER_OPERATION = 60;
const BARE_REQUESTS_PER_OPERATION = 20;
const MCP_REQUESTS_PER_TOOL = 30;
const BIG_BODIES = 5; // of 50 MB each
const BIG_BODY_BYTES = 50 * 1024 * 1024;
/** Requests that really start a container (valid runs), over the whole fuzz run, fixtures included. */
const MAX_VALID_RUNS = 20;
const HEALTH_EVERY = 25;
/** A /healthz unanswered this long means the server hangs (it answers in milliseconds; a busy machine can take a second or more). */
const HEALTH_TIMEOUT_MS = 15_000;
const REQUEST_TIMEOUT_MS = 30_000;

const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : 0x5eed_b047;
const ONLY = process.env.FUZZ_ONLY;

const ADMIN_TOKEN = `fuzz-admin-${randomBytes(16).toString('hex')}`;
const CODES = new Map<string, number>([
  ...Object.entries(ERROR_TABLE).map(([code, v]) => [code, v.status] as [string, number]),
  ['NOT_FOUND', 404],
]);
const SAFE_MESSAGES = ['echo fz', 'true', 'ls -la /workspace', 'id', 'printf "%s" hi', 'cat /etc/hostname', 'exit 3'];
const RUN_BUDGET: Record<string, number> = {
  'POST /api/projects/{name}/runs': 6,
  'POST /api/projects/{name}/workflows/{workflow}/runs': 3,
  'mcp run_message': 4,
  'mcp workflow_run': 2,
  'mcp-session shell_run': 4,
};
const NO_PROJECT = 'fz-none';

// ── Fixtures ─────────────────────────────────────────────────────────────────────────────────
interface Target {
  label: string;
  h: TestHome;
  port: number;
  projects: string[];
  baseline: Record<string, ProjectMetadataInput>;
  stop(): Promise<void>;
}

interface Fixture {
  main: Target;
  bare: Target;
  session: string;
  workspaceId: string;
  sessionToken: string;
  folderId: string;
  areas: string[];
  workflows: string[];
}

const WORKFLOWS: Record<string, string> = {
  hello:
    'description: fuzz fixture\nsteps:\n  - name: greet\n    message: printf "%s" "$BERTH_INPUT" | head -c 64; echo fz-wf\n    workspace_mode: orchestrator_workspace\n',
  broken: 'steps: []\nbogus: 1\n',
  'needs-data': 'shared: [data]\nsteps:\n  - message: ls /shared\n    workspace_mode: run_workspace\n',
};

let fx: Fixture;
const homes: TestHome[] = [];
const targets: Target[] = [];
let validRuns = 0;
const failures = new FailureLog();
const counts = new Map<string, number>();
const env = (): CheckEnv => ({ codes: CODES, secrets: [ADMIN_TOKEN, fx?.sessionToken].filter(Boolean) as string[] });
const secretsForReport = () => ({ ADMIN_TOKEN, SESSION_TOKEN: fx?.sessionToken ?? '' });

async function startServer(
  label: string,
  h: TestHome,
  projects: string[],
  baseline: Record<string, ProjectMetadataInput>,
): Promise<Target> {
  const app = createApp(appDepsFrom(h.berth, { token: ADMIN_TOKEN, logger: h.berth.logger }));
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const { port } = server.address() as AddressInfo;
  const target: Target = {
    label,
    h,
    port,
    projects,
    baseline,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  };
  targets.push(target);
  return target;
}

/** The fixture projects: the shell agent, 5 s runs, a team with an admin (the gateway's team scopes). */
const baselineOf = (name: string, isolation: boolean): ProjectMetadataInput => ({
  name,
  agent: 'shell',
  workspace_isolation: isolation,
  limits: { timeout_seconds: 5 },
  teams: { 'fz:team': { members: ['fz:alice', 'fz:bob'] } },
  admins: ['fz:bob'],
});

function writeWorkflows(h: TestHome, project: string): void {
  const dir = join(h.berth.store.get(project).paths.dir, 'workflows');
  fs.mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(WORKFLOWS)) {
    const file = join(dir, `${name}.yaml`);
    if (!fs.existsSync(file) || fs.readFileSync(file, 'utf8') !== text) fs.writeFileSync(file, text);
  }
}

/** Put the fixture projects back as they were (a fuzzed PATCH, move or delete may have changed them). */
async function restoreFixtures(t: Target): Promise<void> {
  try {
    await restoreFixturesOrThrow(t);
  } catch (err) {
    failures.add(
      `fixtures of the ${t.label} home`,
      { kind: 'could not put the fixture projects back', detail: isBerthError(err) ? err.toLine() : String(err) },
      'in-process restore between batches',
    );
  }
}

async function restoreFixturesOrThrow(t: Target): Promise<void> {
  const { berth } = t.h;
  for (const name of t.projects) {
    try {
      if (berth.operator.access(name).private_workspace_overridden) await berth.operator.setPrivateWorkspace(name, undefined);
    } catch {
      /* reported by the state check if it matters */
    }
    let exists = true;
    try {
      berth.store.get(name);
    } catch (err) {
      if (!isBerthError(err, 'PROJECT_NOT_FOUND')) throw err;
      exists = false;
    }
    if (!exists) berth.store.create(t.baseline[name] as ProjectMetadataInput);
    const m = berth.store.get(name).metadata;
    const b = t.baseline[name] as ProjectMetadataInput;
    const drifted =
      m.workspace_isolation !== (b.workspace_isolation ?? false) ||
      m.agent !== 'shell' ||
      (m.image !== undefined && m.image !== 'berth/shell:latest') ||
      m.protected_paths.length > 0 ||
      m.env.length > 0 ||
      JSON.stringify(m.teams) !== JSON.stringify(b.teams) ||
      JSON.stringify(m.admins) !== JSON.stringify(b.admins) ||
      JSON.stringify(m.limits) !== JSON.stringify({ memory_mb: 512, cpus: 1, pids: 256, timeout_seconds: 5, output_bytes: 1024 * 1024 });
    if (drifted) {
      await berth.admin.updateProject(name, {
        workspace_isolation: b.workspace_isolation ?? false,
        agent: 'shell',
        image: 'berth/shell:latest',
        protected_paths: [],
        env: [],
        teams: b.teams,
        admins: b.admins,
        limits: { memory_mb: 512, cpus: 1, pids: 256, timeout_seconds: 5, output_bytes: 1024 * 1024 },
      });
    }
    writeWorkflows(t.h, name);
  }
}

async function ensureSession(): Promise<void> {
  try {
    await ensureSessionOrThrow();
  } catch (err) {
    failures.add(
      'fixtures of the main home',
      { kind: 'could not recreate the fixture session and its token', detail: isBerthError(err) ? err.toLine() : String(err) },
      'in-process, before the MCP session tools',
    );
  }
}

async function ensureSessionOrThrow(): Promise<void> {
  const { berth } = fx.main.h;
  try {
    berth.sessions.get('fz-a', fx.session);
  } catch {
    const outcome = await fx.main.h.run('fz-a', 'fz:alice', 'echo fixture-again');
    validRuns++;
    fx.session = outcome.sessionId;
    fx.workspaceId = outcome.workspaceId;
  }
  berth.admin.updateSession('fz-a', fx.session, { permission_level: 'medium', workspace: { mode: 'tenant' } });
  berth.admin.revokeSessionTokens('fz-a', fx.session);
  fx.sessionToken = berth.admin.mintSessionToken('fz-a', fx.session, 3600).token;
}

// ── State and health ─────────────────────────────────────────────────────────────────────────
function stateProblems(t: Target): Problem[] {
  const home = t.h.home;
  const out: Problem[] = [];
  const file = join(home, 'berth.yaml');
  const overrides: string[] = [];
  if (fs.existsSync(file)) {
    const text = fs.readFileSync(file, 'utf8');
    let data: unknown;
    try {
      data = parseYaml(text);
    } catch (err) {
      out.push({ kind: 'berth.yaml is not YAML', detail: (err as Error).message });
    }
    if (typeof data !== 'object' || data === null || Array.isArray(data))
      out.push({ kind: `berth.yaml is not a YAML mapping (${JSON.stringify(data)})`, detail: JSON.stringify(text.slice(0, 200)) });
    try {
      const config = parseBerthConfig(text, file, home);
      for (const p of Object.values(config.projects)) if (p.private_workspace) overrides.push(p.private_workspace);
    } catch (err) {
      out.push({ kind: 'berth.yaml fails parseBerthConfig', detail: isBerthError(err) ? err.toLine() : String(err) });
    }
  }
  const projectsDir = join(home, 'projects');
  const dirs = new Set<string>(overrides);
  if (fs.existsSync(projectsDir))
    for (const n of fs.readdirSync(projectsDir)) if (fs.existsSync(join(projectsDir, n, 'metadata.json'))) dirs.add(join(projectsDir, n));
  for (const dir of dirs) {
    const meta = join(dir, 'metadata.json');
    try {
      const parsed = ProjectMetadataSchema.safeParse(JSON.parse(fs.readFileSync(meta, 'utf8')));
      if (!parsed.success)
        out.push({ kind: 'metadata.json fails ProjectMetadataSchema', detail: `${meta}: ${parsed.error.message.slice(0, 200)}` });
    } catch (err) {
      out.push({ kind: 'metadata.json unreadable', detail: `${meta}: ${(err as Error).message}` });
    }
    const sessions = join(dir, 'sessions');
    if (!fs.existsSync(sessions)) continue;
    for (const f of fs.readdirSync(sessions).filter((n) => n.endsWith('.json'))) {
      try {
        const parsed = SessionRecordSchema.safeParse(JSON.parse(fs.readFileSync(join(sessions, f), 'utf8')));
        if (!parsed.success)
          out.push({ kind: 'session file fails SessionRecordSchema', detail: `${f}: ${parsed.error.message.slice(0, 200)}` });
      } catch (err) {
        out.push({ kind: 'session file unreadable', detail: `${f}: ${(err as Error).message}` });
      }
    }
  }
  return out;
}

async function healthProblem(t: Target): Promise<Problem | undefined> {
  const t0 = performance.now();
  try {
    const res = await fetch(`http://127.0.0.1:${t.port}/healthz`, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
    const body = (await res.json()) as { ok?: boolean };
    if (res.status !== 200 || body.ok !== true) return { kind: `/healthz answered ${res.status}`, detail: JSON.stringify(body) };
  } catch (err) {
    return {
      kind: `/healthz did not answer 200 within ${HEALTH_TIMEOUT_MS} ms`,
      detail: `${(err as Error).message} after ${Math.round(performance.now() - t0)} ms`,
    };
  }
  return undefined;
}

// ── The HTTP operations, from /openapi.json ──────────────────────────────────────────────────
interface Param {
  name: string;
  schema: JsonSchema;
  required: boolean;
}
interface Op {
  key: string;
  method: string;
  template: string;
  params: Param[];
  query: Param[];
  body?: { schema: JsonSchema; required: boolean };
}

function operationsOf(doc: {
  paths: Record<
    string,
    Record<
      string,
      { parameters?: Array<Param & { in: string }>; requestBody?: { required?: boolean; content: Record<string, { schema: JsonSchema }> } }
    >
  >;
}): Op[] {
  const ops: Op[] = [];
  for (const [template, byMethod] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(byMethod)) {
      const params = (op.parameters ?? []).map((p) => ({ name: p.name, schema: p.schema, required: p.required ?? false, in: p.in }));
      const body = op.requestBody?.content['application/json']?.schema;
      ops.push({
        key: `${method.toUpperCase()} ${template}`,
        method: method.toUpperCase(),
        template,
        params: params.filter((p) => p.in === 'path'),
        query: params.filter((p) => p.in === 'query'),
        body: body ? { schema: body, required: op.requestBody?.required ?? false } : undefined,
      });
    }
  }
  return ops;
}

interface Ctx {
  t: Target;
  opKey: string;
  projects: string[];
  throwaway: string[];
}

function hintsFor(ctx: Ctx): Hints {
  const mix = (fixed: fc.Arbitrary<unknown>, base: () => fc.Arbitrary<unknown>, wf = 3, wb = 1) =>
    fc.oneof({ arbitrary: fixed, weight: wf }, { arbitrary: base(), weight: wb });
  const home = ctx.t.h.home;
  const hints: Hints = (field, schema, base) => {
    const props = schema.properties ?? {};
    if ('argv' in props && 'command' in props && 'task' in props) {
      // shell_run takes exactly one of the three (a refine the JSON schema cannot say).
      return mix(
        fc.oneof(...['argv', 'command', 'task'].map((k) => arbitraryFor(props[k] as JsonSchema, hints, k).map((v) => ({ [k]: v })))),
        base,
        3,
        1,
      );
    }
    switch (field) {
      case 'name':
      case 'project':
        return mix(fc.constantFrom(...ctx.projects, ...ctx.throwaway), base, 4, 1);
      case 'sessionId':
        return mix(fc.constantFrom(fx.session, fx.session, 'wf.fz-a.hello'), base, 3, 1);
      case 'session':
        // In a run request: a new conversation, or the fixture's (berth's own t-/wf. ids are refused there).
        return mix(fc.constantFrom('chat-1', 'fz-s1', fx.session), base, 3, 1);
      case 'workflow':
        return mix(fc.constantFrom(...fx.workflows), base, 4, 1);
      case 'area':
        return mix(fc.constantFrom(...fx.areas, 'nope'), base, 4, 1);
      case 'id':
        return schema.pattern?.includes('0-9a-f') ? mix(fc.constant(fx.workspaceId), base, 3, 1) : undefined;
      case 'user':
        // Tenant keys are looked up in records (teams): names of Object.prototype members too.
        return mix(fc.constantFrom('fz:alice', 'fz:bob', 'fz:team', 'signal:+4915', '__proto__', 'constructor', 'toString'), base, 3, 1);
      case 'message':
        return mix(fc.constantFrom(...SAFE_MESSAGES), base, 3, 1);
      case 'protected_paths':
        return mix(fc.constantFrom([], ['AGENTS.md'], ['src/', 'AGENTS.md'], ['.factory/', 'docs/readme.md']), base, 3, 1);
      case 'env':
        return mix(fc.constantFrom([], ['FZ_A'], ['FZ_A', 'FZ_B']), base, 3, 1);
      case 'agent':
        return mix(fc.constantFrom('shell', ['sh', '-c', '{message}']), base, 2, 1);
      case 'members[]':
      case 'admins[]':
        return mix(fc.constantFrom('fz:alice', 'fz:bob', '__proto__', 'constructor'), base, 2, 1);
      case 'image':
        return mix(fc.constantFrom('berth/shell:latest', 'berth/missing:fuzz'), base, 3, 1);
      case 'folderId':
        return mix(fc.constant(fx.folderId), base, 3, 1);
      case 'argv':
        return mix(fc.constantFrom(['echo', 'fz'], ['ls', '-la'], ['pwd'], ['cat', '/etc/hostname']), base, 3, 1);
      case 'command':
        return mix(fc.constantFrom('echo fz', 'ls -la /workspace', 'id; id', 'cat ../../etc/passwd'), base, 3, 1);
      case 'path':
        if (!ctx.opKey.includes('private-workspace')) return undefined;
        return fc.oneof(
          fc.constant(null),
          fc.stringMatching(/^[a-z0-9]{1,8}$/).map((s) => `${home}/pw/new-${s}`),
          fc.constantFrom(
            `${home}/pw/nonempty`,
            `${home}/pw/afile`,
            'pw/relative',
            `${home}/pw/a\u0000b`,
            `${home}/pw/${'a'.repeat(256)}`,
            `${home}/pw/${'b'.repeat(300)}/c`,
            `${home}/.berth/moved`,
            `${home}/pw/../pw/x`,
            `${home}/pw/slash/`,
            `${home}/shared/docs/inside`,
            `${home}/shared`,
            ...ctx.projects.flatMap((p) => {
              const dir = ctx.t.h.berth.store.get(p).paths.dir;
              return [dir, `${dir}/sub`, `${dir}/workspaces/x`, `${dir}/workspaces`];
            }),
          ),
        );
      default:
        return undefined;
    }
  };
  return hints;
}

// Path parameter values that are not what they seem ("raw": sent as is, not encoded).
const PARAM_POISON = (fixture: string): string[] => [
  '..',
  '.',
  '%2e%2e',
  '.%2E',
  `${fixture}/../${fixture}`,
  `${fixture}/%2e%2e/${fixture}`,
  `${fixture}%2f..%2f${fixture}`,
  '%00',
  `${fixture}%00`,
  '%',
  '%zz',
  '%ff%fe',
  '%ed%a0%80',
  '__proto__',
  'constructor',
  'toString',
  'a'.repeat(300),
  'a'.repeat(4000),
  '%2f',
  '',
  '%20',
  encodeURIComponent('ü'),
  'UPPER',
];
const QUERY_POISON = [
  'abc',
  '-1',
  '0',
  '1.5',
  '1e309',
  '99999999999999999999',
  '',
  'NaN',
  '0x10',
  '%20%205',
  '%00',
  '__proto__',
  'a'.repeat(4000),
  '%ff',
  '%',
];

const fixtureFor = (ctx: Ctx, param: string) =>
  param === 'sessionId'
    ? fx.session
    : param === 'workflow'
      ? 'hello'
      : param === 'area'
        ? 'docs'
        : param === 'id'
          ? fx.workspaceId
          : (ctx.projects[0] as string);

const isDotSegment = (s: string) => /^(\.|%2e){1,2}$/i.test(s);

/** Whether the server could take this raw path parameter as a valid value of the schema. */
function paramValid(raw: string, schema: JsonSchema): boolean {
  if (raw.includes('/') || isDotSegment(raw)) return false;
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    return false;
  }
  return matches(schema, schema.type === 'integer' || schema.type === 'number' ? Number(decoded) : decoded);
}

type Ct = 'json' | 'json-utf8' | 'missing' | 'text' | 'form' | 'multipart' | 'any' | 'two' | 'upper' | 'vnd' | 'latin1';
const CT_HEADERS: Record<Ct, string[]> = {
  json: ['application/json'],
  'json-utf8': ['application/json; charset=utf-8'],
  missing: [],
  text: ['text/plain'],
  form: ['application/x-www-form-urlencoded'],
  multipart: ['multipart/form-data; boundary=fz'],
  any: ['*/*'],
  two: ['application/json', 'text/plain'],
  upper: ['APPLICATION/JSON'],
  vnd: ['application/vnd.fuzz+json'],
  latin1: ['application/json; charset=latin1'],
};
const ctArb: fc.Arbitrary<Ct> = fc.oneof(
  ...(['missing', 'text', 'form', 'two'] as Ct[]).map((c) => ({ weight: 3, arbitrary: fc.constant(c) })),
  ...(['json-utf8', 'multipart', 'any', 'upper', 'vnd', 'latin1'] as Ct[]).map((c) => ({ weight: 1, arbitrary: fc.constant(c) })),
);

type Corrupt = 'none' | 'truncate' | 'trailing' | 'bom' | 'nul' | 'utf8' | 'empty' | 'dupkey' | 'hugenum' | 'form';
const corruptArb = fc.constantFrom<Corrupt>('truncate', 'trailing', 'bom', 'nul', 'utf8', 'empty', 'dupkey', 'hugenum', 'form');
type Auth = 'ok' | 'missing' | 'wrong' | 'basic' | 'lower';
const authArb = fc.constantFrom<Auth>('missing', 'wrong', 'basic', 'lower');

/**
 * What is broken in a request. Mostly one thing at a time, so a failure names its cause; "chaos"
 * breaks every dimension at once.
 */
type Fault = 'none' | 'body' | 'param' | 'ct' | 'text' | 'query' | 'auth' | 'nobody' | 'stray' | 'chaos';

function faultArb(op: Op): fc.Arbitrary<Fault> {
  const w: Array<[Fault, number, boolean]> = [
    ['none', 15, true],
    ['body', 35, !!op.body],
    ['param', 15, op.params.length > 0],
    ['ct', 10, !!op.body],
    ['text', 7, !!op.body],
    ['query', 6, op.query.length > 0 || op.template !== '/healthz'],
    ['auth', 5, op.template !== '/healthz'],
    ['nobody', 3, !!op.body],
    ['stray', 5, !op.body],
    ['chaos', 6, true],
  ];
  return fc.oneof(...w.filter(([, , on]) => on).map(([f, weight]) => ({ weight, arbitrary: fc.constant(f) })));
}

interface HttpPlan {
  fault: Fault;
  params: string[];
  poison: { which: number; index: number };
  query: Array<[string, string]>;
  badQuery: Array<[string, string]>;
  body: { valid: unknown; mutation: Mutation } | undefined;
  corrupt: Corrupt;
  ct: Ct;
  auth: Auth;
  confirm: 'omit' | 'match' | 'other' | 'poison';
}

function httpPlanArb(op: Op, ctx: Ctx): fc.Arbitrary<HttpPlan> {
  const hints = hintsFor(ctx);
  const queries = op.query.filter((q) => q.name !== 'confirm');
  const validQuery = fc
    .tuple(
      ...queries.map((q) =>
        fc.option(
          arbitraryFor(q.schema, hints, q.name).map((v): [string, string] => [q.name, encodeURIComponent(String(v))]),
          { nil: undefined },
        ),
      ),
    )
    .map((parts) => parts.filter((x): x is [string, string] => x !== undefined));
  const badQuery = fc
    .tuple(
      ...queries.map((q) =>
        fc.oneof(
          { weight: 3, arbitrary: fc.constantFrom(...QUERY_POISON).map((v): Array<[string, string]> => [[q.name, v]]) },
          {
            weight: 1,
            arbitrary: fc.constant<Array<[string, string]>>([
              [q.name, '1'],
              [q.name, '2'],
            ]),
          },
        ),
      ),
      fc.constantFrom<Array<[string, string]>>(
        [],
        [['__proto__', '1']],
        [['constructor', 'x']],
        [['zz', '1']],
        [['limit[]', '1']],
        [['a', 'b'.repeat(4000)]],
        [['%00', '%00']],
        [['&&', '=']],
      ),
    )
    .map((parts) => parts.flat());
  return fc.record({
    fault: faultArb(op),
    params: fc.tuple(...op.params.map((p) => arbitraryFor(p.schema, hints, p.name).map((v) => encodeURIComponent(String(v))))),
    poison: fc.record({ which: fc.nat(), index: fc.nat() }),
    query: validQuery,
    badQuery,
    body: op.body
      ? fc.record({ valid: arbitraryFor(op.body.schema, hints), mutation: mutationArb.filter((m) => m.kind !== 'none') })
      : fc.constant(undefined),
    corrupt: corruptArb,
    ct: ctArb,
    auth: authArb,
    confirm: fc.constantFrom('omit', 'match', 'other', 'poison'),
  }) as fc.Arbitrary<HttpPlan>;
}

interface Built {
  req: RawRequest;
  note: string;
  /** The kind of breakage (failures are grouped by it). */
  cause: string;
  mustReject?: string;
  expectStatus?: number;
  startsRun: boolean;
}

const JSON_CTS: Ct[] = ['json', 'json-utf8'];
const normalizedPath = (raw: string) => {
  try {
    return new URL(raw, 'http://x').pathname;
  } catch {
    return raw;
  }
};

function corruptText(text: string, c: Corrupt): { body: string | Buffer; malformed: boolean } {
  switch (c) {
    case 'none':
      return { body: text, malformed: false };
    case 'truncate':
      return { body: text.slice(0, Math.max(1, Math.floor(text.length / 2))), malformed: text.length > 1 };
    case 'trailing':
      return { body: `${text} }garbage`, malformed: true };
    case 'bom':
      return { body: `\ufeff${text}`, malformed: false };
    case 'nul':
      return { body: `\u0000${text}`, malformed: true };
    case 'utf8':
      return { body: Buffer.concat([Buffer.from(text), Buffer.from([0xff, 0xfe, 0x80])]), malformed: true };
    case 'empty':
      return { body: '', malformed: true };
    case 'dupkey':
      return { body: text.startsWith('{') && text.length > 2 ? `{"__proto__":{"polluted":1},${text.slice(1)}` : text, malformed: false };
    case 'hugenum':
      return { body: text.replace(/:(-?\d+(?:\.\d+)?)/, ':1e999999'), malformed: false };
    case 'form':
      return { body: 'name=fz-a&path=%2Ftmp&__proto__[x]=1', malformed: true };
  }
}

/** Keep every absolute `path` under the test home (PUT private-workspace moves the project there). */
function safePath(p: string, home: string, index: number): string {
  const plain = p.replace(/\0/g, '');
  if (!isAbsolute(plain)) return p;
  const norm = posix.normalize(plain);
  if (norm === home || norm.startsWith(`${home}/`)) return p;
  return `${home}/pw/rewritten-${index}`;
}

/** Why a private-workspace path is certainly refused (undefined: it may be accepted). */
function badWorkspacePath(p: string, own: string | undefined, t: Target): string | undefined {
  const home = t.h.home;
  if (!isAbsolute(p)) return 'relative path';
  if (p.includes('\0')) return 'NUL in path';
  if (p.split('/').some((c) => Buffer.byteLength(c) > 255)) return 'path component over 255 bytes';
  if (posix.normalize(p) !== p) return 'path not normalized';
  if (p.length > 1 && p.endsWith('/')) return 'trailing slash';
  if (own && p.startsWith(`${own}/`)) return "inside the project's own directory";
  for (const other of t.projects) {
    try {
      const ws = t.h.berth.store.get(other).paths.workspacesDir;
      if (p === ws || p.startsWith(`${ws}/`)) return `inside project ${other}'s workspaces/`;
    } catch {
      /* gone */
    }
  }
  if (p === join(home, '.berth') || p.startsWith(`${join(home, '.berth')}/`)) return 'inside .berth';
  const shared = join(home, 'shared');
  if (fs.existsSync(shared) && (p === shared || p.startsWith(`${shared}/`))) return 'overlaps a shared area';
  if (fs.existsSync(p) && (!fs.statSync(p).isDirectory() || fs.readdirSync(p).length > 0) && p !== own)
    return 'exists and is not an empty directory';
  return undefined;
}

function buildHttp(op: Op, plan: HttpPlan, ctx: Ctx, index: number, capped: boolean): Built {
  const { t } = ctx;
  const notes: string[] = [];
  const causes: string[] = [];
  let mustReject: string | undefined;
  const reject = (why: string) => {
    mustReject ??= why;
  };
  const on = (f: Fault) => plan.fault === f || plan.fault === 'chaos';
  const poisonAt = op.params.length ? plan.poison.which % op.params.length : -1;
  const raw: Record<string, string> = {};
  op.params.forEach((p, i) => {
    let v = plan.params[i] as string;
    if (on('param') && i === poisonAt) {
      const list = PARAM_POISON(fixtureFor(ctx, p.name));
      v = list[plan.poison.index % list.length] as string;
      causes.push(
        `path parameter ${p.name}=${v.length > 24 ? `${v.slice(0, 8)}…(${v.length})` : v.replaceAll(fixtureFor(ctx, p.name), '<fixture>')}`,
      );
    }
    if (capped && (p.name === 'name' || p.name === 'project')) {
      v = NO_PROJECT;
      notes.push(`run cap: project ${NO_PROJECT}`);
    }
    raw[p.name] = v;
    if (!paramValid(v, p.schema)) reject(`path parameter ${p.name}=${v.length > 40 ? `${v.slice(0, 40)}…` : v}`);
  });
  let path = op.template.replace(/\{(\w+)\}/g, (_m, n: string) => raw[n] ?? '');
  const query = on('query') ? [...plan.badQuery] : [...plan.query];
  if (on('query')) {
    notes.push('query');
    causes.push('query');
  }
  if (op.query.some((q) => q.name === 'confirm') && plan.confirm !== 'omit') {
    // Never a matching confirm for a fixture project: those are deleted only by accident (a bug).
    const target = /^\/api\/projects\/([^/]+)$/.exec(normalizedPath(path))?.[1];
    const name = raw.name ?? '';
    const fixtureTarget = target !== undefined && t.projects.includes(target);
    const value =
      plan.confirm === 'match' && !fixtureTarget ? name : plan.confirm === 'other' ? 'fz-b' : plan.confirm === 'poison' ? '%00' : 'nope';
    query.push(['confirm', value]);
  }
  if (query.length) path += `?${query.map(([k, v]) => `${k}=${v}`).join('&')}`;

  const auth: Auth = on('auth') && op.template !== '/healthz' ? plan.auth : 'ok';
  const ct: Ct = on('ct') ? plan.ct : 'json';
  const corrupt: Corrupt = on('text') ? plan.corrupt : 'none';
  const headers: Array<[string, string]> = [];
  if (auth === 'ok') headers.push(['authorization', `Bearer ${ADMIN_TOKEN}`]);
  else if (auth === 'lower') headers.push(['authorization', `bearer ${ADMIN_TOKEN}`]);
  else if (auth === 'wrong') headers.push(['authorization', `Bearer ${ADMIN_TOKEN}x`]);
  else if (auth === 'basic') headers.push(['authorization', `Basic ${Buffer.from(`a:${ADMIN_TOKEN}`).toString('base64')}`]);
  const badAuth = auth === 'missing' || auth === 'wrong' || auth === 'basic';
  // A malformed URL may be refused (400) before the token is looked at.
  const expectStatus = badAuth && !mustReject ? 401 : undefined;
  if (badAuth) {
    notes.push(`auth ${auth}`);
    causes.push(`auth ${auth}`);
    reject(`no valid token (${auth})`);
  }

  let body: string | Buffer | undefined;
  let bodyInvalid = false;
  if (op.body && plan.body && plan.fault !== 'nobody') {
    const { value, label, cause } = applyMutation(plan.body.valid, op.body.schema, on('body') ? plan.body.mutation : { kind: 'none' });
    if (on('body')) causes.push(cause);
    if (typeof value === 'object' && value !== null && !Array.isArray(value) && typeof (value as { path?: unknown }).path === 'string') {
      const safe = safePath((value as { path: string }).path, t.h.home, index);
      if (safe !== (value as { path: string }).path) setOwn(value, 'path', safe);
    }
    notes.push(label);
    if (!matches(op.body.schema, value) && !hasProtoKey(value)) {
      bodyInvalid = true;
      if (JSON_CTS.includes(ct)) reject(`body: ${label}`);
    } else if (op.key.includes('private-workspace') && typeof (value as { path?: unknown }).path === 'string') {
      const own = (() => {
        try {
          return t.projects.includes(raw.name ?? '') ? t.h.berth.store.get(raw.name as string).paths.dir : undefined;
        } catch {
          return undefined;
        }
      })();
      const bad = badWorkspacePath((value as { path: string }).path, own, t);
      if (bad) {
        reject(`private workspace: ${bad}`);
        causes.push(`private workspace: ${bad}`);
      }
    }
    const { body: text, malformed } = corruptText(toJsonText(value), corrupt);
    body = text;
    if (corrupt !== 'none') {
      notes.push(`text ${corrupt}`);
      causes.push(`text ${corrupt}`);
    }
    if (malformed) {
      bodyInvalid = true;
      // berth reads an empty JSON body as {}: it is invalid only where {} is.
      if (JSON_CTS.includes(ct) && (corrupt !== 'empty' || (op.body.required && !matches(op.body.schema, {}))))
        reject(`malformed JSON (${corrupt})`);
    }
  } else if (op.body) {
    notes.push('no body');
    causes.push('no body');
    if (op.body.required && JSON_CTS.includes(ct) && !matches(op.body.schema, {}))
      reject('no body on a body route (and {} is not a valid body)');
  } else if (plan.fault === 'stray') {
    body = '{"zz_stray":1}';
    notes.push('stray body on a body-less route');
    causes.push('stray body');
  }
  if (op.body) for (const v of CT_HEADERS[ct]) headers.push(['content-type', v]);
  if (op.body && ct !== 'json') {
    notes.push(`content-type ${ct}`);
    causes.push(`content-type ${ct}`);
  }
  if (plan.fault === 'stray') headers.push(['content-type', 'application/json']);

  // Would this start a container? (Counted against MAX_VALID_RUNS.)
  const np = normalizedPath(path.split('?')[0] as string);
  const runRoute = /^\/api\/projects\/([^/]+)\/runs$/.exec(np);
  const wfRoute = /^\/api\/projects\/([^/]+)\/workflows\/([^/]+)\/runs$/.exec(np);
  let startsRun = false;
  if (op.method === 'POST' && !badAuth) {
    const cts = CT_HEADERS[ct].join(',');
    if (runRoute && t.projects.includes(runRoute[1] as string)) startsRun = body !== undefined && cts.includes('json') && !bodyInvalid;
    if (wfRoute && t.projects.includes(wfRoute[1] as string) && wfRoute[2] === 'hello')
      startsRun = !cts.includes('json') || (body !== undefined && !bodyInvalid);
  }
  if (capped) causes.push('run cap');
  const cause = plan.fault === 'chaos' ? 'chaos (everything broken)' : causes.join(', ') || 'valid';
  return { req: { method: op.method, path, headers, body }, note: notes.join('; '), cause, mustReject, expectStatus, startsRun };
}

// ── Sending, checking, reporting ─────────────────────────────────────────────────────────────
let sinceHealth = 0;

async function healthTick(t: Target, op: string, force = false): Promise<void> {
  sinceHealth++;
  if (!force && sinceHealth < HEALTH_EVERY) return;
  sinceHealth = 0;
  const p = await healthProblem(t);
  if (p) failures.add(`${op} (health)`, p, `GET /healthz after a batch of ${op}`);
}

/** For FUZZ_VERBOSE: what the answers were, per operation (status, or the MCP outcome). */
const answers = new Map<string, Map<string, number>>();
function mcpOutcome(res: { status: number; text: string }): string | undefined {
  try {
    const body = JSON.parse(res.text) as {
      jsonrpc?: string;
      error?: { code?: unknown };
      result?: { isError?: boolean; content?: Array<{ text?: string }> };
    };
    if (body?.jsonrpc !== '2.0') return undefined;
    if (body.error) return `${res.status} rpc ${String(body.error.code)}`;
    if (body.result?.isError) return `${res.status} tool ${codeOfText(body.result.content?.[0]?.text ?? '')}`;
    return `${res.status} ok`;
  } catch {
    return undefined;
  }
}
const codeOfText = (t: string) => {
  try {
    return String(JSON.parse(t)?.error?.code);
  } catch {
    return '?';
  }
};

const tagOf = (op: string, index: number, b: { req: RawRequest; note: string }): Tag => ({
  op,
  example: `case #${index}\n${describeRequest(b.req, secretsForReport(), b.note)}`,
});

function record(
  op: string,
  index: number,
  b: { req: RawRequest; note: string; cause?: string },
  res: SendResult,
  problems: Problem[],
): void {
  counts.set(op, (counts.get(op) ?? 0) + 1);
  const answer = 'error' in res ? 'none' : (mcpOutcome(res) ?? String(res.status));
  if (process.env.FUZZ_TRACE && op.includes(process.env.FUZZ_TRACE)) {
    console.log(
      `${op} #${index} [${b.note}] ${b.req.method} ${b.req.path.slice(0, 120)} ${String(b.req.body ?? '').slice(0, 160)}\n   → ${'error' in res ? res.error : `${res.status} ${res.text.slice(0, 240)}`}`,
    );
  }
  const byAnswer = answers.get(op) ?? new Map<string, number>();
  answers.set(op, byAnswer);
  byAnswer.set(answer, (byAnswer.get(answer) ?? 0) + 1);
  if (res.droppedAfter) {
    failures.add(
      res.droppedAfter.op,
      {
        kind: `answered ${res.droppedAfter.status} with "Connection: keep-alive", then dropped the connection: the next request on it got no answer`,
      },
      `${res.droppedAfter.example}\nnext request on that connection: ${op} case #${index} (sent again on a new connection)`,
    );
  }
  const status = 'error' in res ? res.error : `${res.status} ${res.text.length > 200 ? `${res.text.slice(0, 200)}…` : res.text}`;
  for (const p of problems)
    failures.add(
      op,
      { ...p, kind: `${p.kind}  ← ${b.cause ?? b.note}` },
      `case #${index}\n${describeRequest(b.req, secretsForReport(), b.note)}\nanswer: ${status}`,
    );
}

function checkState(t: Target, after: string): void {
  for (const p of stateProblems(t))
    failures.add(`state of ${t.label} home after ${after}`, p, `files under the ${t.label} home after ${after}`);
}

function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}
const seedFor = (key: string) => hash(`${SEED}|${key}`) | 0;
const selected = (key: string) => !ONLY || key.includes(ONLY);

async function fuzzHttpOperation(op: Op, t: Target, n: number, label: string): Promise<void> {
  const key = `${label}${op.key}`;
  if (!selected(key)) return;
  await restoreFixtures(t);
  const throwaway: string[] = [];
  if (op.key === 'DELETE /api/projects/{name}') {
    for (let i = 0; i < 4; i++) {
      const name = `fz-del-${i}`;
      try {
        t.h.berth.store.create({ name });
      } catch {
        /* still there */
      }
      throwaway.push(name);
    }
  }
  const ctx: Ctx = { t, opKey: op.key, projects: t.projects, throwaway };
  const plans = fc.sample(httpPlanArb(op, ctx), { seed: seedFor(key), numRuns: n });
  let budget = RUN_BUDGET[op.key] ?? 0;
  for (const [i, plan] of plans.entries()) {
    let built = buildHttp(op, plan, ctx, i, false);
    if (built.startsRun) {
      if (budget > 0 && validRuns < MAX_VALID_RUNS) {
        budget--;
        validRuns++;
      } else built = buildHttp(op, plan, ctx, i, true);
    }
    const res = await send(t.port, built.req, REQUEST_TIMEOUT_MS, tagOf(key, i, built));
    record(key, i, built, res, checkHttp(res, built, env()));
    await healthTick(t, key);
  }
  await healthTick(t, key, true);
  checkState(t, key);
}

// ── Big bodies ───────────────────────────────────────────────────────────────────────────────
async function fuzzBigBodies(): Promise<void> {
  const key = 'big bodies (50 MB)';
  if (!selected(key)) return;
  const t = fx.main;
  const auth: [string, string] = ['authorization', `Bearer ${ADMIN_TOKEN}`];
  const json: [string, string] = ['content-type', 'application/json'];
  const cases: Array<{ req: RawRequest; note: string; mcp?: boolean }> = [
    {
      req: {
        method: 'POST',
        path: '/api/projects',
        headers: [auth, json],
        big: { size: BIG_BODY_BYTES, prefix: '{"name":"', fill: 'a', suffix: '"}' },
      },
      note: '50 MB project name',
    },
    {
      req: {
        method: 'PATCH',
        path: '/api/projects/fz-a',
        headers: [auth, json],
        big: { size: BIG_BODY_BYTES, prefix: '{"teams":{"', fill: 'b', suffix: '":{"members":[]}}}' },
      },
      note: '50 MB teams key',
    },
    {
      req: {
        method: 'POST',
        path: '/api/projects/fz-a/runs',
        headers: [auth, json],
        big: { size: BIG_BODY_BYTES, prefix: '{"user":"fz:alice","message":[', fill: '[', suffix: '' },
      },
      note: '50 MB of "["',
    },
    {
      req: {
        method: 'PUT',
        path: '/api/projects/fz-b/private-workspace',
        headers: [auth, ['content-type', 'text/plain']],
        big: { size: BIG_BODY_BYTES, prefix: '', fill: 'x', suffix: '' },
      },
      note: '50 MB text/plain',
    },
    {
      req: {
        method: 'POST',
        path: '/mcp',
        headers: [auth, json, ['accept', 'application/json, text/event-stream']],
        big: {
          size: BIG_BODY_BYTES,
          prefix: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"project_get","arguments":{"name":"',
          fill: 'c',
          suffix: '"}}}',
        },
      },
      note: '50 MB MCP argument',
      mcp: true,
    },
  ];
  for (const [i, c] of cases.slice(0, BIG_BODIES).entries()) {
    const res = await send(t.port, c.req, REQUEST_TIMEOUT_MS * 2);
    const problems = c.mcp ? checkMcp(res, {}, env()) : checkHttp(res, {}, env());
    record(key, i, c, res, problems);
    await healthTick(t, key, true);
  }
  await restoreFixtures(t);
  checkState(t, key);
}

// ── MCP ──────────────────────────────────────────────────────────────────────────────────────
interface Tool {
  name: string;
  inputSchema: JsonSchema;
}

const mcpHeaders = (token: string, extra: Array<[string, string]> = []): Array<[string, string]> => [
  ['authorization', `Bearer ${token}`],
  ['content-type', 'application/json'],
  ['accept', 'application/json, text/event-stream'],
  ...extra,
];

async function listTools(path: string, token: string): Promise<Tool[]> {
  const res = await send(
    fx.main.port,
    { method: 'POST', path, headers: mcpHeaders(token), body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) },
    REQUEST_TIMEOUT_MS,
  );
  if ('error' in res) throw new Error(`tools/list on ${path}: ${res.error}`);
  const tools = (JSON.parse(res.text) as { result?: { tools?: Tool[] } }).result?.tools;
  if (!tools?.length) throw new Error(`tools/list on ${path} answered ${res.status} ${res.text.slice(0, 200)}`);
  return tools;
}

/** Broken JSON-RPC envelopes: every one must get a JSON-RPC or berth error, never a 5xx or -32603. */
function envelopes(path: string, token: string): Array<{ label: string; req: RawRequest; expectStatus?: number }> {
  const h = mcpHeaders(token);
  const call = (params: unknown, id: unknown = 7) => toJsonText({ jsonrpc: '2.0', id, method: 'tools/call', params });
  const post = (label: string, body: string | undefined, headers = h, expectStatus?: number) => ({
    label,
    req: { method: 'POST', path, headers, body },
    expectStatus,
  });
  const protoArgs = {};
  setOwn(protoArgs, '__proto__', { name: 'fz-a' });
  const list = [
    post('not JSON', '{'),
    post('empty body', ''),
    post('empty batch', '[]'),
    post('batch of two calls', `[${call({ name: 'project_list', arguments: {} }, 1)},${call({ name: 'nope', arguments: {} }, 2)}]`),
    post('null', 'null'),
    post('a string', '"tools/call"'),
    post('jsonrpc 1.0', JSON.stringify({ jsonrpc: '1.0', id: 1, method: 'tools/list' })),
    post('object id', JSON.stringify({ jsonrpc: '2.0', id: { a: 1 }, method: 'tools/list' })),
    post('no method', JSON.stringify({ jsonrpc: '2.0', id: 1 })),
    post('unknown method', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'nope/nope' })),
    post('unsupported capability', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'resources/list' })),
    post('tools/call without params', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call' })),
    post('params an array', call([])),
    post('name a number', call({ name: 123, arguments: {} })),
    post('unknown tool', call({ name: 'nope', arguments: {} })),
    post('tool "__proto__"', call({ name: '__proto__', arguments: {} })),
    post('tool "constructor"', call({ name: 'constructor', arguments: {} })),
    post('tool "toString"', call({ name: 'toString', arguments: {} })),
    post('arguments an array', call({ name: 'project_get', arguments: ['fz-a'] })),
    post('arguments a string', call({ name: 'project_get', arguments: 'fz-a' })),
    post('arguments null', call({ name: 'project_get', arguments: null })),
    post('arguments a number', call({ name: 'project_get', arguments: 5 })),
    post('arguments with __proto__', call({ name: 'project_get', arguments: protoArgs })),
    post(
      'deep arguments',
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"project_get","arguments":{"name":${'['.repeat(10000)}${']'.repeat(10000)}}}}`,
    ),
    post('deep params', `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":${'['.repeat(10000)}${']'.repeat(10000)}}`),
    post('notification', JSON.stringify({ jsonrpc: '2.0', method: 'tools/call', params: { name: 'project_list', arguments: {} } })),
    post('1 MB id', JSON.stringify({ jsonrpc: '2.0', id: 'i'.repeat(1 << 20), method: 'tools/list' })),
    post(
      'initialize with junk params',
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 5, capabilities: 'x' } }),
    ),
    post('NUL in method', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/\u0000list' })),
    post('content-type text/plain', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), [
      h[0] as [string, string],
      ['content-type', 'text/plain'],
      ['accept', 'application/json, text/event-stream'],
    ]),
    post('two content types', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), [...h, ['content-type', 'text/plain']]),
    post('no content type', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), [
      h[0] as [string, string],
      ['accept', 'application/json, text/event-stream'],
    ]),
    post('no accept', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), [
      h[0] as [string, string],
      h[1] as [string, string],
    ]),
    post('accept text/html', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), [
      h[0] as [string, string],
      h[1] as [string, string],
      ['accept', 'text/html'],
    ]),
    post('no token', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), h.slice(1), 401),
    post(
      'wrong token',
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      [['authorization', 'Bearer bst_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'], ...h.slice(1)],
      401,
    ),
    post(
      'token "__proto__"',
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      [['authorization', 'Bearer __proto__'], ...h.slice(1)],
      401,
    ),
    { label: 'GET', req: { method: 'GET', path, headers: h } },
    { label: 'DELETE', req: { method: 'DELETE', path, headers: h } },
    { label: 'PUT', req: { method: 'PUT', path, headers: h, body: '{}' } },
    {
      label: 'path /..',
      req: { method: 'POST', path: `${path}/..${path}`, headers: h, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) },
    },
  ];
  if (path === '/mcp/session')
    list.push(
      post('admin token on /mcp/session', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), mcpHeaders(ADMIN_TOKEN), 401),
    );
  return list;
}

function mcpHints(projects: string[]): Hints {
  return hintsFor({ t: fx.main, opKey: 'mcp', projects, throwaway: [] });
}

/** File tools write and delete on the host: keep their paths relative and free of "..". */
function safeFilePath(tool: string, args: unknown): void {
  if (!['write_file_by_id', 'delete_file_by_id'].includes(tool)) return;
  if (typeof args !== 'object' || args === null || typeof (args as { path?: unknown }).path !== 'string') return;
  const p = (args as { path: string }).path;
  if (isAbsolute(p.replace(/\0/g, '')) || p.split(/[\\/]/).includes('..') || p.includes('%'))
    setOwn(args, 'path', `fz-safe/${p.replace(/[\\/%.]/g, '_').slice(0, 100)}`);
}

async function fuzzMcpEndpoint(label: 'mcp' | 'mcp-session', path: string, token: () => string): Promise<void> {
  const t = fx.main;
  const envKey = `${label} envelopes`;
  if (selected(envKey)) {
    for (const [i, e] of envelopes(path, token()).entries()) {
      const res = await send(t.port, e.req, REQUEST_TIMEOUT_MS, tagOf(envKey, i, { req: e.req, note: e.label }));
      record(envKey, i, { req: e.req, note: e.label }, res, checkMcp(res, { expectStatus: e.expectStatus }, env()));
      await healthTick(t, envKey);
    }
    checkState(t, envKey);
  }
  let tools: Tool[];
  try {
    tools = await listTools(path, token());
  } catch (err) {
    failures.add(`${label} tools/list`, { kind: 'tools/list failed', detail: (err as Error).message }, `POST ${path} tools/list`);
    return;
  }
  for (const tool of tools) {
    const key = `${label} ${tool.name}`;
    if (!selected(key)) continue;
    await restoreFixtures(t);
    const schema = tool.inputSchema;
    const plans = fc.sample(fc.record({ valid: arbitraryFor(schema, mcpHints(t.projects)), mutation: mutationArb }), {
      seed: seedFor(key),
      numRuns: MCP_REQUESTS_PER_TOOL,
    });
    let budget = RUN_BUDGET[key] ?? 0;
    for (const [i, plan] of plans.entries()) {
      const { value, label: mlabel, cause } = applyMutation(plan.valid, schema, plan.mutation);
      safeFilePath(tool.name, value);
      let invalid = !matches(schema, value) && !hasProtoKey(value);
      const notes = [mlabel];
      const args = value as Record<string, unknown>;
      const fixtureProject = typeof args?.project === 'string' && t.projects.includes(args.project);
      const starts =
        !invalid &&
        ((tool.name === 'run_message' && fixtureProject) ||
          (tool.name === 'workflow_run' && fixtureProject && args.workflow === 'hello') ||
          tool.name === 'shell_run');
      if (starts) {
        if (budget > 0 && validRuns < MAX_VALID_RUNS) {
          budget--;
          validRuns++;
        } else if (tool.name === 'shell_run') {
          setOwn(args, 'zz_fuzz_capped', 1);
          invalid = true;
          notes.push('run cap: unknown key');
        } else {
          setOwn(args, 'project', NO_PROJECT);
          notes.push(`run cap: project ${NO_PROJECT}`);
        }
      }
      const req: RawRequest = {
        method: 'POST',
        path,
        headers: mcpHeaders(token()),
        body: toJsonText({ jsonrpc: '2.0', id: i + 1, method: 'tools/call', params: { name: tool.name, arguments: value } }),
      };
      const res = await send(t.port, req, REQUEST_TIMEOUT_MS, tagOf(key, i, { req, note: notes.join('; ') }));
      record(key, i, { req, note: notes.join('; '), cause }, res, checkMcp(res, { invalidArgs: invalid ? mlabel : undefined }, env()));
      await healthTick(t, key);
    }
    await healthTick(t, key, true);
    checkState(t, key);
  }
}

// ── Setup and the test ───────────────────────────────────────────────────────────────────────
let ops: Op[] = [];
const started = performance.now();

beforeAll(async () => {
  // Main home: shared areas, a grant, two projects, workflows, a session and its token.
  const h = testHome();
  homes.push(h);
  const home = h.home;
  for (const d of ['shared/docs', 'shared/data', 'pw/nonempty']) fs.mkdirSync(join(home, d), { recursive: true });
  fs.writeFileSync(join(home, 'pw/nonempty/keep'), 'x');
  fs.writeFileSync(join(home, 'pw/afile'), 'x');
  fs.writeFileSync(
    join(home, 'berth.yaml'),
    `# fuzz fixture: comments must survive edits\nshared_workspaces:\n  docs: ${home}/shared/docs # read by fz-a\n  data: ${home}/shared/data\nprojects:\n  fz-a:\n    shared_access: [docs]\n`,
  );
  const baseline = { 'fz-a': baselineOf('fz-a', true), 'fz-b': baselineOf('fz-b', false) };
  for (const b of Object.values(baseline)) h.create(b);
  for (const p of Object.keys(baseline)) writeWorkflows(h, p);
  const outcome = await h.run('fz-a', 'fz:alice', 'echo fixture');
  validRuns++;
  const main = await startServer('main', h, Object.keys(baseline), baseline);

  // Bare home: no berth.yaml at all (the operator routes must not write a broken one).
  const h2 = testHome();
  homes.push(h2);
  const bareBaseline = { 'fz-c': baselineOf('fz-c', false) };
  h2.create(bareBaseline['fz-c']);
  writeWorkflows(h2, 'fz-c');
  const bare = await startServer('bare', h2, ['fz-c'], bareBaseline);

  fx = {
    main,
    bare,
    session: outcome.sessionId,
    workspaceId: outcome.workspaceId,
    sessionToken: '',
    folderId: '',
    areas: ['docs', 'data'],
    workflows: Object.keys(WORKFLOWS),
  };
  await ensureSession();
  const folders = await send(
    main.port,
    {
      method: 'POST',
      path: '/mcp/session',
      headers: mcpHeaders(fx.sessionToken),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'list_folders', arguments: { scope: 'my_private' } },
      }),
    },
    REQUEST_TIMEOUT_MS,
  );
  if ('error' in folders) throw new Error(folders.error);
  try {
    fx.folderId =
      (JSON.parse(folders.text) as { result: { structuredContent: { folders: Array<{ uuid: string }> } } }).result.structuredContent
        .folders[0]?.uuid ?? '';
  } catch {
    fx.folderId = '0'.repeat(32); // the file tools are still fuzzed, with a folder that does not exist
  }

  const doc = await (
    await fetch(`http://127.0.0.1:${main.port}/openapi.json`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  ).json();
  ops = operationsOf(doc as Parameters<typeof operationsOf>[0]);
  expect(ops.length).toBeGreaterThan(15);
});

afterAll(async () => {
  closeAgent();
  for (const t of targets) await t.stop();
  for (const h of homes) await h[Symbol.asyncDispose]();
});

describe('fuzzing the HTTP API and MCP from their own schemas', () => {
  it(`stays up, never answers 5xx, and answers every error in berth's shape (seed ${SEED})`, async () => {
    // 1. Every HTTP operation of /openapi.json against the main home.
    for (const op of ops) await fuzzHttpOperation(op, fx.main, HTTP_REQUESTS_PER_OPERATION, '');

    // 2. The operator routes against a home without berth.yaml.
    for (const op of ops.filter((o) => /access|shared|grants|private-workspace|workflows$/.test(o.template))) {
      await fuzzHttpOperation(op, fx.bare, BARE_REQUESTS_PER_OPERATION, 'bare home: ');
    }

    // 3. A handful of 50 MB bodies.
    await fuzzBigBodies();

    // 4. MCP: the admin tools, then the session tools.
    await restoreFixtures(fx.main);
    await fuzzMcpEndpoint('mcp', '/mcp', () => ADMIN_TOKEN);
    await restoreFixtures(fx.main);
    await ensureSession();
    await fuzzMcpEndpoint('mcp-session', '/mcp/session', () => fx.sessionToken);

    // 5. Afterwards: still healthy, every file still valid.
    for (const t of [fx.main, fx.bare]) {
      const p = await healthProblem(t);
      if (p) failures.add('after the fuzz run (health)', p, `GET /healthz on the ${t.label} home`);
      checkState(t, 'the whole run');
    }

    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    const summary = `fuzz: ${total} requests over ${counts.size} operations/tools in ${seconds} s, ${validRuns} valid runs, seed ${SEED}`;
    console.log(summary);
    if (process.env.FUZZ_VERBOSE) {
      for (const [op, byAnswer] of answers) console.log(`${op}: ${[...byAnswer].map(([a, n]) => `${a}×${n}`).join(', ')}`);
    }
    if (failures.size) {
      const header = [
        `${failures.size} failed checks — ${summary}.`,
        `Replay: FUZZ_SEED=${SEED} FUZZ_ONLY='<operation>' npx vitest run test/integration/fuzz.test.ts`,
      ].join('\n');
      expect.fail(failures.report(header));
    }
  }, 300_000);
});
