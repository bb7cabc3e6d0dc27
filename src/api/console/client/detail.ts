import type { RunDetail } from '../../../admin/drill-down.js';
import type { AuditEntry } from '../../../store/audit.js';
import type { TranscriptEntry } from '../../../store/chat-transcripts.js';
import type { RunStep } from '../../../store/run-log.js';
import { ago, api, cell, confirmButton, el, link, linkCell, table, $ } from './dom.js';

/**
 * One run, session or tenant, opened from a link (#run/<project>/<id>, #session/…, #tenant/…):
 * fetched from /console/api/… and written as text into #detail. A run going on is fetched again
 * with each live update, so its steps and its end show without reload.
 */
type Route = { kind: 'run' | 'session' | 'tenant'; project: string; id: string };

export function routeOf(hash: string): Route | undefined {
  const [kind, project, id] = hash.replace(/^#/, '').split('/').map(decodeURIComponent);
  if ((kind === 'run' || kind === 'session' || kind === 'tenant') && project && id) return { kind, project, id };
  return undefined;
}

const path = (r: Route) => '/console/api/' + r.kind + 's/' + encodeURIComponent(r.project) + '/' + encodeURIComponent(r.id);

/** A definition list: label, value (text or an element). */
function facts(rows: Array<[string, string | number | null | undefined | HTMLElement]>): HTMLDListElement {
  const dl = el('dl', undefined, 'facts');
  for (const [k, v] of rows) {
    if (v === undefined) continue;
    const dd = el('dd');
    if (v instanceof HTMLElement) dd.append(v);
    else dd.textContent = v === null ? '—' : String(v);
    dl.append(el('dt', k), dd);
  }
  return dl;
}

const pre = (text: string, cls?: string) => el('pre', text, cls);
const h3 = (text: string) => el('h3', text);

function stepsList(steps: RunStep[], more?: number): HTMLElement {
  const ol = el('ol', undefined, 'steps');
  for (const s of steps) {
    const li = el('li', undefined, s.state === 'failed' ? 'bad' : undefined);
    li.append(el('code', s.tool), ' ' + s.detail, el('span', ' · ' + s.state + (s.ms === undefined ? '' : ' · ' + s.ms + ' ms'), 'muted'));
    ol.append(li);
  }
  if (more) ol.append(el('li', '… and ' + more + ' more', 'muted'));
  return ol;
}

/** A table of the detail under its heading (none: no heading), in a holder of its own id (dom.ts table fills it by id). */
function titledTable(box: HTMLElement, title: string | undefined, ...[id, head, rows, empty]: Parameters<typeof table>): void {
  const holder = el('div');
  holder.id = id;
  box.append(...(title === undefined ? [] : [h3(title)]), holder);
  table(id, head, rows, empty);
}

/** An action of the detail: a POST to berth's console API once confirmed, then the view again. */
const postButton = (
  label: string,
  consequence: string,
  url: string,
  body: object,
  again: () => Promise<void>,
  opts?: Parameters<typeof confirmButton>[4],
) => confirmButton(label, consequence, () => api('POST', url, body), again, opts);

function auditTable(box: HTMLElement, entries: AuditEntry[]): void {
  titledTable(
    box,
    undefined,
    'detail-audit',
    ['at', 'kind', 'action', 'actor', 'target', 'outcome'],
    entries.map((e) => [
      cell(e.at.slice(0, 19).replace('T', ' ')),
      cell(e.kind),
      cell(e.action),
      cell(e.actor),
      cell(e.target),
      cell(e.outcome + (e.code ? ' ' + e.code : ''), e.outcome === 'ok' ? 'ok' : 'bad'),
    ]),
    'No audit line names this run.',
  );
}

/** A receipt in one line: where it ran, from what start, what it saw and could reach, what was not observed (docs/receipts.md). */
function receiptLine(rc: NonNullable<NonNullable<RunDetail['record']>['receipt']>): string {
  const reach = !rc.policy.egress ? 'no network' : rc.policy.allow.length ? 'egress to ' + rc.policy.allow.join(', ') : 'no website';
  const secrets = rc.policy.secrets.length ? '; secrets added: ' + rc.policy.secrets.join(', ') : '';
  const unseen = rc.unobserved.length ? '; not observed: ' + rc.unobserved.join(', ') : '';
  return rc.planned.runtime + ', ' + rc.policy.start + ' start, folder: ' + rc.policy.folder + ', ' + reach + secrets + unseen;
}

function renderRun(box: HTMLElement, d: RunDetail & { audit: AuditEntry[] }, again: () => Promise<void>): void {
  const r = d.record;
  const title = el('h2', 'Run ' + d.run);
  const who = el('span');
  if (d.tenant) who.append(link(d.tenant, 'tenant', d.project, d.tenant));
  else who.append('—');
  who.append(' via ' + d.channel);
  const session = el('span');
  if (d.session) session.append(link(d.session.title || d.session.id, 'session', d.project, d.session.id));
  box.append(
    title,
    facts([
      ['state', d.state + (d.since ? ' since ' + ago(d.since) : '')],
      ['project', d.project],
      ['who', who],
      ['session', d.session ? session : null],
      ['level', r?.permission_level ?? d.session?.level ?? null],
      ['runtime', r?.runtime ?? null],
      ['container', d.start],
      [
        'timings',
        r
          ? `${Math.round(r.timings_ms.total)} ms (create ${r.timings_ms.create}, start ${r.timings_ms.start}, run ${r.timings_ms.run})`
          : null,
      ],
      ['exit', r ? (r.timed_out ? 'timed out' : r.exit_code) : null],
      ['finished', r ? r.finished_at.slice(0, 19).replace('T', ' ') : null],
      ['interrupted', d.interrupted ? d.interrupted.at + ': ' + d.interrupted.reason : undefined],
    ]),
  );
  if (d.state.startsWith('going on'))
    box.append(
      postButton(
        'Stop',
        'The agent is stopped now; its answer says so.',
        path({ kind: 'run', project: d.project, id: d.run }) + '/stop',
        {},
        again,
        { danger: true },
      ),
    );
  for (const w of r?.warnings ?? []) box.append(el('p', w, 'bad'));
  box.append(h3('Message'), pre(r?.message ?? '(not recorded)'));
  box.append(h3('Steps'), r?.steps?.length ? stepsList(r.steps, r.more_steps) : el('p', 'No step recorded.', 'empty'));
  box.append(h3('Answer'), pre(r?.answer ?? '(none)', 'answer'));
  if (r?.stderr) box.append(h3('stderr'), pre(r.stderr, 'stderr'));
  box.append(h3('What it touched'));
  box.append(
    facts([
      ['model calls', `${d.model_calls.count} (${d.model_calls.input_tokens} in, ${d.model_calls.output_tokens} out tokens)`],
      [
        'secrets',
        d.secrets.granted.length ? 'granted ' + d.secrets.granted.join(', ') + '; used ' + (d.secrets.used.join(', ') || 'none') : 'none',
      ],
      ['files in', (r?.files_in ?? []).map((f) => f.path + ' (' + f.size + ' B)').join(', ') || 'none'],
      ['files out', d.files_out.map((f) => f.name + ' (' + f.size + ' B)').join(', ') || 'none'],
      [
        'receipt',
        r?.receipt_digest
          ? r.receipt_digest + (r.receipt?.violations.length ? ' — ' + r.receipt.violations.length + ' violation(s)' : ' — as planned')
          : null,
      ],
      ['isolation', r?.receipt ? receiptLine(r.receipt) : null],
      ...(r?.receipt?.violations.length ? ([['violations', r.receipt.violations.join('; ')]] as Array<[string, string]>) : []),
    ]),
  );
  titledTable(
    box,
    'Egress (hosts asked and answered)',
    'detail-egress',
    ['at', 'method', 'host', 'status', 'why', 'secret'],
    d.egress.map((e) => [
      cell(e.at.slice(11, 19)),
      cell(e.method),
      cell(e.host + ':' + e.port),
      cell(e.status, e.status < 400 ? 'ok' : 'bad'),
      cell(e.reason),
      cell(e.secret),
    ]),
    'No host was asked.',
  );
  box.append(h3('Audit'));
  auditTable(box, d.audit);
}

interface SessionView {
  project: string;
  session: {
    id: string;
    title?: string;
    tenant_key: string;
    channel: string;
    created_at: string;
    updated_at: string;
    runs: number;
    settings: { permission_level: string };
  };
  runs: Array<{
    run: string;
    finished_at: string;
    message: string | null;
    answer: string | null;
    stderr: string | null;
    exit_code: number;
    ms: number;
    steps: number;
  }>;
  transcript: Array<Omit<TranscriptEntry, 'output'>>;
}

function renderSession(box: HTMLElement, d: SessionView, again: () => Promise<void>): void {
  const s = d.session;
  const base = '/console/api/sessions/' + encodeURIComponent(d.project) + '/' + encodeURIComponent(s.id);
  const level = el('span');
  for (const l of ['low', 'medium', 'high'])
    if (l !== s.settings.permission_level)
      level.append(postButton('Set ' + l, 'From its next run the agent works at level ' + l + '.', base + '/level', { level: l }, again));
  box.append(
    el('h2', 'Session ' + (s.title || s.id)),
    facts([
      ['id', s.id],
      ['project', d.project],
      ['tenant', link(s.tenant_key, 'tenant', d.project, s.tenant_key)],
      ['via', s.channel],
      ['level', s.settings.permission_level],
      ['runs', s.runs],
      ['started', s.created_at.slice(0, 19).replace('T', ' ')],
      ['last', ago(s.updated_at)],
    ]),
    level,
    postButton(
      'End session',
      'Its runs going on are stopped, its container let go and its tokens revoked; its history and files stay.',
      base + '/end',
      {},
      again,
      { danger: true, yes: 'Yes, end it' },
    ),
    confirmButton(
      'Delete session',
      'Its history and what the agent remembers of it go; the files stay. The next message starts afresh.',
      () =>
        api('POST', base + '/delete', {}).then(
          () => (location.hash = '#tenant/' + encodeURIComponent(d.project) + '/' + encodeURIComponent(s.tenant_key)),
        ),
      again,
      { danger: true, yes: 'Yes, delete it' },
    ),
  );
  if (d.transcript.length) {
    box.append(h3('Transcript (as the person saw it)'));
    const list = el('div', undefined, 'transcript');
    for (const e of d.transcript) {
      const item = el('div', undefined, 'tx tx-' + e.role);
      item.append(el('span', e.at.slice(11, 19) + ' ' + e.role, 'muted'), pre(e.text));
      if (e.steps?.length) item.append(stepsList(e.steps));
      list.append(item);
    }
    box.append(list);
  }
  titledTable(
    box,
    'Runs',
    'detail-runs',
    ['finished', 'message', 'answer', 'exit', 'ms', 'steps'],
    d.runs.map((r) => [
      linkCell(ago(r.finished_at), 'run', d.project, r.run),
      cell(r.message),
      cell((r.answer ?? '').slice(0, 300) + (r.stderr ? '\n[stderr] ' + r.stderr.slice(-200) : '')),
      cell(r.exit_code, r.exit_code === 0 ? 'ok' : 'bad'),
      cell(r.ms),
      cell(r.steps),
    ]),
    'No run yet.',
  );
}

interface TenantView {
  project: string;
  tenant: string;
  channel: string;
  pause: { paused: boolean; since?: string; reason?: string };
  sessions: Array<{ id: string; title: string | null; level: string; runs: number; updated_at: string }>;
  today: {
    runs: number;
    run_ms: number;
    model_requests: number;
    tokens: number;
    budget: { requests_per_hour?: number; tokens_per_hour?: number; tokens_per_day?: number };
  };
  recent_runs: Array<{ run: string; finished_at: string; message: string | null; exit_code: number; ms: number }>;
  schedules: Array<{ id: string; task: string; next_at: string | null; runs: number; last_outcome: string | null }>;
  chat_user: string | null;
  access: { links: Array<{ created_at: string; expires_at: string }>; logins: Array<{ created_at: string; expires_at: string }> } | null;
  waiting: Array<{ kind: string; target: string }>;
  pairing: { first_seen: string; first_message?: string } | null;
}

function renderTenant(box: HTMLElement, d: TenantView, again: () => Promise<void>): void {
  const b = d.today.budget;
  box.append(
    el('h2', 'Tenant ' + d.tenant),
    facts([
      ['project', d.project + (d.pause.paused ? ' (paused)' : '')],
      ['via', d.channel],
      ['today (UTC)', `${d.today.runs} run(s), ${Math.round(d.today.run_ms / 1000)} s of runs`],
      [
        'model use today',
        `${d.today.model_requests} request(s), ${d.today.tokens} tokens` + (b.tokens_per_day ? ' of ' + b.tokens_per_day + ' a day' : ''),
      ],
      ['chat logins', d.access ? `${d.access.logins.length} login(s), ${d.access.links.length} unused link(s)` : undefined],
      ['waiting', d.waiting.length ? d.waiting.map((w) => w.kind + ' ' + w.target).join(', ') : 'nothing'],
      [
        'pairing',
        d.pairing
          ? 'waits since ' + ago(d.pairing.first_seen) + (d.pairing.first_message ? ': “' + d.pairing.first_message + '”' : '')
          : undefined,
      ],
    ]),
  );
  if (d.chat_user && d.access && (d.access.logins.length || d.access.links.length))
    box.append(
      postButton(
        'Revoke chat logins',
        'They are logged out everywhere and their unused links stop working; their sessions and files stay.',
        '/console/api/projects/' + encodeURIComponent(d.project) + '/chat-logins/revoke',
        { user: d.chat_user },
        again,
        { danger: true, yes: 'Yes, revoke' },
      ),
    );
  titledTable(
    box,
    'Sessions',
    'detail-sessions',
    ['last activity', 'session', 'level', 'runs'],
    d.sessions.map((s) => [cell(ago(s.updated_at)), linkCell(s.title || s.id, 'session', d.project, s.id), cell(s.level), cell(s.runs)]),
    'No session yet.',
  );
  titledTable(
    box,
    'Schedules',
    'detail-schedules',
    ['id', 'task', 'next', 'runs', 'last'],
    d.schedules.map((x) => [
      cell(x.id),
      cell(x.task),
      cell(x.next_at ? x.next_at.slice(0, 16).replace('T', ' ') : 'never'),
      cell(x.runs),
      cell(x.last_outcome),
    ]),
    'No schedule.',
  );
  titledTable(
    box,
    'Runs today',
    'detail-tenant-runs',
    ['finished', 'message', 'exit', 'ms'],
    d.recent_runs.map((r) => [
      linkCell(ago(r.finished_at), 'run', d.project, r.run),
      cell(r.message),
      cell(r.exit_code, r.exit_code === 0 ? 'ok' : 'bad'),
      cell(r.ms),
    ]),
    'No run today.',
  );
}

let shown: { route: Route; going: boolean } | undefined;

/** Show the view the hash names (or none); `quiet`: a live refresh, only for a run still going on. */
export async function showDetail(quiet = false): Promise<void> {
  const section = $('s-detail');
  const route = routeOf(location.hash);
  if (!route) {
    section.hidden = true;
    shown = undefined;
    return;
  }
  const same = shown && shown.route.kind === route.kind && shown.route.project === route.project && shown.route.id === route.id;
  if (quiet && (!same || !shown?.going)) return;
  const box = $('detail');
  const again = () => showDetail();
  try {
    const d = await api<unknown>('GET', path(route));
    // Written into the page's box itself: its tables are found by id.
    box.replaceChildren();
    if (route.kind === 'run') renderRun(box, d as RunDetail & { audit: AuditEntry[] }, again);
    else if (route.kind === 'session') renderSession(box, d as SessionView, again);
    else renderTenant(box, d as TenantView, again);
    shown = { route, going: route.kind === 'run' && (d as RunDetail).state.startsWith('going on') };
  } catch (e) {
    box.replaceChildren(el('p', (e as Error).message, 'bad'));
    shown = { route, going: false };
  }
  section.hidden = false;
  if (!quiet) section.scrollIntoView({ block: 'start' });
}
