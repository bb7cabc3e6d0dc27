import { api, loggedOut, showAny } from './api.js';
import { describeAgent } from './render.js';
import { deleteSession, loadSessions, newSession, renameSession, selectSession, syncLevel } from './sessions.js';
import { connect, growInput, send } from './socket.js';
import { wireFiles } from './files.js';
import { $, $input, $select, key, state } from './state.js';

/**
 * The web chat page's script (bundled by api/page-bundle.ts). It writes textContent, except an
 * answer in Markdown (render.ts: marked, then DOMPurify). Wire shapes: src/bridges/web-protocol.ts.
 */
async function boot(): Promise<void> {
  try {
    state.me = await api('GET', '/chat/api/me');
  } catch (e) {
    loggedOut(e as Error);
    return;
  }
  $('who').textContent = state.me!.user + ' @ ' + state.me!.project;
  $('title').textContent = state.me!.project;
  describeAgent(state.me!.agent);
  document.title = state.me!.project + ' · berth chat';
  await loadSessions();
  let pick = localStorage.getItem(key('session'));
  if (!state.sessions.some((s) => s.id === pick)) pick = state.sessions[state.sessions.length - 1]?.id ?? null;
  if (pick) await selectSession(pick);
  else await newSession();
  $select('session').onchange = () => selectSession($select('session').value).catch(showAny);
  $('new').onclick = () => newSession().catch(showAny);
  $('delete').onclick = () => deleteSession().catch(showAny);
  $('rename').onclick = () => renameSession().catch(showAny);
  $select('level').onchange = () => {
    localStorage.setItem(key('level:' + state.session), $select('level').value);
    void syncLevel($select('level').value);
  };
  ($('composer') as HTMLFormElement).onsubmit = send;
  $input('input').onkeydown = (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey) send(ev);
  };
  // The box grows with what is typed, up to its CSS max-height.
  $input('input').oninput = () => growInput();
  wireFiles();
  connect();
}

boot().catch(showAny);
