import type { LiveView } from '../../../admin/live-view.js';
import type { AuditEntry } from '../../../store/audit.js';
import type { ConsoleState } from '../state.js';
import { renderCharts } from './charts.js';
import { showDetail } from './detail.js';
import { $, $input, api, cell, table } from './dom.js';
import { renderLive } from './live.js';
import { renderProjects, renderRuns, renderWaiting } from './render.js';

/**
 * The console page's script (bundled by api/page-bundle.ts). Live: it listens to
 * /console/api/events (server-sent events, a state every two seconds); while that is down it
 * polls /console/api/state every POLL_MS. It writes textContent only (every name on the page is
 * someone else's text).
 */
const POLL_MS = 5000;

type Pushed = ConsoleState & { live: LiveView | null };

/** Who this page's sign-in is (the state answer says; the live stream is shared and does not): a viewer is told they only look. */
let you: { role: string; who?: string; can_act: boolean } | undefined;

function render(s: ConsoleState & { you?: typeof you }, live?: LiveView | null): void {
  if (s.you) you = s.you;
  renderWaiting(s.waiting, refresh);
  renderCharts(s.series);
  renderRuns(s.runs, refresh);
  renderProjects(s, refresh);
  if (live !== undefined) renderLive(live);
  const viewer = you && !you.can_act ? ' · ' + (you.who ?? 'you') + ' may look, not act (viewer)' : '';
  $('updated').textContent = 'updated ' + s.at.slice(11, 19) + (stream ? ' · live' : '') + viewer;
  void showDetail(true);
}

async function refresh(): Promise<void> {
  try {
    const [s, live] = await Promise.all([
      api<ConsoleState>('GET', '/console/api/state'),
      api<LiveView | null>('GET', '/console/api/live').catch(() => undefined),
    ]);
    render(s, live);
  } catch (e) {
    $('updated').textContent = 'not updated: ' + (e as Error).message;
  }
}

let stream: EventSource | undefined;
let poll: ReturnType<typeof setInterval> | undefined;
function listen(): void {
  stream = new EventSource('/console/api/events');
  stream.addEventListener('state', (ev) => {
    if (poll) clearInterval(poll);
    poll = undefined;
    const s = JSON.parse((ev as MessageEvent<string>).data) as Pushed;
    render(s, s.live);
  });
  // Down (the server restarts, a bound was reached): poll until it is back; EventSource tries again itself.
  stream.onerror = () => {
    poll ??= setInterval(() => void refresh(), POLL_MS);
  };
}

async function loadAudit(ev?: Event): Promise<void> {
  ev?.preventDefault();
  const q = new URLSearchParams();
  for (const name of ['since', 'kind', 'actor', 'project']) if ($input('audit-' + name).value) q.set(name, $input('audit-' + name).value);
  q.set('limit', '100');
  try {
    const { entries } = await api<{ entries: AuditEntry[] }>('GET', '/console/api/audit?' + q);
    table(
      'audit',
      ['at', 'kind', 'action', 'actor', 'project', 'target', 'outcome'],
      entries.map((e) => [
        cell(e.at.slice(0, 19).replace('T', ' ')),
        cell(e.kind),
        cell(e.action),
        cell(e.actor),
        cell(e.project),
        cell(e.target),
        cell(e.outcome + (e.code ? ' ' + e.code : ''), e.outcome === 'ok' ? 'ok' : 'bad'),
      ]),
      'No audit event matches.',
    );
    $('alert').textContent = '';
  } catch (e) {
    $('alert').textContent = (e as Error).message;
  }
}

($('audit-form') as HTMLFormElement).onsubmit = (ev) => void loadAudit(ev);
// Sign-out ends this login on the server too (the cookie alone could be copied); then the sign-in form.
$('signout').onclick = async () => {
  ($('signout') as HTMLButtonElement).disabled = true;
  stream?.close();
  try {
    await fetch('/docs/logout', { method: 'POST', body: new URLSearchParams({ next: '/console' }), redirect: 'manual' });
  } catch {
    // the page below says whether it worked
  }
  location.assign('/console');
};
window.addEventListener('hashchange', () => void showDetail());
void refresh();
void loadAudit();
void showDetail();
listen();
