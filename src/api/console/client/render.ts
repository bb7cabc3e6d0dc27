import type { ConsoleState } from '../state.js';
import { actions, ago, api, button, cell, confirmButton, linkCell, table, $ } from './dom.js';

const actionsOf = (...boxes: HTMLElement[]): HTMLTableCellElement => {
  const td = document.createElement('td');
  td.append(...boxes);
  return td;
};

/** What waits for the operator: requests to go past a grant, strangers of the chat bots. */
export function renderWaiting(w: ConsoleState['waiting'], refresh: () => Promise<void>): void {
  renderFrozen(w.frozen, refresh);
  const answer = (id: string, decision: string) => () => api('POST', '/console/api/approvals/' + id, { decision });
  table(
    'approvals',
    ['asked', 'project', 'tenant', 'session', 'wants', 'denied at', ''],
    w.approvals.map((a) => [
      cell(ago(a.asked_at)),
      cell(a.project),
      cell(a.tenant),
      cell(a.session),
      cell(
        a.kind === 'level'
          ? 'level ' + a.target
          : a.kind === 'secret'
            ? 'secret ' + a.target
            : a.kind === 'forget'
              ? 'to be forgotten: ' + a.target
              : a.target,
      ),
      cell(a.expires_at.slice(11, 19)),
      a.kind === 'level' || a.kind === 'forget'
        ? actions(button('Allow', answer(a.id, 'once'), refresh), button('Deny', answer(a.id, 'deny'), refresh))
        : actions(
            button('Allow once', answer(a.id, 'once'), refresh),
            button('Allow for the session', answer(a.id, 'session'), refresh),
            button('Deny', answer(a.id, 'deny'), refresh),
          ),
    ]),
    'Nothing waits for your answer.',
  );
  if (w.senders === null) {
    table('senders', [], [], 'No chat bridge with pairing is configured.');
    return;
  }
  const decide = (sender: string, decision: string) => () =>
    api('POST', '/console/api/senders/' + encodeURIComponent(sender), { decision });
  table(
    'senders',
    ['first seen', 'sender', 'name', 'first message', ''],
    w.senders.map((s) => [
      cell(ago(s.first_seen)),
      cell(s.sender),
      cell(s.name),
      cell(s.first_message ?? '(none kept)'),
      actions(button('Approve', decide(s.sender, 'approve'), refresh), button('Deny', decide(s.sender, 'deny'), refresh)),
    ]),
    'No stranger waits.',
  );
}

/** Tenants frozen for a decoy credential: where it was seen, the run, and lifting it after a look. */
function renderFrozen(frozen: ConsoleState['waiting']['frozen'], refresh: () => Promise<void>): void {
  const unfreeze = (project: string, tenant: string) => () =>
    api('POST', '/console/api/tenants/' + encodeURIComponent(project) + '/' + encodeURIComponent(tenant) + '/unfreeze', {});
  table(
    'frozen',
    ['since', 'project', 'tenant', 'seen at', 'run', ''],
    frozen.map((f) => [
      cell(ago(f.at)),
      cell(f.project),
      linkCell(f.tenant, 'tenant', f.project, f.tenant),
      cell(f.where, 'bad'),
      f.run ? linkCell(f.run, 'run', f.project, f.run) : cell('—'),
      actionsOf(confirmButton('Unfreeze', 'Let ' + f.tenant + ' run again?', unfreeze(f.project, f.tenant), refresh)),
    ]),
    'No tenant is frozen.',
  );
}

const stopRun = (project: string, run: string) => () =>
  api('POST', '/console/api/runs/' + encodeURIComponent(project) + '/' + encodeURIComponent(run) + '/stop', {});

export function renderRuns(runs: ConsoleState['runs'], refresh: () => Promise<void>): void {
  table(
    'live',
    ['project', 'run', 'tenant', 'session', 'kind', 'phase', 'since', ''],
    runs.live.map((r) => [
      cell(r.project),
      linkCell(r.run, 'run', r.project, r.run),
      r.tenant ? linkCell(r.tenant, 'tenant', r.project, r.tenant) : cell(null),
      r.session ? linkCell(r.session, 'session', r.project, r.session) : cell(null),
      cell(r.kind),
      cell(r.phase),
      cell(ago(r.since)),
      actionsOf(
        confirmButton('Stop', 'The agent is stopped now; its answer says so.', stopRun(r.project, r.run), refresh, { danger: true }),
      ),
    ]),
    'No run is in flight.',
  );
  table(
    'recent',
    ['finished', 'project', 'tenant', 'via', 'session', 'message', 'level', 'start', 'exit', 'ms', 'steps'],
    runs.recent.map((r) => [
      linkCell(ago(r.finished_at), 'run', r.project, r.run),
      cell(r.project),
      r.tenant ? linkCell(r.tenant, 'tenant', r.project, r.tenant) : cell(null),
      cell(r.channel),
      linkCell(r.session_title || r.session, 'session', r.project, r.session),
      r.message === null ? cell(null) : linkCell(r.message.length > 60 ? r.message.slice(0, 60) + '…' : r.message, 'run', r.project, r.run),
      cell(r.permission_level),
      cell(r.start),
      cell(r.timed_out ? 'timed out' : r.exit_code, r.exit_code === 0 && !r.timed_out ? 'ok' : 'bad'),
      cell(r.ms),
      cell(r.steps ? r.steps + (r.failed_steps ? ' (' + r.failed_steps + ' failed)' : '') : '', r.failed_steps ? 'bad' : undefined),
    ]),
    'No run yet.',
  );
  table(
    'interrupted',
    ['when', 'project', 'run', 'session', 'why'],
    runs.interrupted.map((r) => [
      cell(ago(r.interrupted_at)),
      cell(r.project),
      linkCell(r.run, 'run', r.project, r.run),
      r.session ? linkCell(r.session, 'session', r.project, r.session) : cell(null),
      cell(r.reason),
    ]),
    'No run was interrupted.',
  );
}

const pauseAction = (p: ConsoleState['projects'][number], refresh: () => Promise<void>) => {
  const path = '/console/api/projects/' + encodeURIComponent(p.name);
  return p.paused
    ? confirmButton('Resume', 'New runs start again.', () => api('POST', path + '/resume', {}), refresh)
    : confirmButton(
        'Pause',
        'No new run starts; people who write are told the operator paused it. Runs going on finish.',
        (reason) => api('POST', path + '/pause', reason ? { reason } : {}),
        refresh,
        { input: 'reason (optional, shown to them)', danger: true },
      );
};

export function renderProjects(s: ConsoleState, refresh: () => Promise<void>): void {
  table(
    'projects',
    ['project', 'state', '', 'agent', 'runtime', 'isolation', 'workspaces', 'egress allowlist', 'approvals', 'raise level', 'models'],
    s.projects.map((p) => [
      cell(p.name),
      cell(p.paused ? 'paused ' + ago(p.paused.at) + (p.paused.reason ? ': ' + p.paused.reason : '') : 'open', p.paused ? 'bad' : 'ok'),
      actionsOf(pauseAction(p, refresh)),
      cell(p.agent),
      cell(p.runtime),
      cell(p.isolation ? 'on' : 'off', p.isolation ? 'ok' : 'bad'),
      cell(p.workspaces),
      cell(p.egress.join(', ') || '(none)'),
      cell(p.approvals),
      cell(p.raise_level),
      cell(p.models.join(', ') || '(none)'),
    ]),
    'No project yet: berth project create <name>.',
  );
  $('sessions-count').textContent =
    s.sessions_total > s.sessions.length ? '(the newest ' + s.sessions.length + ' of ' + s.sessions_total + ')' : '';
  table(
    'sessions',
    ['last activity', 'project', 'tenant', 'session', 'title', 'level', 'runs'],
    s.sessions.map((x) => [
      cell(ago(x.updated_at)),
      cell(x.project),
      linkCell(x.tenant, 'tenant', x.project, x.tenant),
      linkCell(x.id, 'session', x.project, x.id),
      cell(x.title),
      cell(x.level),
      cell(x.runs),
    ]),
    'No session yet.',
  );
  const rows: HTMLTableCellElement[][] = [];
  for (const m of s.models) {
    for (const t of m.tenants) {
      const share = Math.min(1, Math.max(t.requests / m.budget.requests_per_hour, t.tokens / m.budget.tokens_per_hour));
      const bar = document.createElement('td');
      const fill = document.createElement('span');
      fill.className = 'bar';
      fill.style.width = Math.round(share * 100) + 'px';
      bar.append(fill, Math.round(share * 100) + '%');
      rows.push([
        cell(m.project),
        cell(t.tenant),
        cell(t.requests + ' / ' + m.budget.requests_per_hour),
        cell(t.tokens + ' / ' + m.budget.tokens_per_hour),
        bar,
      ]);
    }
  }
  table(
    'models',
    ['project', 'tenant', 'requests (last hour / budget)', 'tokens (last hour / budget)', 'budget used'],
    rows,
    'No model call in the last hour.',
  );
}
