import type { ChatSessionView } from '../../../bridges/web-protocol.js';
import type { TranscriptEntry } from '../../../store/chat-transcripts.js';
import { api, showError } from './api.js';
import { settleApproval, showApproval } from './approvals.js';
import { ask } from './dialog.js';
import { add, appendToLog, noteLevel, showEmpty, showWorking } from './render.js';
import { filesBlock } from './files.js';
import { addSteps } from './steps.js';
import { $, $select, key, state } from './state.js';

/** "just now", "5 min ago", "3 h ago", or the date: when a conversation last changed. */
function ago(iso: string): string {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return 'just now';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  if (s < 86400) return Math.floor(s / 3600) + ' h ago';
  return iso.slice(0, 10);
}

export async function loadSessions(): Promise<void> {
  state.sessions = (await api<{ sessions: ChatSessionView[] }>('GET', '/chat/api/sessions')).sessions;
  const select = $select('session');
  select.replaceChildren(
    ...state.sessions.map((s) => {
      const o = document.createElement('option');
      o.value = s.id;
      o.textContent = (s.title || 'new conversation') + ' · ' + s.permission_level + ' · ' + ago(s.updated_at);
      o.title = s.id;
      return o;
    }),
  );
  if (state.session) select.value = state.session;
}

export async function renameSession(): Promise<void> {
  const id = state.session!;
  const current = state.sessions.find((s) => s.id === id)?.title || '';
  const title = await ask({ text: 'Name this conversation', ok: 'Rename', value: current });
  if (title === null || title.trim() === current) return;
  await api('PUT', '/chat/api/sessions/' + encodeURIComponent(id), { title });
  showError(null);
  await loadSessions();
}

function serverLevel(id: string | null): string {
  return state.sessions.find((x) => x.id === id)?.permission_level ?? 'medium';
}

export async function syncLevel(level: string): Promise<void> {
  const id = state.session!;
  try {
    const { session } = await api<{ session: ChatSessionView }>('PUT', '/chat/api/sessions/' + encodeURIComponent(id) + '/settings', {
      permission_level: level,
    });
    localStorage.setItem(key('level:' + id), session.permission_level);
    $select('level').value = session.permission_level;
    showError(null);
  } catch (e) {
    showError(e as Error);
    await loadSessions();
    $select('level').value = serverLevel(id);
    localStorage.setItem(key('level:' + id), serverLevel(id));
  }
}

/** After a command (/level, /new), the server's settings win over the selector. */
export async function adoptServerLevel(): Promise<void> {
  await loadSessions();
  $select('level').value = serverLevel(state.session);
  localStorage.setItem(key('level:' + state.session), serverLevel(state.session));
}

export async function selectSession(id: string): Promise<void> {
  state.session = id;
  localStorage.setItem(key('session'), id);
  $select('session').value = id;
  const stored = localStorage.getItem(key('level:' + id));
  $select('level').value = stored || serverLevel(id);
  if (stored && stored !== serverLevel(id)) await syncLevel(stored);
  else localStorage.setItem(key('level:' + id), serverLevel(id));
  const { entries } = await api<{ entries: TranscriptEntry[] }>('GET', '/chat/api/sessions/' + encodeURIComponent(id) + '/history');
  $('log').replaceChildren();
  state.lastLevel = null;
  if (!entries.length) showEmpty();
  for (const e of entries) {
    if (e.role === 'approval' && e.approval) showApproval(e.approval);
    else if (e.role === 'answer' && e.answer) settleApproval(e.answer);
    else if (e.role === 'user' || e.role === 'reply') {
      if (e.role === 'user') noteLevel(e.level);
      if (e.steps && e.steps.length) addSteps(e.steps);
      const el = add(e.role, e.text, e.format, e.output, e.exit);
      if (e.files?.length) el.append(filesBlock(e.files));
    } else if (e.role === 'files' && e.files) appendToLog(Object.assign(filesBlock(e.files), { className: 'msg files' }));
  }
  for (const a of state.approvals.values()) if (a.session === id) showApproval(a);
  state.starting = state.typing = false;
  showWorking();
}

export async function newSession(): Promise<void> {
  const { session } = await api<{ session: ChatSessionView }>('POST', '/chat/api/sessions');
  await loadSessions();
  await selectSession(session.id);
}

export async function deleteSession(): Promise<void> {
  const id = state.session;
  if (!id) return;
  const sure = await ask({
    text: 'Delete this conversation? Its history and what the agent remembers of it go; your files stay.',
    ok: 'Delete',
    danger: true,
  });
  if (sure === null) return;
  await api('DELETE', '/chat/api/sessions/' + encodeURIComponent(id));
  localStorage.removeItem(key('level:' + id));
  state.session = null;
  showError(null);
  await loadSessions();
  const last = state.sessions[state.sessions.length - 1];
  if (last) await selectSession(last.id);
  else await newSession();
}
