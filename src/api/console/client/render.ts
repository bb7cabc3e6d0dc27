import type { ConsoleState } from '../state.js';
import { actions, ago, api, button, cell, table, $ } from './dom.js';

/** What waits for the operator: requests to go past a grant, strangers of the chat bots. */
export function renderWaiting(w: ConsoleState['waiting'], refresh: () => Promise<void>): void {
  const answer = (id: string, decision: string) => () => api('POST', '/console/api/approvals/' + id, { decision });
  table(
    'approvals',
    ['asked', 'project', 'tenant', 'session', 'wants', 'denied at', ''],
    w.approvals.map((a) => [
      cell(ago(a.asked_at)),
      cell(a.project),
      cell(a.tenant),
      cell(a.session),
      cell(a.kind === 'level' ? 'level ' + a.target : a.target),
      cell(a.expires_at.slice(11, 19)),
      a.kind === 'level'
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
    ['first seen', 'sender', 'name', ''],
    w.senders.map((s) => [
      cell(ago(s.first_seen)),
      cell(s.sender),
      cell(s.name),
      actions(button('Approve', decide(s.sender, 'approve'), refresh), button('Deny', decide(s.sender, 'deny'), refresh)),
    ]),
    'No stranger waits.',
  );
}

export function renderRuns(runs: ConsoleState['runs']): void {
  table(
    'live',
    ['project', 'run', 'session', 'kind', 'phase', 'since'],
    runs.live.map((r) => [cell(r.project), cell(r.run), cell(r.session), cell(r.kind), cell(r.phase), cell(ago(r.since))]),
    'No run is in flight.',
  );
  table(
    'recent',
    ['finished', 'project', 'session', 'level', 'runtime', 'exit', 'ms'],
    runs.recent.map((r) => [
      cell(ago(r.finished_at)),
      cell(r.project),
      cell(r.session),
      cell(r.permission_level),
      cell(r.runtime),
      cell(r.timed_out ? 'timed out' : r.exit_code, r.exit_code === 0 && !r.timed_out ? 'ok' : 'bad'),
      cell(Math.round(r.timings_ms.total)),
    ]),
    'No run yet.',
  );
  table(
    'interrupted',
    ['when', 'project', 'run', 'session', 'why'],
    runs.interrupted.map((r) => [cell(ago(r.interrupted_at)), cell(r.project), cell(r.run), cell(r.session), cell(r.reason)]),
    'No run was interrupted.',
  );
}

export function renderProjects(s: ConsoleState): void {
  table(
    'projects',
    ['project', 'agent', 'runtime', 'isolation', 'workspaces', 'egress allowlist', 'approvals', 'raise level', 'models'],
    s.projects.map((p) => [
      cell(p.name),
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
      cell(x.tenant),
      cell(x.id),
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
