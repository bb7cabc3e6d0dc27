import type { AuditEntry } from '../../../store/audit.js';
import type { ConsoleState } from '../state.js';
import { renderCharts } from './charts.js';
import { $, $input, api, cell, table } from './dom.js';
import { renderProjects, renderRuns, renderWaiting } from './render.js';

/**
 * The console page's script (bundled by api/page-bundle.ts): it polls /console/api/state every
 * POLL_MS and writes textContent only (every name on the page is someone else's text).
 */
const POLL_MS = 3000;

async function refresh(): Promise<void> {
  try {
    const s = await api<ConsoleState>('GET', '/console/api/state');
    renderWaiting(s.waiting, refresh);
    renderCharts(s.series);
    renderRuns(s.runs);
    renderProjects(s);
    $('updated').textContent = 'updated ' + s.at.slice(11, 19);
  } catch (e) {
    $('updated').textContent = 'not updated: ' + (e as Error).message;
  }
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
  try {
    await fetch('/docs/logout', { method: 'POST', body: new URLSearchParams({ next: '/console' }), redirect: 'manual' });
  } catch {
    // the page below says whether it worked
  }
  location.assign('/console');
};
void refresh();
void loadAudit();
setInterval(() => void refresh(), POLL_MS);
