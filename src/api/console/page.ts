import { createHash } from 'node:crypto';
import { packageAsset, type PackageAsset } from '../package-assets.js';

/**
 * The console page: one HTML document, its CSS and script inline (allowed by hash in a strict
 * CSP), and uPlot (a small chart library) served by berth from its npm package. The script
 * writes textContent only: every name on the page (a tenant, a host, a session title) is
 * someone else's text. It polls /console/api/state every POLL_MS.
 */
const POLL_MS = 3000;

let assets: { uplot: PackageAsset; uplotCss: PackageAsset } | undefined;
export function consoleAssets(): { uplot: PackageAsset; uplotCss: PackageAsset } {
  return (assets ??= {
    uplot: packageAsset('/console/assets', 'uplot', 'uplot', './uPlot.iife.min.js', 'js'),
    uplotCss: packageAsset('/console/assets', 'uplot', 'uplot', './uPlot.min.css', 'css'),
  });
}

const STYLE = `
*{box-sizing:border-box}
body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f6f6f4;color:#111}
header{display:flex;flex-wrap:wrap;gap:.6rem;align-items:center;padding:.5rem .9rem;background:#1d2a3a;color:#fff}
header h1{font-size:1rem;margin:0}
header nav{display:flex;flex-wrap:wrap;gap:.6rem}
header a{color:#cfe0ff}
#updated{margin-left:auto;font-size:.8rem;opacity:.8}
main{padding:.5rem .9rem;max-width:1400px}
section{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.5rem .8rem;margin:.7rem 0;overflow-x:auto}
h2{font-size:1rem;margin:.2rem 0 .5rem}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:.25rem .4rem;border-bottom:1px solid #eee;vertical-align:top;overflow-wrap:anywhere}
th{color:#555;font-weight:600}
.empty{color:#777}
.bad{color:#a00}.ok{color:#070}
button{font:inherit;padding:.25rem .6rem;margin:.1rem .2rem .1rem 0}
#charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:.6rem}
.chart h3{font-size:.85rem;margin:.2rem 0;color:#333}
form.filters{display:flex;flex-wrap:wrap;gap:.4rem;align-items:end;margin-bottom:.4rem}
form.filters label{display:flex;flex-direction:column;font-size:.8rem;color:#444}
form.filters input,form.filters select{font:inherit;padding:.2rem}
#alert{color:#a00;min-height:1.2em;white-space:pre-wrap}
@media (max-width:700px){table{min-width:640px}}
.bar{display:inline-block;height:.6rem;background:#4a7bd0;vertical-align:middle;margin-right:.3rem}
`;

const SCRIPT = `
'use strict';
const $ = (id) => document.getElementById(id);
const charts = {};

function cell(text, cls) {
  const td = document.createElement('td');
  td.textContent = text === null || text === undefined ? '—' : String(text);
  if (cls) td.className = cls;
  return td;
}
function table(id, head, rows, empty) {
  const box = $(id);
  if (!rows.length) {
    const p = document.createElement('p');
    p.className = 'empty';
    p.textContent = empty;
    box.replaceChildren(p);
    return;
  }
  const t = document.createElement('table');
  const tr = document.createElement('tr');
  for (const h of head) { const th = document.createElement('th'); th.textContent = h; th.scope = 'col'; tr.append(th); }
  const thead = document.createElement('thead');
  thead.append(tr);
  const tbody = document.createElement('tbody');
  for (const r of rows) { const row = document.createElement('tr'); row.append(...r); tbody.append(row); }
  t.append(thead, tbody);
  box.replaceChildren(t);
}
function button(label, onclick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = label;
  b.onclick = async () => {
    b.disabled = true;
    try { await onclick(); $('alert').textContent = ''; } catch (e) { $('alert').textContent = e.message; }
    await refresh();
  };
  return b;
}
function actions(...buttons) { const td = document.createElement('td'); td.append(...buttons); return td; }
const ago = (iso) => { const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000); return s < 60 ? Math.round(s) + ' s ago' : s < 3600 ? Math.round(s / 60) + ' min ago' : s < 86400 ? Math.round(s / 3600) + ' h ago' : iso.slice(0, 16).replace('T', ' '); };

async function api(method, path, body) {
  const res = await fetch(path, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
  const data = await res.json().catch(() => ({}));
  if (res.status === 401) { location.reload(); throw new Error('signed out'); }
  if (!res.ok) throw new Error(((data.error || {}).code || res.status) + ': ' + ((data.error || {}).message || res.statusText));
  return data;
}

function renderWaiting(w) {
  table('approvals', ['asked', 'project', 'tenant', 'session', 'wants', 'denied at', ''], w.approvals.map((a) => [
    cell(ago(a.asked_at)), cell(a.project), cell(a.tenant), cell(a.session),
    cell(a.kind === 'level' ? 'level ' + a.target : a.target), cell(a.expires_at.slice(11, 19)),
    a.kind === 'level'
      ? actions(button('Allow', () => api('POST', '/console/api/approvals/' + a.id, { decision: 'once' })), button('Deny', () => api('POST', '/console/api/approvals/' + a.id, { decision: 'deny' })))
      : actions(
          button('Allow once', () => api('POST', '/console/api/approvals/' + a.id, { decision: 'once' })),
          button('Allow for the session', () => api('POST', '/console/api/approvals/' + a.id, { decision: 'session' })),
          button('Deny', () => api('POST', '/console/api/approvals/' + a.id, { decision: 'deny' }))),
  ]), 'Nothing waits for your answer.');
  if (w.senders === null) { table('senders', [], [], 'No chat bridge with pairing is configured.'); return; }
  table('senders', ['first seen', 'sender', 'name', ''], w.senders.map((s) => [
    cell(ago(s.first_seen)), cell(s.sender), cell(s.name),
    actions(button('Approve', () => api('POST', '/console/api/senders/' + encodeURIComponent(s.sender), { decision: 'approve' })), button('Deny', () => api('POST', '/console/api/senders/' + encodeURIComponent(s.sender), { decision: 'deny' }))),
  ]), 'No stranger waits.');
}

const CHARTS = [
  ['runs', 'Runs per minute', (s) => [s.runs]],
  ['latency', 'Run latency p50 / p95 (ms)', (s) => [s.p50_ms, s.p95_ms]],
  ['warm', 'Warm containers', (s) => [s.warm]],
  ['refusals', 'Refusals per minute', (s) => [s.refusals]],
];
const COLORS = ['#2d6cdf', '#d2542b'];
function renderCharts(series) {
  for (const [id, title, pick] of CHARTS) {
    const data = [series.minutes, ...pick(series)];
    const box = $('chart-' + id);
    if (charts[id]) { charts[id].setData(data); continue; }
    if (!window.uPlot) { box.textContent = title + ': the chart library did not load'; continue; }
    const width = Math.max(260, box.clientWidth || 300);
    const lines = pick(series).map((_, i) => ({ label: id === 'latency' ? (i ? 'p95' : 'p50') : title, stroke: COLORS[i], width: 2, spanGaps: false, points: { show: true, size: 5 } }));
    charts[id] = new uPlot({ width, height: 160, series: [{}, ...lines], axes: [{}, { size: 56 }], legend: { show: id === 'latency' } }, data, box);
  }
}

function renderRuns(runs) {
  table('live', ['project', 'run', 'session', 'kind', 'phase', 'since'], runs.live.map((r) => [cell(r.project), cell(r.run), cell(r.session), cell(r.kind), cell(r.phase), cell(ago(r.since))]), 'No run is in flight.');
  table('recent', ['finished', 'project', 'session', 'level', 'runtime', 'exit', 'ms', 'steps'], runs.recent.map((r) => [
    cell(ago(r.finished_at)), cell(r.project), cell(r.session), cell(r.permission_level), cell(r.runtime),
    cell(r.timed_out ? 'timed out' : r.exit_code, r.exit_code === 0 && !r.timed_out ? 'ok' : 'bad'), cell(Math.round(r.timings_ms.total)), cell(r.more_steps || ''),
  ]), 'No run yet.');
  table('interrupted', ['when', 'project', 'run', 'session', 'why'], runs.interrupted.map((r) => [cell(ago(r.interrupted_at)), cell(r.project), cell(r.run), cell(r.session), cell(r.reason)]), 'No run was interrupted.');
}

function renderProjects(s) {
  table('projects', ['project', 'agent', 'runtime', 'isolation', 'workspaces', 'egress allowlist', 'approvals', 'raise level', 'models'], s.projects.map((p) => [
    cell(p.name), cell(p.agent), cell(p.runtime), cell(p.isolation ? 'on' : 'off', p.isolation ? 'ok' : 'bad'), cell(p.workspaces), cell(p.egress.join(', ') || '(none)'), cell(p.approvals), cell(p.raise_level), cell(p.models.join(', ') || '(none)'),
  ]), 'No project yet: berth project create <name>.');
  $('sessions-count').textContent = s.sessions_total > s.sessions.length ? '(the newest ' + s.sessions.length + ' of ' + s.sessions_total + ')' : '';
  table('sessions', ['last activity', 'project', 'tenant', 'session', 'title', 'level', 'runs'], s.sessions.map((x) => [cell(ago(x.updated_at)), cell(x.project), cell(x.tenant), cell(x.id), cell(x.title), cell(x.level), cell(x.runs)]), 'No session yet.');
  const rows = [];
  for (const m of s.models) for (const t of m.tenants) {
    const share = Math.min(1, Math.max(t.requests / m.budget.requests_per_hour, t.tokens / m.budget.tokens_per_hour));
    const bar = document.createElement('td');
    const fill = document.createElement('span');
    fill.className = 'bar';
    fill.style.width = Math.round(share * 100) + 'px';
    bar.append(fill, Math.round(share * 100) + '%');
    rows.push([cell(m.project), cell(t.tenant), cell(t.requests + ' / ' + m.budget.requests_per_hour), cell(t.tokens + ' / ' + m.budget.tokens_per_hour), bar]);
  }
  table('models', ['project', 'tenant', 'requests (last hour / budget)', 'tokens (last hour / budget)', 'budget used'], rows, 'No model call in the last hour.');
}

async function refresh() {
  try {
    const s = await api('GET', '/console/api/state');
    renderWaiting(s.waiting);
    renderCharts(s.series);
    renderRuns(s.runs);
    renderProjects(s);
    $('updated').textContent = 'updated ' + s.at.slice(11, 19);
  } catch (e) {
    $('updated').textContent = 'not updated: ' + e.message;
  }
}

async function loadAudit(ev) {
  if (ev) ev.preventDefault();
  const q = new URLSearchParams();
  for (const name of ['since', 'kind', 'actor', 'project']) if ($('audit-' + name).value) q.set(name, $('audit-' + name).value);
  q.set('limit', '100');
  try {
    const { entries } = await api('GET', '/console/api/audit?' + q);
    table('audit', ['at', 'kind', 'action', 'actor', 'project', 'target', 'outcome'], entries.map((e) => [cell(e.at.slice(0, 19).replace('T', ' ')), cell(e.kind), cell(e.action), cell(e.actor), cell(e.project), cell(e.target), cell(e.outcome + (e.code ? ' ' + e.code : ''), e.outcome === 'ok' ? 'ok' : 'bad')]), 'No audit event matches.');
    $('alert').textContent = '';
  } catch (e) { $('alert').textContent = e.message; }
}

$('audit-form').onsubmit = loadAudit;
// Sign-out ends this login on the server too (the cookie alone could be copied); then the sign-in form.
$('signout').onclick = async () => {
  $('signout').disabled = true;
  try { await fetch('/docs/logout', { method: 'POST', body: new URLSearchParams({ next: '/console' }), redirect: 'manual' }); } catch (e) { /* the page below says whether it worked */ }
  location.assign('/console');
};
refresh();
loadAudit();
setInterval(refresh, ${POLL_MS});
`;

const section = (id: string, title: string, body: string) => `<section id="s-${id}" aria-labelledby="h-${id}"><h2 id="h-${id}">${title}</h2>${body}</section>`;

const BODY = `<header><h1>berth console</h1><nav aria-label="sections"><a href="#s-waiting">Waiting</a><a href="#s-charts">Last hour</a><a href="#s-runs">Runs</a><a href="#s-projects">Projects</a><a href="#s-sessions">Sessions</a><a href="#s-models">Model use</a><a href="#s-audit">Audit log</a><a href="/docs">API</a></nav><span id="updated" role="status"></span><button id="signout" type="button">Sign out</button></header>
<main>
<div id="alert" role="alert"></div>
${section('waiting', 'Waiting for you', '<h3>Requests to go past a grant</h3><div id="approvals"></div><h3>Strangers of the chat bots</h3><div id="senders"></div>')}
${section('charts', 'The last hour', '<div id="charts"><div class="chart"><h3>Runs per minute</h3><div id="chart-runs"></div></div><div class="chart"><h3>Run latency p50 / p95 (ms)</h3><div id="chart-latency"></div></div><div class="chart"><h3>Warm containers</h3><div id="chart-warm"></div></div><div class="chart"><h3>Refusals per minute</h3><div id="chart-refusals"></div></div></div>')}
${section('runs', 'Runs', '<h3>In flight</h3><div id="live"></div><h3>Recent</h3><div id="recent"></div><h3>Interrupted</h3><div id="interrupted"></div>')}
${section('projects', 'Projects', '<div id="projects"></div>')}
${section('sessions', 'Sessions <span id="sessions-count"></span>', '<div id="sessions"></div>')}
${section('models', 'Model use per tenant', '<div id="models"></div>')}
${section(
  'audit',
  'Audit log',
  '<form id="audit-form" class="filters"><label>since<select id="audit-since"><option value="1h">1 h</option><option value="10m">10 min</option><option value="24h">24 h</option><option value="7d">7 days</option><option value="">all</option></select></label><label>kind<select id="audit-kind"><option value="">any</option><option>admin</option><option>auth_failure</option><option>permission_denied</option><option>sandbox_violation</option><option>run_receipt</option></select></label><label>actor<input id="audit-actor" placeholder="operator, tenant:…"></label><label>project<input id="audit-project"></label><button type="submit">Filter</button></form><div id="audit"></div>',
)}
</main>`;

const hash = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

export function consolePage(): { html: string; headers: Record<string, string> } {
  const { uplot, uplotCss } = consoleAssets();
  return {
    html: `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>berth console</title><link rel="stylesheet" href="${uplotCss.path}"><style>${STYLE}</style></head>\n<body>${BODY}<script src="${uplot.path}"></script><script>${SCRIPT}</script></body></html>`,
    headers: {
      // uPlot sizes its parts through the CSSOM (element.style), which style-src does not govern.
      'content-security-policy': `default-src 'none'; script-src 'self' ${hash(SCRIPT)}; style-src 'self' ${hash(STYLE)}; connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    },
  };
}
