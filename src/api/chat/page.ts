import { createHash } from 'node:crypto';
import { chatAssets } from './assets.js';

/**
 * The web chat page: one HTML document, its CSS and script inline (no CDN: it works offline),
 * allowed by hash in a strict Content-Security-Policy, beside the two libraries berth serves
 * itself (assets.ts). The script writes textContent, except an answer in Markdown (the project's
 * chat format): rendered by marked and sanitized by DOMPurify before it is shown, its links
 * opening outside, its code blocks with a copy button. Wire shapes: src/bridges/web-protocol.ts.
 */
const STYLE = `
*{box-sizing:border-box}
[hidden]{display:none!important}
body{font:15px/1.4 system-ui,sans-serif;margin:0;background:#f6f6f4;color:#111}
#app{display:flex;flex-direction:column;height:100vh}
header{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;padding:.5rem .8rem;background:#1d2a3a;color:#fff}
header h1{font-size:1rem;margin:0 .5rem 0 0}
header select,header button{font:inherit;padding:.2rem .4rem}
header label{display:flex;align-items:center;gap:.3rem;max-width:100%;min-width:0}
header select{max-width:100%;min-width:0;text-overflow:ellipsis}
#status{margin-left:auto;font-size:.85rem;opacity:.8}
#alert{color:#a00;padding:0 .8rem;min-height:1.4em;white-space:pre-wrap}
#log{flex:1;overflow:auto;padding:.5rem .8rem}
.msg{margin:.4rem 0;max-width:100%}
.msg pre{margin:0;padding:.45rem .6rem;border-radius:6px;white-space:pre-wrap;word-break:break-word;font:13px/1.35 ui-monospace,monospace}
.msg.user pre{background:#dbe9ff;font-family:inherit;font-size:15px}
.msg.reply pre{background:#fff;border:1px solid #ddd}
.msg.live pre{background:#111;color:#d8ffd8}
.msg.reply .stderr{color:#a00}
.msg.reply .exit{margin-top:.3rem;color:#a00;font-weight:600}
.msg.live .stderr{color:#ffb0b0}
.msg.note{color:#555;font-size:.8rem;text-align:center;margin:.6rem 0 .2rem}
.msg.steps{font:13px/1.35 ui-monospace,monospace}
.msg.steps summary{color:#555;cursor:pointer}
.step{padding:.2rem .5rem;border-left:3px solid #999;margin:.15rem 0;background:#f7f7f5;overflow-wrap:anywhere}
.step.running{border-color:#c90}.step.ok{border-color:#2a2}.step.failed{border-color:#c22}
.step .tool{font-weight:600;margin-right:.4rem}.step .ms{color:#777;margin-left:.4rem}
.step .res{color:#555;white-space:pre-wrap;margin:.15rem 0 0}
.agent-note{color:#333;font-family:inherit;font-size:14px;margin:.2rem 0 .2rem .2rem;white-space:pre-wrap}
.msg.reply .md{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.2rem .8rem;overflow-wrap:anywhere}
.md pre{position:relative;background:#f2f2f0;border:1px solid #e2e2de;padding:.5rem .6rem;overflow:auto}
.md code{font:13px/1.35 ui-monospace,monospace}
.md button.copy{position:absolute;top:.25rem;right:.25rem;font-size:.75rem;padding:.1rem .4rem}
.md table{border-collapse:collapse}.md td,.md th{border:1px solid #ddd;padding:.2rem .4rem}
.msg.approval{background:#fff8e1;border:1px solid #d9a400;border-radius:6px;padding:.5rem .7rem;overflow-wrap:anywhere}
.approval p{margin:.2rem 0}.approval .when{color:#555;font-size:.8rem}
.approval .choices{display:flex;flex-wrap:wrap;gap:.4rem;margin:.4rem 0}
.approval button{font:inherit;padding:.35rem .8rem}
.approval .outcome{font-weight:600}
#typing{padding:0 .8rem;font-size:.85rem;color:#555;min-height:1.2em}
form{display:flex;gap:.5rem;padding:.5rem .8rem;border-top:1px solid #ddd;background:#fff}
textarea{flex:1;font:inherit;padding:.4rem;min-height:2.6rem;resize:vertical}
button[type=submit]{font:inherit;padding:.4rem 1rem}
#out{padding:2rem;max-width:32rem}
`;

const SCRIPT = `
'use strict';
const $ = (id) => document.getElementById(id);
const state = { me: null, session: null, sessions: [], ws: null, pending: null, retry: 0, out: false, steps: new Map(), approvals: new Map() };
const key = (what) => 'berth-chat:' + state.me.project + ':' + state.me.user + ':' + what;

// crypto.randomUUID needs a secure context; a chat served on a LAN address over http is not one.
function uuid() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 15) | 64; b[8] = (b[8] & 63) | 128;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' + h.slice(20);
}

async function api(method, path, body) {
  const res = await fetch(path, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    const e = data.error || {};
    const issue = (e.issues || [])[0];
    throw Object.assign(new Error(issue ? issue.field + ': ' + issue.reason : e.message || res.statusText), { code: e.code, status: res.status, field: issue && issue.field });
  }
  return data;
}

function showError(e) {
  if (e && e.status === 401) return loggedOut(e);
  $('alert').textContent = e ? (e.code || 'ERROR') + ': ' + e.message : '';
}

/** No login (never, expired, revoked, or two cookies): the page says so and stops reconnecting. */
function loggedOut(e) {
  state.out = true;
  $('app').hidden = true;
  $('out').hidden = false;
  $('why').textContent = e && e.message && !/^not logged in/.test(e.message) ? e.message + '.' : '';
}

/** Copy a code block's text (the clipboard API needs a secure context: else a selection and copy). */
async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    const area = document.createElement('textarea');
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand('copy');
    area.remove();
  }
  button.textContent = 'Copied';
  setTimeout(() => (button.textContent = 'Copy'), 1500);
}

/**
 * An answer in Markdown: rendered, then sanitized (no script, no handler, no form, no image: an
 * image would be a request the answer makes for itself, and the page's CSP loads none) before it
 * is shown.
 */
function markdown(text) {
  const box = document.createElement('div');
  box.className = 'md';
  box.innerHTML = DOMPurify.sanitize(marked.parse(text, { gfm: true, breaks: true }), { USE_PROFILES: { html: true }, FORBID_TAGS: ['style', 'form', 'input', 'button', 'img'], FORBID_ATTR: ['style'] });
  for (const a of box.querySelectorAll('a[href]')) {
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
  }
  for (const pre of box.querySelectorAll('pre')) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'copy';
    button.textContent = 'Copy';
    button.setAttribute('aria-label', 'copy this code');
    button.onclick = () => copyText(pre.querySelector('code') ? pre.querySelector('code').textContent : pre.textContent, button);
    pre.append(button);
  }
  return box;
}

/** A reply's output as it was printed: stdout and stderr in order, stderr marked; the exit status when not 0. */
function printedOutput(output, exit) {
  const pre = document.createElement('pre');
  for (const part of output) {
    const span = document.createElement('span');
    span.className = part.stream;
    if (part.stream === 'stderr') span.title = 'stderr';
    span.textContent = part.text;
    pre.append(span);
  }
  if (exit !== undefined && exit !== 0) {
    const status = document.createElement('div');
    status.className = 'exit';
    status.textContent = 'exit ' + exit;
    pre.append(status);
  }
  return pre;
}

function add(role, text, format, output, exit) {
  const el = document.createElement('div');
  el.className = 'msg ' + role;
  if (role === 'reply' && output && output.length) el.append(printedOutput(output, exit));
  else if (role === 'reply' && format === 'markdown' && window.marked && window.DOMPurify) el.append(markdown(text));
  else {
    const pre = document.createElement('pre');
    pre.textContent = text;
    el.append(pre);
  }
  $('log').append(el);
  el.scrollIntoView({ block: 'end' });
  return el;
}

/** Where the level changes in a conversation (and what it starts at): a note before the message. */
function noteLevel(level) {
  if (!level || level === state.lastLevel) return;
  const el = document.createElement('div');
  el.className = 'msg note';
  el.textContent = (state.lastLevel ? 'level changed to ' : 'level ') + level;
  $('log').append(el);
  state.lastLevel = level;
}

/** The agent's steps for the message in flight (live), or for a reply from the history (folded). */
function stepsBox(live) {
  if (live) {
    let el = document.querySelector('#log .msg.steps.current');
    if (el) return el;
    el = document.createElement('div');
    el.className = 'msg steps current';
    el.setAttribute('role', 'log');
    el.setAttribute('aria-live', 'polite');
    el.setAttribute('aria-label', 'what the agent is doing');
    $('log').append(el);
    state.steps = new Map();
    return el;
  }
  const el = document.createElement('details');
  el.className = 'msg steps';
  $('log').append(el);
  return el;
}

const STEP_MARK = { running: '▸', ok: '✓', failed: '✗', ended: '·' };

/** One tool call: its mark, tool, what it works on, how long it took, a short result. */
function renderStep(el, step) {
  el.className = 'step ' + step.state;
  el.replaceChildren();
  const tool = document.createElement('span');
  tool.className = 'tool';
  tool.textContent = (STEP_MARK[step.state] || '·') + ' ' + step.tool;
  const detail = document.createElement('span');
  detail.textContent = step.detail;
  el.append(tool, detail);
  const ms = document.createElement('span');
  ms.className = 'ms';
  ms.textContent = step.state === 'running' ? 'running…' : step.ms !== undefined ? (step.ms < 1000 ? Math.round(step.ms) + ' ms' : (step.ms / 1000).toFixed(1) + ' s') : '';
  el.append(ms);
  if (step.result) {
    const res = document.createElement('div');
    res.className = 'res';
    res.textContent = step.result;
    el.append(res);
  }
  el.setAttribute('aria-label', step.tool + ' ' + step.detail + ': ' + step.state);
}

function onStep(step) {
  const box = stepsBox(true);
  let el = state.steps.get(step.id);
  if (!el) {
    el = document.createElement('div');
    state.steps.set(step.id, el);
    box.append(el);
  }
  renderStep(el, step);
  el.scrollIntoView({ block: 'end' });
}

function onNote(text) {
  const el = document.createElement('div');
  el.className = 'agent-note';
  el.textContent = text;
  stepsBox(true).append(el);
  el.scrollIntoView({ block: 'end' });
}

/** A reply's steps from the history: folded under a count. */
function addSteps(steps) {
  const box = stepsBox(false);
  const summary = document.createElement('summary');
  summary.textContent = steps.length + (steps.length === 1 ? ' step' : ' steps') + (steps.some((s) => s.state === 'failed') ? ' (some failed)' : '');
  box.append(summary);
  for (const step of steps) {
    const el = document.createElement('div');
    renderStep(el, step);
    box.append(el);
  }
}

const CHOICES = [['once', 'Allow once'], ['session', 'Allow for this session'], ['deny', 'Deny']];
const ANSWERED = { once: 'Allowed for this message', session: 'Allowed for this conversation', deny: 'Denied' };

/** The agent asks for a host outside the project's allowlist: the person answers here (or is told the operator was asked). */
function showApproval(a) {
  if (a.kind !== 'egress' || document.getElementById('approval-' + a.id)) return;
  const el = document.createElement('div');
  el.className = 'msg approval';
  el.id = 'approval-' + a.id;
  el.setAttribute('role', 'group');
  el.setAttribute('aria-label', 'your agent asks to reach ' + a.target);
  const what = document.createElement('p');
  what.append('Your agent wants to reach ');
  const host = document.createElement('strong');
  host.textContent = a.target;
  what.append(host, ', which this project does not allow.');
  const when = document.createElement('p');
  when.className = 'when';
  const mins = Math.max(1, Math.round((Date.parse(a.expires_at) - Date.parse(a.asked_at)) / 60000));
  el.append(what);
  if (a.approver === 'operator') {
    when.textContent = 'The operator has been asked to allow it; it waits up to ' + mins + ' min.';
  } else {
    const choices = document.createElement('div');
    choices.className = 'choices';
    for (const [decision, label] of CHOICES) {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = label;
      b.dataset.decision = decision;
      b.onclick = () => answerApproval(a.id, decision, el);
      choices.append(b);
    }
    el.append(choices);
    when.textContent = 'No answer within ' + mins + ' min: denied.';
  }
  el.append(when);
  $('log').append(el);
  el.scrollIntoView({ block: 'end' });
}

function answerApproval(id, decision, el) {
  if (!state.ws || state.ws.readyState !== WebSocket.OPEN) return showError({ code: 'DISCONNECTED', message: 'not connected: answer again once the page reconnects' });
  for (const b of el.querySelectorAll('button')) b.disabled = true;
  state.ws.send(JSON.stringify({ type: 'approve', id, decision }));
}

function settleApproval(m) {
  state.approvals.delete(m.id);
  const el = document.getElementById('approval-' + m.id);
  if (!el) return;
  const outcome = document.createElement('p');
  outcome.className = 'outcome';
  outcome.setAttribute('role', 'status');
  outcome.textContent = m.text ? m.text : m.by === 'berth' ? 'No longer waiting: the agent finished' : m.by === 'timeout' ? 'Nobody answered in time: denied' : (ANSWERED[m.decision] || 'Answered') + (m.by === 'operator' ? ' (by the operator)' : '');
  const choices = el.querySelector('.choices');
  if (choices) choices.replaceWith(outcome);
  else el.querySelector('.when').replaceWith(outcome);
  const when = el.querySelector('.when');
  if (when) when.remove();
}

function liveBlock() {
  let el = document.querySelector('#log .msg.live');
  if (!el) el = add('live', '');
  return el.firstChild;
}

function setStatus(text) { $('status').textContent = text; }
function updateSend() {
  const open = state.ws && state.ws.readyState === WebSocket.OPEN;
  $('send').disabled = !open || state.pending !== null;
}

async function loadSessions() {
  state.sessions = (await api('GET', '/chat/api/sessions')).sessions;
  const select = $('session');
  select.replaceChildren(...state.sessions.map((s) => {
    const o = document.createElement('option');
    o.value = s.id;
    o.textContent = (s.title || 'new conversation') + ' · ' + s.permission_level + ' · ' + ago(s.updated_at);
    o.title = s.id;
    return o;
  }));
  if (state.session) select.value = state.session;
}

/** "just now", "5 min ago", "3 h ago", or the date: when a conversation last changed. */
function ago(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return 'just now';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  if (s < 86400) return Math.floor(s / 3600) + ' h ago';
  return iso.slice(0, 10);
}

async function renameSession() {
  const id = state.session;
  const current = (state.sessions.find((s) => s.id === id) || {}).title || '';
  const title = prompt('Name this conversation', current);
  if (title === null || title.trim() === current) return;
  await api('PUT', '/chat/api/sessions/' + encodeURIComponent(id), { title });
  showError(null);
  await loadSessions();
}

function serverLevel(id) {
  const s = state.sessions.find((x) => x.id === id);
  return s ? s.permission_level : 'medium';
}

async function syncLevel(level) {
  const id = state.session;
  try {
    const { session } = await api('PUT', '/chat/api/sessions/' + encodeURIComponent(id) + '/settings', { permission_level: level });
    localStorage.setItem(key('level:' + id), session.permission_level);
    $('level').value = session.permission_level;
    showError(null);
  } catch (e) {
    showError(e);
    await loadSessions();
    $('level').value = serverLevel(id);
    localStorage.setItem(key('level:' + id), serverLevel(id));
  }
}

/** After a command (/level, /new), the server's settings win over the selector. */
async function adoptServerLevel() {
  await loadSessions();
  $('level').value = serverLevel(state.session);
  localStorage.setItem(key('level:' + state.session), serverLevel(state.session));
}

async function selectSession(id) {
  state.session = id;
  localStorage.setItem(key('session'), id);
  $('session').value = id;
  const stored = localStorage.getItem(key('level:' + id));
  $('level').value = stored || serverLevel(id);
  if (stored && stored !== serverLevel(id)) await syncLevel(stored);
  else localStorage.setItem(key('level:' + id), serverLevel(id));
  const { entries } = await api('GET', '/chat/api/sessions/' + encodeURIComponent(id) + '/history');
  $('log').replaceChildren();
  state.lastLevel = null;
  for (const e of entries) {
    if (e.role === 'user') noteLevel(e.level);
    if (e.steps && e.steps.length) addSteps(e.steps);
    add(e.role, e.text, e.format, e.output, e.exit);
  }
  for (const a of state.approvals.values()) if (a.session === id) showApproval(a);
  $('typing').textContent = '';
}

async function newSession() {
  const { session } = await api('POST', '/chat/api/sessions');
  await loadSessions();
  await selectSession(session.id);
}

async function deleteSession() {
  const id = state.session;
  if (!id || !confirm('Delete this conversation? Its history and what the agent remembers of it go; your files stay.')) return;
  await api('DELETE', '/chat/api/sessions/' + encodeURIComponent(id));
  localStorage.removeItem(key('level:' + id));
  state.session = null;
  showError(null);
  await loadSessions();
  if (state.sessions.length) await selectSession(state.sessions[state.sessions.length - 1].id);
  else await newSession();
}

function onMessage(m) {
  if (m.type === 'approval') {
    state.approvals.set(m.approval.id, m.approval);
    if (m.session_id === state.session) showApproval(m.approval);
    return;
  }
  if (m.type === 'approval_answered') return settleApproval(m);
  if (m.type === 'level') {
    // The operator allowed a level this person asked for: the selector (and what it sends next) follows.
    localStorage.setItem(key('level:' + m.session_id), m.permission_level);
    if (m.session_id === state.session) $('level').value = m.permission_level;
    loadSessions().catch(showError);
    return;
  }
  if (m.type === 'error') {
    // A card answered too late (answered already, timed out, its run ended) waits no more.
    const card = m.id && document.getElementById('approval-' + m.id);
    if (card && m.code === 'APPROVAL_NOT_FOUND') return settleApproval({ id: m.id, text: 'No longer waiting: ' + m.message });
    if (card) for (const b of card.querySelectorAll('button')) b.disabled = false;
    showError(m);
    if (state.pending && m.id === state.pending.id) { state.pending = null; updateSend(); }
    return;
  }
  if (m.type === 'session') {
    // /new from this window switches to the new session; other windows only learn it exists.
    const mine = state.pending && state.pending.command;
    loadSessions().then(() => (mine ? selectSession(m.session_id) : undefined)).catch(showError);
    return;
  }
  if (m.type === 'done') {
    if (state.pending && m.id === state.pending.id) {
      const command = state.pending.command;
      state.pending = null;
      updateSend();
      if (command) adoptServerLevel().catch(showError);
    }
    // The list shows each conversation's name, level and last activity: a run changed them.
    loadSessions().catch(showError);
    return;
  }
  if (m.session_id !== state.session) return;
  if (m.type === 'output') {
    const span = document.createElement('span');
    span.className = m.stream;
    span.textContent = m.chunk;
    liveBlock().append(span);
    $('log').lastChild.scrollIntoView({ block: 'end' });
  } else if (m.type === 'typing') {
    $('typing').textContent = m.on ? 'the agent is working…' : '';
  } else if (m.type === 'step') {
    onStep(m.step);
  } else if (m.type === 'note') {
    onNote(m.text);
  } else if (m.type === 'reply') {
    const live = document.querySelector('#log .msg.live');
    if (live) live.remove();
    // The steps stay above the answer they led to.
    const steps = document.querySelector('#log .msg.steps.current');
    if (steps) {
      steps.classList.remove('current');
      // The agent's last words are the answer: shown once, below.
      const last = steps.lastElementChild;
      if (last && last.className === 'agent-note' && last.textContent.trim() === m.text.trim()) last.remove();
      if (!steps.firstChild) steps.remove();
    }
    add('reply', m.text, m.format, m.output, m.exit);
  }
}

function connect() {
  const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/chat/ws');
  state.ws = ws;
  setStatus('connecting…');
  ws.onopen = () => { state.retry = 0; setStatus('connected'); updateSend(); };
  ws.onmessage = (ev) => { try { onMessage(JSON.parse(ev.data)); } catch (e) { showError(e); } };
  ws.onclose = () => {
    state.pending = null;
    updateSend();
    if (state.out) return;
    setStatus('disconnected: reconnecting…');
    // A socket closed for a login that ended (revoked, expired) is not opened again.
    const again = () => setTimeout(connect, Math.min(10000, 500 * 2 ** state.retry++));
    api('GET', '/chat/api/me').then(again, (e) => (e.status === 401 ? loggedOut(e) : again()));
  };
}

function send(ev) {
  ev.preventDefault();
  const input = $('input').value;
  if (!input.trim() || state.pending || !state.ws || state.ws.readyState !== WebSocket.OPEN) return;
  const id = uuid();
  state.pending = { id, command: input.trim().startsWith('/') };
  showError(null);
  noteLevel($('level').value);
  add('user', input);
  state.ws.send(JSON.stringify({ type: 'run', id, session_id: state.session, permission_level: $('level').value, input }));
  $('input').value = '';
  updateSend();
}

async function boot() {
  try {
    state.me = await api('GET', '/chat/api/me');
  } catch (e) {
    loggedOut(e);
    return;
  }
  $('who').textContent = state.me.user + ' @ ' + state.me.project;
  await loadSessions();
  let pick = localStorage.getItem(key('session'));
  if (!state.sessions.some((s) => s.id === pick)) pick = state.sessions.length ? state.sessions[state.sessions.length - 1].id : null;
  if (pick) await selectSession(pick);
  else await newSession();
  $('session').onchange = () => selectSession($('session').value).catch(showError);
  $('new').onclick = () => newSession().catch(showError);
  $('delete').onclick = () => deleteSession().catch(showError);
  $('rename').onclick = () => renameSession().catch(showError);
  $('level').onchange = () => { localStorage.setItem(key('level:' + state.session), $('level').value); syncLevel($('level').value); };
  $('composer').onsubmit = send;
  $('input').onkeydown = (ev) => { if (ev.key === 'Enter' && !ev.shiftKey) send(ev); };
  connect();
}

boot().catch(showError);
`;

const BODY = `<div id="app">
<header><h1>berth chat</h1><span id="who"></span>
<label>Session <select id="session" aria-label="session"></select></label><button id="new" type="button">New session</button><button id="rename" type="button">Rename</button><button id="delete" type="button">Delete session</button>
<label>Level <select id="level" aria-label="permission level"><option value="low">low</option><option value="medium">medium</option><option value="high">high</option></select></label>
<span id="status"></span></header>
<div id="alert" role="alert"></div>
<main id="log" aria-live="polite"></main>
<div id="typing"></div>
<form id="composer"><textarea id="input" aria-label="message" placeholder="Message your agent (/help for commands)"></textarea><button id="send" type="submit" disabled>Send</button></form>
</div>
<div id="out" hidden><h1>berth chat</h1><p>You are not logged in. <span id="why"></span></p><p>Open the chat link your admin gave you: it logs this browser in, once. If you used it already, or it expired, ask the admin for a new one.</p></div>`;

const hash = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/** The page and the headers it needs (its CSP allows exactly its own script and style). */
export function chatPage(host: string | undefined): { html: string; headers: Record<string, string> } {
  const socketOrigins = host && /^[A-Za-z0-9.[\]:-]{1,300}$/.test(host) ? ` ws://${host} wss://${host}` : '';
  const { marked, purify } = chatAssets();
  return {
    html: `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>berth chat</title><style>${STYLE}</style></head>\n<body>${BODY}<script src="${marked.path}"></script><script src="${purify.path}"></script><script>${SCRIPT}</script></body></html>`,
    headers: {
      'content-security-policy': `default-src 'none'; script-src 'self' ${hash(SCRIPT)}; style-src ${hash(STYLE)}; connect-src 'self'${socketOrigins}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    },
  };
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
const plainPage = (body: string) => `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>berth chat</title></head><body><h1>berth chat</h1>${body}</body></html>`;

/**
 * The login pages (/chat/login): no script, no style, a form that may post to this origin only,
 * never framed. Referrer policy same-origin, not no-referrer: with no-referrer the browser sends
 * "Origin: null" on the form's POST, and the login could not tell its own page from a stranger's.
 */
export const LOGIN_PAGE_HEADERS: Record<string, string> = {
  'content-security-policy': "default-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
};

/** A link that works, opened: it asks first, so a link-preview fetcher's GET uses nothing up. */
export function chatLoginConfirmPage(token: string, who: { project: string; user: string }): string {
  const user = escapeHtml(who.user);
  return plainPage(
    `<p>This link logs this browser in to the chat as <strong>${user}</strong> in project <strong>${escapeHtml(who.project)}</strong>. It works once.</p>` +
      `<form method="post" action="/chat/login"><input type="hidden" name="token" value="${escapeHtml(token)}"><button type="submit" id="login">Log in as ${user}</button></form>`,
  );
}

/** The one page for a link that does not work, whatever the reason (used, expired, revoked, unknown). */
export function chatLoginFailedPage(reason = 'This chat link does not work.'): string {
  return plainPage(
    `<p role="alert">${escapeHtml(reason)}</p><p>A chat link works once and for a short time. If you opened it before, that browser is logged in; otherwise ask the admin for a new one.</p>`,
  );
}
