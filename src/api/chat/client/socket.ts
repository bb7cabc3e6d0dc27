import type { WebServerMessage } from '../../../bridges/web-protocol.js';
import { api, loggedOut, showAny, showError, uuid, type ChatError } from './api.js';
import { approvalError, settleApproval, showApproval } from './approvals.js';
import { add, appendToLog, liveBlock, noteLevel, showWorking } from './render.js';
import { filesBlock, hasWaiting, takeWaiting } from './files.js';
import { adoptServerLevel, loadSessions, selectSession } from './sessions.js';
import { closeLiveSteps, onNote, onStep } from './steps.js';
import { $, $input, $select, key, state } from './state.js';

function setStatus(text: string): void {
  $('status').textContent = text;
  $('status').classList.toggle('on', text === 'connected');
}

/** The message box fits what is in it (one line when empty). */
export function growInput(): void {
  const input = $input('input');
  input.style.height = 'auto';
  input.style.height = input.scrollHeight + 'px';
}

export function updateSend(): void {
  const open = state.ws !== null && state.ws.readyState === WebSocket.OPEN;
  ($('send') as HTMLButtonElement).disabled = !open || state.pending !== null;
}

/** What berth pushes: approvals and settings for any session of this person, the run's progress for the shown one. */
function onMessage(m: WebServerMessage): void {
  if (m.type === 'approval') {
    state.approvals.set(m.approval.id, m.approval);
    if (m.session_id === state.session) showApproval(m.approval);
    return;
  }
  if (m.type === 'approval_answered') return settleApproval(m);
  if (m.type === 'level') {
    // The operator allowed a level this person asked for: the selector (and what it sends next) follows.
    localStorage.setItem(key('level:' + m.session_id), m.permission_level);
    if (m.session_id === state.session) $select('level').value = m.permission_level;
    loadSessions().catch(showAny);
    return;
  }
  if (m.type === 'error') {
    if (approvalError(m)) return;
    showError(m);
    if (state.pending && m.id === state.pending.id) {
      state.pending = null;
      updateSend();
    }
    return;
  }
  if (m.type === 'session') {
    // /new from this window switches to the new session; other windows only learn it exists.
    const mine = state.pending?.command;
    loadSessions()
      .then(() => (mine ? selectSession(m.session_id) : undefined))
      .catch(showAny);
    return;
  }
  if (m.type === 'done') {
    if (m.session_id === state.session && state.starting) {
      state.starting = false;
      showWorking();
    }
    if (state.pending && m.id === state.pending.id) {
      const command = state.pending.command;
      state.pending = null;
      updateSend();
      if (command) adoptServerLevel().catch(showAny);
    }
    // The list shows each conversation's name, level and last activity: a run changed them.
    loadSessions().catch(showAny);
    return;
  }
  if (m.type === 'accepted' || m.session_id !== state.session) return;
  // Output of any kind: the container is up.
  if (state.starting && m.type !== 'typing') {
    state.starting = false;
    showWorking();
  }
  if (m.type === 'container') {
    state.starting = m.phase === 'starting';
    showWorking();
  } else if (m.type === 'output') {
    const span = document.createElement('span');
    span.className = m.stream;
    span.textContent = m.chunk;
    liveBlock().append(span);
    ($('log').lastElementChild as HTMLElement).scrollIntoView({ block: 'end' });
  } else if (m.type === 'typing') {
    state.typing = m.on;
    showWorking();
  } else if (m.type === 'step') {
    onStep(m.step);
  } else if (m.type === 'note') {
    onNote(m.text);
  } else if (m.type === 'files') {
    appendToLog(Object.assign(filesBlock(m.files), { className: 'msg files' }));
  } else if (m.type === 'reply') {
    document.querySelector('#log .msg.live')?.remove();
    // The steps stay above the answer they led to.
    closeLiveSteps(m.text);
    add('reply', m.text, m.format, m.output, m.exit);
  }
}

export function connect(): void {
  const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/chat/ws');
  state.ws = ws;
  setStatus('connecting…');
  ws.onopen = () => {
    state.retry = 0;
    setStatus('connected');
    updateSend();
  };
  ws.onmessage = (ev: MessageEvent<string>) => {
    try {
      onMessage(JSON.parse(ev.data) as WebServerMessage);
    } catch (e) {
      showAny(e);
    }
  };
  ws.onclose = () => {
    state.pending = null;
    updateSend();
    if (state.out) return;
    setStatus('disconnected: reconnecting…');
    // A socket closed for a login that ended (revoked, expired) is not opened again.
    const again = () => setTimeout(connect, Math.min(10000, 500 * 2 ** state.retry++));
    api('GET', '/chat/api/me').then(again, (e: ChatError) => (e.status === 401 ? loggedOut(e) : again()));
  };
}

export function send(ev: Event): void {
  ev.preventDefault();
  const input = $input('input').value;
  if ((!input.trim() && !hasWaiting()) || state.pending || !state.ws || state.ws.readyState !== WebSocket.OPEN) return;
  // The uploads go with it (none while one is still uploading: it waits for the next Send).
  const files = takeWaiting();
  if (files === null) return showError({ code: 'BUSY', message: 'a file is still uploading; send again in a moment' });
  const id = uuid();
  state.pending = { id, command: input.trim().startsWith('/') };
  showError(null);
  noteLevel($select('level').value);
  const shown = add('user', input);
  if (files.length) shown.append(filesBlock(files));
  state.ws.send(
    JSON.stringify({
      type: 'run',
      id,
      session_id: state.session,
      permission_level: $select('level').value,
      input,
      ...(files.length ? { files: files.map((f) => f.id) } : {}),
    }),
  );
  $input('input').value = '';
  growInput();
  updateSend();
}
